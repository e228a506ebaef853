"""Fingerprint diffs (pure function; per-item transitions are computed in SQL and tested on a constructed
pair in tests/integration/test_reports.py)."""

from uep_common.fingerprint import diff_fingerprints

BASE = {
    "model.name": "m",
    "model.version": "1",
    "model.id": "a",
    "benchmark.slug": "mmlu",
    "benchmark.version": "v1",
    "prompt.template_sha256": "t1",
    "prompt.fewshot_k": 0,
    "decoding.max_tokens": 32,
    "decoding.temperature": 0.0,
    "run.max_parallel": None,
    "run.batch_size": None,
    "scorer.metric_versions": {"mc": ["1"]},
}


def test_only_the_model_changed_gives_no_warning():
    cur = BASE | {"model.version": "2", "model.id": "b"}
    d = diff_fingerprints(BASE, cur)
    assert [c.field for c in d.changes] == ["model.version", "model.id"]
    assert d.only_model_changed and d.warning is None and d.changed_groups == ["model"]


def test_every_other_change_is_named_and_warned_about():
    cur = BASE | {
        "model.version": "2",
        "prompt.template_sha256": "t2",
        "decoding.temperature": 0.7,
        "run.max_parallel": 8,
        "scorer.metric_versions": {"mc": ["2"]},
        "benchmark.version": "v2",
    }
    d = diff_fingerprints(BASE, cur)
    fields = [c.field for c in d.changes]
    assert fields == [
        "model.version",
        "benchmark.version",
        "prompt.template_sha256",
        "decoding.temperature",
        "run.max_parallel",
        "scorer.metric_versions",
    ]
    assert not d.only_model_changed
    for f in fields[1:]:
        assert f in d.warning
    assert d.changes[-1].baseline == {"mc": ["1"]} and d.changes[-1].current == {"mc": ["2"]}


def test_identical_runs():
    d = diff_fingerprints(BASE, dict(BASE))
    assert d.changes == [] and d.only_model_changed and d.warning is None
