"""Fingerprint diffs (pure function; per-item transitions are computed in SQL and tested on a constructed
pair in tests/integration/test_reports.py)."""

from uep_common.analytics.fingerprint import diff_fingerprints

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


# ---------------------------------------------------------------- fingerprints of A/B arms (rows built in memory)

import hashlib  # noqa: E402
import uuid  # noqa: E402

from uep_common.analytics.fingerprint import build_fingerprint  # noqa: E402
from uep_common.records.creation import evaluation_config  # noqa: E402
from uep_common.tables.models import Benchmark, Evaluation, Model  # noqa: E402

BENCH_TEMPLATE = "Question: {{ question }}\nAnswer:"
TERSE_TEMPLATE = "{{ question }}\nReply with the number only."


def _arm(config: dict) -> tuple[Evaluation, Model, Benchmark]:
    bench = Benchmark(
        id=uuid.UUID(int=1),
        slug="gsm8k",
        version="v1",
        config={"prompt": {"template": BENCH_TEMPLATE, "fewshot_k": 0, "chat": None}, "metric": {"name": "m"}},
    )
    model = Model(id=uuid.UUID(int=2), name="uep-oracle", version="1", backend="triton", decoding_defaults={})
    ev = Evaluation(id=uuid.uuid4(), model_id=model.id, benchmark_id=bench.id, repeats=1, sample_limit=8, config=config)
    return ev, model, bench


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_an_arm_s_own_template_few_shot_and_chat_are_what_its_fingerprint_hashes():
    # the base arm renders with the benchmark's template; the terse arm with its own, 3 demonstrations, chat on
    base = build_fingerprint(*_arm(evaluation_config()), {})
    terse = build_fingerprint(*_arm(evaluation_config(prompt_template=TERSE_TEMPLATE, fewshot_k=3, chat_template=True)), {})
    assert base["prompt.template_sha256"] == _sha(BENCH_TEMPLATE)
    assert terse["prompt.template_sha256"] == _sha(TERSE_TEMPLATE)
    assert (terse["prompt.fewshot_k"], terse["prompt.chat"]) == (3, True)
    d = diff_fingerprints(base, terse)
    assert [c.field for c in d.changes] == ["prompt.template_sha256", "prompt.fewshot_k", "prompt.chat"]
    assert d.changed_groups == ["prompt"] and not d.only_model_changed
    assert "prompt.template_sha256" in d.warning


def test_a_benchmark_without_a_prompt_hashes_the_default_template_items_are_rendered_with():
    ev, model, bench = _arm({})
    bench.config = {"metric": {"name": "m"}}
    fp = build_fingerprint(ev, model, bench, {})
    assert fp["prompt.template_sha256"] == _sha("{{ prompt }}")  # uep_common.contract.configs.DEFAULT_PROMPT
    assert (fp["prompt.fewshot_k"], fp["prompt.chat"]) == (0, None)


# ---------------------------------------------------------------- the declared metric set


def _bench_fp(config: dict) -> dict[str, object]:
    ev, model, bench = _arm({})
    bench.config = config
    return build_fingerprint(ev, model, bench, {})


def test_a_single_metric_benchmark_keeps_its_fingerprint_fields():
    # exactly the keys and scorer values a benchmark with ``metric`` alone always had (no scorer.metrics)
    fp = _bench_fp({"metric": {"name": "label_match", "params": {"normalize": True}}})
    assert [k for k in fp if k.startswith("scorer.")] == ["scorer.metric", "scorer.params", "scorer.metric_versions"]
    assert (fp["scorer.metric"], fp["scorer.params"]) == ("label_match", {"normalize": True})


def test_benchmarks_differing_only_in_their_metric_set_differ_in_the_scorer_group():
    one = {"metric": {"name": "label_match"}, "class_names": ["a", "b"], "metrics": [{"name": "f1_macro", "primary": True}]}
    two = one | {"metrics": [{"name": "f1_macro", "primary": True}, {"name": "roc_auc"}]}
    other_primary = one | {"metrics": [{"name": "f1_macro"}, {"name": "roc_auc", "primary": True}]}
    a, b, c = _bench_fp(one), _bench_fp(two), _bench_fp(other_primary)
    assert a["scorer.metrics"] == [{"name": "f1_macro", "params": {}, "primary": True}]
    assert b["scorer.metrics"] == [
        {"name": "f1_macro", "params": {}, "primary": True},
        {"name": "roc_auc", "params": {}, "primary": False},
    ]
    assert (a["scorer.primary"], b["scorer.primary"], c["scorer.primary"]) == ("f1_macro", "f1_macro", "roc_auc")
    d = diff_fingerprints(a, b)
    assert [x.field for x in d.changes] == ["scorer.metrics"] and d.changed_groups == ["scorer"]
    assert "scorer.metrics" in d.warning
    assert [x.field for x in diff_fingerprints(b, c).changes] == ["scorer.metrics", "scorer.primary"]


def test_a_metrics_only_benchmark_names_the_verdict_metric_and_its_params():
    # no ``metric`` block: the first per-item entry of ``metrics`` decides verdicts (BenchmarkConfig.scoring_metric)
    fp = _bench_fp({"metrics": [{"name": "ndcg", "params": {"k": 5}, "primary": True}, {"name": "mrr"}]})
    assert (fp["scorer.metric"], fp["scorer.params"], fp["scorer.primary"]) == ("ndcg", {"k": 5}, "ndcg@5")
