"""Registry and result-type contract of uep_scorer.metrics (the API the service wiring relies on)."""

import dataclasses

import pytest

from uep_scorer.metrics import (
    Metric,
    MetricInputError,
    MetricResult,
    UnknownMetricError,
    available_metrics,
    get_metric,
)

EXPECTED = [
    "agent_answer",
    "agent_path",
    "agent_traceable",
    "contains",
    "exact_match",
    "fuzzy_match",
    "gsm8k_numeric_exact_match",
    "humaneval_pass_at_1",
    "label_match",
    "loglik_multiple_choice",
    "multiple_choice_letter",
    "ndcg",
    "pass_at_k",
    "regex_match",
    "rouge",
    "sentence_bleu",
    "sentence_chrf",
    "token_f1",
]

VERSIONS = {
    "contains": "2",
    "exact_match": "2",
    "fuzzy_match": "2",
    "gsm8k_numeric_exact_match": "2",
    "multiple_choice_letter": "2",
    "regex_match": "2",
    "sentence_bleu": "2",
}
"""Metrics whose rules changed since their first version (each bump can alter a stored verdict)."""


def test_available_metrics_lists_the_catalogue_sorted():
    assert available_metrics() == EXPECTED


@pytest.mark.parametrize("name", available_metrics())
def test_get_metric_returns_a_named_versioned_metric(name):
    metric = get_metric(name)
    assert isinstance(metric, Metric)
    assert metric.name == name
    assert metric.version == VERSIONS.get(name, "1")


def test_unknown_metric_is_a_key_error_naming_it_and_the_known_ones():
    with pytest.raises(KeyError) as info:
        get_metric("meteor")
    err = info.value
    assert isinstance(err, UnknownMetricError)
    assert str(err) == ("unknown metric 'meteor'; known metrics: " + ", ".join(EXPECTED))


def test_metric_result_is_frozen_and_serialisable():
    result = get_metric("multiple_choice_letter").score("B", {"answer": "B"}, {})
    assert isinstance(result, MetricResult)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.score = 0.0  # type: ignore[misc]
    assert dataclasses.asdict(result) == {
        "name": "multiple_choice_letter",
        "version": "2",
        "is_correct": True,
        "score": 1.0,
        "extracted": "B",
        "details": {"extraction": "bare", "cue": "B", "choices": "ABCD", "reference": "B"},
        "prediction": None,
    }


def test_metric_input_error_is_a_value_error():
    # Bad data/config raises (loudly) instead of being recorded as a wrong answer.
    with pytest.raises(ValueError):
        get_metric("gsm8k_numeric_exact_match").score("18", {}, {})
    assert issubclass(MetricInputError, ValueError)
