"""An upload's ``metrics`` and ``positive_class`` (uep_gateway.schemas.BenchmarkSpec and
uep_gateway.uploads.metric_set_problems): what is accepted, and the field each refusal names."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from uep_common.contract.configs import check_benchmark_config, parse_benchmark_config
from uep_gateway.schemas import BenchmarkSpec
from uep_gateway.uploads import metric_set_problems

# the per-item metrics of the scorer's registry this test needs, as GET /v1/metrics gives them
CATALOGUE = {
    "label_match": ({"labels": "list"}, []),
    "exact_match": ({"normalize": "bool"}, []),
    "ndcg": ({"k": "int"}, []),
}
BASE = {"slug": "cls", "name": "c", "prompt": {"template": "{{ x }}"}, "metric": {"name": "label_match"}}


def _problems(metric: str, entries: list[dict]) -> list[tuple[list[str], str]]:
    spec = BenchmarkSpec.model_validate(BASE | {"metric": {"name": metric}, "metrics": entries})
    assert spec.metrics is not None
    found = metric_set_problems(
        spec.metric.name, spec.metric.params, [(m.name, m.params, m.primary) for m in spec.metrics], CATALOGUE
    )
    return [(p.loc, p.type) for p in found]


def test_several_metrics_with_one_primary_are_accepted_and_stored_as_built_ins_declare_them():
    entries = [{"name": "f1_macro", "primary": True}, {"name": "roc_auc"}, {"name": "exact_match", "params": {"normalize": True}}]
    assert _problems("label_match", entries) == []
    spec = BenchmarkSpec.model_validate(BASE | {"metrics": entries, "class_names": ["no", "yes"]})
    config = check_benchmark_config(
        {
            "metric": spec.metric.model_dump(),
            "metrics": [m.model_dump() for m in spec.metrics or []],
            "class_names": spec.class_names,
        }
    )
    parsed = parse_benchmark_config(config)
    assert parsed.primary_score == "f1_macro"
    assert [m.name for m in parsed.item_metrics] == ["label_match", "exact_match"]  # verdict metric first


def test_without_a_primary_entry_the_first_is_primary():
    parsed = parse_benchmark_config({"metric": {"name": "ndcg"}, "metrics": [{"name": "mrr"}, {"name": "ndcg@5"}]})
    assert _problems("ndcg", [{"name": "mrr"}, {"name": "ndcg@5"}]) == []
    assert parsed.primary_score == "mrr"


@pytest.mark.parametrize(
    ("metric", "entries", "expected"),
    [
        (
            "label_match",
            [{"name": "f1_macro"}, {"name": "no_such"}],
            [(["body", "spec", "metrics", "1", "name"], "unknown_metric")],
        ),
        (
            "label_match",
            [{"name": "roc_auc"}, {"name": "roc_auc"}],
            [(["body", "spec", "metrics", "1", "name"], "duplicate_metric")],
        ),
        (
            "label_match",
            [{"name": "label_match", "params": {"labels": ["a"]}}],
            [(["body", "spec", "metrics", "0", "name"], "duplicate_metric")],
        ),
        ("exact_match", [{"name": "f1_macro"}], [(["body", "spec", "metrics", "0", "name"], "metric_kind_mismatch")]),
        ("label_match", [{"name": "ndcg@10"}], [(["body", "spec", "metrics", "0", "name"], "metric_kind_mismatch")]),
        (
            "label_match",
            [{"name": "f1_macro", "primary": True}, {"name": "roc_auc", "primary": True}],
            [(["body", "spec", "metrics", "1", "primary"], "several_primary")],
        ),
        (
            "label_match",
            [{"name": "roc_auc", "params": {"k": 1}}],
            [(["body", "spec", "metrics", "0", "params", "k"], "unknown_param")],
        ),
        (
            "label_match",
            [{"name": "exact_match", "params": {"normalize": "yes", "x": 1}}],
            [
                (["body", "spec", "metrics", "0", "params", "x"], "unknown_param"),
                (["body", "spec", "metrics", "0", "params", "normalize"], "bad_param"),
            ],
        ),
    ],
)
def test_bad_entries_are_named(metric, entries, expected):
    assert _problems(metric, entries) == expected


def test_the_list_is_size_bounded_and_entries_take_no_other_keys():
    with pytest.raises(ValidationError) as info:
        BenchmarkSpec.model_validate(BASE | {"metrics": [{"name": f"m{i}"} for i in range(17)]})
    assert info.value.errors()[0]["loc"] == ("metrics",)
    with pytest.raises(ValidationError) as info:
        BenchmarkSpec.model_validate(BASE | {"metrics": []})
    assert info.value.errors()[0]["loc"] == ("metrics",)
    with pytest.raises(ValidationError) as info:
        BenchmarkSpec.model_validate(BASE | {"metrics": [{"name": "f1_macro", "weight": 2}]})
    assert info.value.errors()[0]["loc"] == ("metrics", 0, "weight")


def test_positive_class_must_be_one_of_two_class_names():
    ok = BenchmarkSpec.model_validate(BASE | {"class_names": ["benign", "malignant"], "positive_class": "benign"})
    assert ok.positive_class == "benign"
    for extra in (
        {"class_names": ["benign", "malignant"], "positive_class": "cancer"},
        {"class_names": ["a", "b", "c"], "positive_class": "a"},
        {"positive_class": "a"},
    ):
        with pytest.raises(ValidationError) as info:
            BenchmarkSpec.model_validate(BASE | extra)
        assert info.value.errors()[0]["loc"] == ("positive_class",)
    with pytest.raises(ValidationError) as info:  # the stored config checks the same
        check_benchmark_config({"class_names": ["a", "b"], "positive_class": "c"})
    assert info.value.errors()[0]["loc"] == ("positive_class",)
