"""The typed models of ``benchmarks.config`` and ``evaluations.config`` (uep_common.contract.configs): old rows parse,
bad values and unknown keys are refused naming the field, what writers store keeps its keys and values."""

import uuid

import pytest
from pydantic import ValidationError

from uep_common.builtin.catalog import BENCHMARKS, GSM8K_TEMPLATE
from uep_common.contract.benchmarks import content_hash
from uep_common.contract.configs import (
    CONFIG_SCHEMA_VERSION,
    DEFAULT_PROMPT,
    check_benchmark_config,
    check_evaluation_config,
    parse_benchmark_config,
    parse_evaluation_config,
)
from uep_common.contract.judge_config import merge_judge_config
from uep_common.records.creation import evaluation_config


def _locs(exc: pytest.ExceptionInfo[ValidationError]) -> list[tuple]:
    return [tuple(e["loc"]) for e in exc.value.errors()]


def test_rows_without_schema_version_parse_as_version_1():
    bench = parse_benchmark_config({"prompt": {"template": "{{ q }}"}, "metric": {"name": "exact_match", "params": {}}})
    ev = parse_evaluation_config({"max_in_flight": 4, "fewshot_k": 2})
    assert CONFIG_SCHEMA_VERSION == 1
    assert bench.schema_version == 1 and ev.schema_version == 1
    assert bench.template == "{{ q }}" and bench.metric_name == "exact_match" and bench.metric.params == {}
    assert ev.max_in_flight == 4 and ev.max_parallel == 4 and ev.fewshot_k == 2 and ev.chat_template is None


def test_empty_and_missing_configs_take_the_defaults():
    for raw in (None, {}):
        bench = parse_benchmark_config(raw)
        assert bench.prompt is None and bench.metric is None and bench.judge is None
        assert bench.prompt_spec == DEFAULT_PROMPT and bench.prompt_spec.template == "{{ prompt }}"
        assert bench.metric_name is None and bench.template is None and bench.judge_block is None
        ev = parse_evaluation_config(raw)
        assert ev.max_in_flight is None and ev.cost_estimate is None and ev.estimate_dict is None and ev.judge is None


def test_a_parsed_config_is_returned_as_it_is():
    bench = parse_benchmark_config({"language": "de"})
    ev = parse_evaluation_config({"max_cost": 2.5})
    assert parse_benchmark_config(bench) is bench and parse_evaluation_config(ev) is ev


@pytest.mark.parametrize(
    ("raw", "loc"),
    [
        ({"prompt": {"template": "x", "max_tokens": 0}}, ("prompt", "max_tokens")),
        ({"prompt": {"max_tokens": 5}}, ("prompt", "template")),
        ({"metric": {"params": {}}}, ("metric", "name")),
        ({"metric": {"name": "m", "params": [1]}}, ("metric", "params")),
        ({"judge": {"mode": "rubric"}}, ("judge", "judges")),
        ({"schema_version": 2}, ("schema_version",)),
    ],
)
def test_a_bad_benchmark_value_is_refused_naming_the_field(raw, loc):
    with pytest.raises(ValidationError) as exc:
        parse_benchmark_config(raw)
    assert _locs(exc) == [loc]


@pytest.mark.parametrize(
    ("raw", "loc"),
    [
        ({"fewshot_k": 17}, ("fewshot_k",)),
        ({"max_in_flight": 0}, ("max_in_flight",)),
        ({"sample_timeout_s": -1}, ("sample_timeout_s",)),
        ({"max_cost": float("inf")}, ("max_cost",)),
        ({"chat_template": "sometimes"}, ("chat_template",)),
        ({"evaluation_type": "vibes"}, ("evaluation_type",)),
        ({"annotation_task_id": "not-a-uuid"}, ("annotation_task_id",)),
        ({"cost_estimate": {"items": 3, "currency": "EUR"}}, ("cost_estimate", "estimate")),
        ({"judge": {"judges": ["a", "a"]}}, ("judge", "judges")),
        ({"schema_version": 0}, ("schema_version",)),
    ],
)
def test_a_bad_evaluation_value_is_refused_naming_the_field(raw, loc):
    with pytest.raises(ValidationError) as exc:
        parse_evaluation_config(raw)
    assert _locs(exc) == [loc]


def test_a_config_that_is_not_an_object_is_refused():
    with pytest.raises(ValidationError) as exc:
        parse_evaluation_config(["max_in_flight", 4])
    assert exc.value.errors()[0]["type"] == "dict_type"


def test_unknown_keys_are_kept_on_read_and_refused_on_write():
    raw = {"max_in_flight": 2, "from_a_newer_writer": {"x": 1}}
    assert parse_evaluation_config(raw).model_extra == {"from_a_newer_writer": {"x": 1}}
    with pytest.raises(ValidationError) as exc:
        check_evaluation_config(raw)
    assert [(e["loc"], e["type"]) for e in exc.value.errors()] == [(("from_a_newer_writer",), "extra_forbidden")]
    with pytest.raises(ValidationError) as exc:
        check_benchmark_config({"prompt": {"template": "t"}, "metrics": {"name": "m"}})
    assert _locs(exc) == [("metrics",)]


def test_builtin_configs_check_unchanged_so_their_versions_stay():
    for b in BENCHMARKS:
        stored = check_benchmark_config(b.config)
        assert stored == b.config and stored is not b.config
        assert content_hash(stored, []) == content_hash(b.config, [])
    judged = parse_benchmark_config(next(b for b in BENCHMARKS if b.slug == "gsm8k-judged").config)
    assert judged.metric is None and judged.template == GSM8K_TEMPLATE
    assert judged.judge.mode == "reference" and [d.name for d in judged.judge.dimensions] == [
        "accuracy",
        "completeness",
        "clarity",
    ]
    gsm8k = parse_benchmark_config(next(b for b in BENCHMARKS if b.slug == "gsm8k").config)
    assert gsm8k.prompt.max_tokens == 256 and gsm8k.prompt.stop == ["\n\nQuestion:"] and gsm8k.language == "en"
    assert gsm8k.metric.params == {"variant": "flexible"}


def test_the_create_options_are_stored_under_their_keys():
    stored = evaluation_config(
        max_parallel=3, fewshot_k=0, chat_template=False, prompt_template="P {{ q }}", sample_timeout_s=2.5
    )
    assert stored == {
        "max_in_flight": 3,
        "fewshot_k": 0,
        "chat_template": False,
        "prompt_template": "P {{ q }}",
        "sample_timeout_s": 2.5,
    }
    assert check_evaluation_config(stored) == stored
    assert evaluation_config() == {}
    with pytest.raises(ValidationError) as exc:
        evaluation_config(fewshot_k=-1)
    assert _locs(exc) == [("fewshot_k",)]


def test_the_old_name_max_parallel_reads_as_max_in_flight():
    assert parse_evaluation_config({"max_parallel": 6}).max_in_flight == 6


def test_the_cost_estimate_comes_back_with_the_keys_it_was_stored_with():
    estimate = {
        "evaluation_id": str(uuid.uuid4()),
        "model": "m",
        "benchmark": "gsm8k",
        "arm": "main",
        "items": 100,
        "cost_unit": "tokens",
        "per_item": 0.0012,
        "estimate": 0.12,
        "currency": "EUR",
        "expected": {"input_tokens": 500, "output_tokens": 256, "latency_ms": 1000.0},
    }
    cfg = parse_evaluation_config({"cost_estimate": estimate, "max_cost": 1.5})
    assert cfg.estimate_dict == estimate and cfg.max_cost == 1.5 and cfg.cost_estimate.items == 100
    assert parse_evaluation_config({"cost_estimate": {"estimate": 1.0, "items": 2, "currency": "EUR"}}).estimate_dict == {
        "estimate": 1.0,
        "items": 2,
        "currency": "EUR",
    }


def test_the_judge_block_is_the_base_of_the_evaluation_override():
    bench = parse_benchmark_config({"judge": {"mode": "reference", "judges": ["j1"], "max_retries": 1}})
    assert bench.judge_block == {"mode": "reference", "judges": ["j1"], "max_retries": 1}
    merged = merge_judge_config(bench.judge_block, {"judges": ["j2", "j3"]})
    assert merged.mode == "reference" and merged.judges == ["j2", "j3"] and merged.max_retries == 1
    snapshot = merged.model_dump(mode="json", exclude_none=True)
    ev = parse_evaluation_config({"judge": snapshot})
    assert ev.judge == merged
    assert parse_evaluation_config({"judge": {}}).judge is None  # an empty snapshot means none


def test_human_evaluation_keys():
    task, source = uuid.uuid4(), uuid.uuid4()
    raw = {"evaluation_type": "human", "source_evaluation_id": str(source), "annotation_task_id": str(task)}
    assert check_evaluation_config(raw) == raw
    cfg = parse_evaluation_config(raw)
    assert cfg.evaluation_type == "human" and cfg.source_evaluation_id == str(source) and cfg.annotation_task_id == task
    assert cfg.compare_evaluation_id is None
