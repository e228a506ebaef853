"""The typed parameter model of each metric (uep_common.contract.metric_params): its defaults, its bounds, a
bad value refused naming the field, unknown parameters refused, and null taking the default. The expected
defaults and bounds are the metrics' documented ones (each model's Field, mirrored from the scorer's rules)."""

from typing import Any

import pytest
from pydantic import ValidationError

from uep_common.contract.metric_params import (
    UnknownMetricParamsError,
    param_problems,
    params_model,
    params_schema,
    registered_params,
    validate_params,
)

# metric → (params, expected values of its defaults)
DEFAULTS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "exact_match": ({}, {"ignore_case": False, "ignore_whitespace": True, "regexes_to_ignore": [], "squad": False}),
    "contains": ({}, {"ignore_punctuation": False, "ignore_articles": False}),
    "regex_match": ({"pattern": r"\d+"}, {"flags": "", "ignore_whitespace": True}),
    "fuzzy_match": ({}, {"threshold": 90.0, "partial": False, "min_reference_length": 20}),
    "sentence_bleu": ({}, {"tokenize": None, "language": None, "lowercase": False, "effective_order": True, "threshold": None}),
    "sentence_chrf": ({}, {"word_order": 0, "char_order": 6, "beta": 2, "lowercase": False, "threshold": None}),
    "rouge": ({}, {"types": ["rouge1", "rouge2", "rougeL", "rougeLsum"], "language": "en", "use_stemmer": False}),
    "token_f1": ({}, {"style": "squad", "stop_at": [], "split_on": "whitespace", "threshold": None}),
    "gsm8k_numeric_exact_match": ({}, {"variant": "flexible"}),
    "multiple_choice_letter": ({}, {"choices": "ABCD"}),
    "loglik_multiple_choice": ({}, {}),
    "label_match": ({}, {"ignore_case": False, "labels": []}),
    "ndcg": ({}, {"k": 10}),
    "humaneval_pass_at_1": ({}, {"timeout_s": 10.0}),
    "pass_at_k": ({}, {"k": 1}),
    # agents compare text answers case-insensitively unless told otherwise (uep_scorer.metrics.agent)
    "agent_answer": ({}, {"ignore_case": True, "ignore_whitespace": True}),
    "agent_traceable": ({}, {"ignore_case": True, "squad": False}),
    "agent_path": ({}, {"ignore_case": True, "allow_without_evidence": False}),
}

# metric → (a value at a bound that is accepted, a value past it that is refused), each {field: value}
BOUNDS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("fuzzy_match", {"threshold": 100}, {"threshold": 100.5}),
    ("fuzzy_match", {"min_reference_length": 0}, {"min_reference_length": -1}),
    ("sentence_bleu", {"threshold": 0}, {"threshold": -0.1}),
    ("sentence_chrf", {"word_order": 6}, {"word_order": 7}),
    ("sentence_chrf", {"char_order": 1}, {"char_order": 0}),
    ("sentence_chrf", {"beta": 10}, {"beta": 11}),
    ("rouge", {"threshold": 1}, {"threshold": 1.01}),
    ("rouge", {"types": ["rougeLsum"]}, {"types": []}),
    ("token_f1", {"stop_at": ["x"] * 32}, {"stop_at": ["x"] * 33}),
    ("token_f1", {"threshold": 0.0}, {"threshold": 2}),
    ("ndcg", {"k": 1}, {"k": 0}),
    ("pass_at_k", {"k": 1}, {"k": 0}),
    ("humaneval_pass_at_1", {"timeout_s": 120}, {"timeout_s": 120.5}),
    ("humaneval_pass_at_1", {"timeout_s": 0.01}, {"timeout_s": 0}),
    ("exact_match", {"regexes_to_ignore": ["a"] * 64}, {"regexes_to_ignore": ["a"] * 65}),
]

# metric → (params with one bad value, the path pydantic names, a word of its reason)
BAD: list[tuple[str, dict[str, Any], tuple[Any, ...], str]] = [
    ("exact_match", {"ignore_case": "maybe"}, ("ignore_case",), "boolean"),
    ("agent_path", {"allow_without_evidence": "yes"}, ("allow_without_evidence",), "boolean"),
    ("contains", {"regexes_to_ignore": ["ok", "("]}, ("regexes_to_ignore", 1), "regex"),
    ("regex_match", {}, ("pattern",), "required"),
    ("regex_match", {"pattern": "x", "flags": "iz"}, ("flags",), "pattern"),
    ("regex_match", {"pattern": "(unclosed"}, ("pattern",), "regex"),
    ("fuzzy_match", {"partial": 1}, ("partial",), "boolean"),
    ("sentence_bleu", {"tokenize": "moses"}, ("tokenize",), "13a"),
    ("sentence_chrf", {"beta": 2.5}, ("beta",), "integer"),
    ("rouge", {"types": ["rouge1", "rouge1"]}, ("types",), "distinct"),
    ("rouge", {"types": ["rougeX"]}, ("types", 0), "pattern"),
    ("rouge", {"language": "de", "use_stemmer": True}, ("use_stemmer",), "English"),
    ("token_f1", {"style": "bleu"}, ("style",), "squad"),
    ("token_f1", {"stop_at": [""]}, ("stop_at", 0), "at least 1"),
    ("gsm8k_numeric_exact_match", {"variant": "loose"}, ("variant",), "flexible"),
    ("multiple_choice_letter", {"choices": "ABA"}, ("choices",), "distinct"),
    ("multiple_choice_letter", {"choices": ["AB"]}, ("choices",), "single letters"),
    ("loglik_multiple_choice", {"k": 1}, ("k",), "Extra inputs"),
    ("label_match", {"labels": "spam"}, ("labels",), "list"),
    ("ndcg", {"k": "10"}, ("k",), "integer"),
    ("humaneval_pass_at_1", {"timeout_s": True}, ("timeout_s",), "number"),
    ("pass_at_k", {"k": 1.0}, ("k",), "integer"),
]


def test_every_metric_has_a_model_and_a_defaults_case():
    assert sorted(registered_params()) == sorted(DEFAULTS)


@pytest.mark.parametrize("metric", sorted(DEFAULTS))
def test_defaults(metric: str):
    params, expected = DEFAULTS[metric]
    parsed = validate_params(metric, params).model_dump()
    assert {k: parsed[k] for k in expected} == expected
    # a parameter given as null takes its default
    nulls = dict.fromkeys(expected, None) | params
    assert validate_params(metric, nulls).model_dump() == parsed


@pytest.mark.parametrize(("metric", "ok", "bad"), BOUNDS)
def test_bounds(metric: str, ok: dict[str, Any], bad: dict[str, Any]):
    model = params_model(metric)
    assert model.model_validate(ok).model_dump()[next(iter(ok))] == next(iter(ok.values()))
    with pytest.raises(ValidationError) as exc:
        model.model_validate(bad)
    assert [e["loc"][0] for e in exc.value.errors()] == list(bad)


@pytest.mark.parametrize(("metric", "params", "loc", "reason"), BAD)
def test_a_bad_value_names_the_field(metric: str, params: dict[str, Any], loc: tuple[Any, ...], reason: str):
    problems = param_problems(metric, params)
    assert [p.loc for p in problems] == [loc]
    assert reason.lower() in problems[0].msg.lower()
    assert problems[0].kind == ("unknown_param" if reason == "Extra inputs" else "bad_param")
    assert problems[0].message(metric).startswith(f"{metric} parameter {'.'.join(map(str, loc))!r}: ")


@pytest.mark.parametrize("metric", sorted(DEFAULTS))
def test_unknown_parameters_are_refused(metric: str):
    params = DEFAULTS[metric][0] | {"colour": "blue"}
    assert [(p.loc, p.kind) for p in param_problems(metric, params)] == [(("colour",), "unknown_param")]


def test_typed_readings():
    assert validate_params("multiple_choice_letter", {"choices": ["a", "b", "c"]}).letters == "ABC"  # type: ignore[attr-defined]
    assert validate_params("gsm8k_numeric_exact_match", {"variant": "strict-match"}).extraction == "strict"  # type: ignore[attr-defined]
    assert validate_params("regex_match", {"pattern": "x", "flags": "is"}).regex_flags == 2 | 16  # type: ignore[attr-defined]
    assert validate_params("rouge", {"language": "EN_us", "use_stemmer": True}).primary_language == "en"  # type: ignore[attr-defined]


def test_schema_is_the_models():
    schema = params_schema("fuzzy_match")
    assert schema == params_model("fuzzy_match").model_json_schema()
    assert schema["additionalProperties"] is False
    assert schema["properties"]["threshold"] | {} == {
        "default": 90.0,
        "description": "minimum similarity for a correct answer, inclusive",
        "maximum": 100,
        "minimum": 0,
        "title": "Threshold",
        "type": "number",
        "unit": "points (0-100)",
    }
    assert params_schema("regex_match")["required"] == ["pattern"]


def test_unknown_metric():
    with pytest.raises(UnknownMetricParamsError, match="no parameter model is registered for metric 'nope'"):
        params_model("nope")


def test_stored_parameter_dicts_still_load():
    """Configs stored before the models existed hold plain dicts: every built-in benchmark's (as seeded into
    the database) and the shapes the old type checks let through (null for "the default", lm-evaluation-harness's
    variant names, letters as a list) load through the models unchanged."""
    from uep_common.builtin.catalog import BENCHMARKS
    from uep_common.contract.configs import parse_benchmark_config

    for b in BENCHMARKS:
        config = parse_benchmark_config(b.config)
        for m in config.item_metrics:
            assert param_problems(m.name, m.params) == [], (b.slug, m.name)
    old: list[tuple[str, dict[str, Any]]] = [
        ("sentence_bleu", {"threshold": None, "tokenize": None}),
        ("gsm8k_numeric_exact_match", {"variant": "flexible-extract"}),
        ("multiple_choice_letter", {"choices": list("ABCDEFGHIJ")}),
        ("humaneval_pass_at_1", {"timeout_s": 10}),
    ]
    for metric, params in old:
        assert param_problems(metric, params) == [], metric
