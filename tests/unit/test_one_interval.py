"""One interval per figure: a proportion of items (accuracy, hit@k) has the Wilson score interval wherever it is
shown (the summary's set-level metrics, the API's headline, the leaderboard, the report, the CLI), and every
surface names the method beside the interval and writes a proportion as a percentage.

Expected values: the Wilson score interval at 95 % (Wilson 1927; ``scipy.stats.binomtest(k, n)
.proportion_ci(method="wilson")``) of 0/10 is [0, 0.27754] and of 9/10 [0.59585, 0.98212], by the formula
(p + z²/2n ± z·sqrt(p(1−p)/n + z²/4n²)) / (1 + z²/n) with z = 1.959964. A bootstrap of ten equal items is the
degenerate [v, v], which must not be what is shown.
"""

from __future__ import annotations

import asyncio
import uuid

import numpy as np
import pytest
from scipy.stats import binomtest

from uep_cli.figures import headline_text
from uep_common.analytics.leaderboards import compute_score
from uep_common.analytics.set_metrics import classification_items, classification_metrics, ranking_set_metrics
from uep_common.analytics.summary import Headline, headline_of
from uep_common.contract.events import EvaluationSummary, SetMetrics
from uep_common.tables.models import Evaluation
from uep_reporter.analysis import _est_metric
from uep_reporter.report import _civ, _fig

WILSON_0_OF_10 = (0.0, 0.27754)
WILSON_9_OF_10 = (0.59585, 0.98212)


def headline(summary: dict) -> Headline:
    """``headline_of(summary)``, which every summary of these tests has."""
    found = headline_of(summary)
    assert found is not None
    return found


def test_the_expected_values_are_scipy_s_wilson_interval():
    for k, (lo, hi) in ((0, WILSON_0_OF_10), (9, WILSON_9_OF_10)):
        ci = binomtest(k, 10).proportion_ci(confidence_level=0.95, method="wilson")
        assert (ci.low, ci.high) == pytest.approx((lo, hi), abs=1e-5)


def _classifier_summary(correct: int, n: int = 10, errors: int = 0, primary: str | None = None) -> dict:
    gold = ["a", "b"] * (n // 2)
    predicted = [g if i < correct else ("b" if g == "a" else "a") for i, g in enumerate(gold)]
    result = classification_metrics(classification_items(gold, predicted, None, ["a", "b"]), n_resamples=400)
    ci = binomtest(correct, n).proportion_ci(method="wilson") if n else None
    sm = SetMetrics.model_validate({**result, "excluded": errors, "primary": primary})
    return EvaluationSummary(
        n=n + errors,
        scored=n,
        correct=correct,
        errors=errors,
        accuracy=correct / n,
        ci_low=ci.low if ci else None,
        ci_high=ci.high if ci else None,
        latency_ms_p50=None,
        latency_ms_p90=None,
        prompt_tokens=0,
        completion_tokens=0,
        metric_name="label_match",
        set_metrics=sm,
    ).model_dump(mode="json")


def test_a_classifier_s_accuracy_of_0_of_10_is_wilson_not_a_degenerate_bootstrap():
    summary = _classifier_summary(0)
    acc = summary["set_metrics"]["headline"]["accuracy"]
    assert acc["value"] == 0.0
    assert (acc["ci_low"], acc["ci_high"]) == pytest.approx(WILSON_0_OF_10, abs=1e-5)  # not [0.0, 0.0]
    assert acc["method"] == "wilson"
    assert summary["set_metrics"]["headline"]["f1_macro"]["method"] == "bootstrap"
    hl = headline(summary)
    assert (hl.metric, hl.method, hl.proportion) == ("accuracy", "wilson", True)
    assert (hl.ci_low, hl.ci_high) == pytest.approx(WILSON_0_OF_10, abs=1e-5)
    assert headline_text({"headline": hl.model_dump(mode="json")}) == ("accuracy 0.0 %", "[0.0–27.8] Wilson")


def test_the_set_level_accuracy_and_the_summary_s_accuracy_are_one_interval():
    summary = _classifier_summary(9)
    acc = summary["set_metrics"]["headline"]["accuracy"]
    assert (acc["ci_low"], acc["ci_high"]) == pytest.approx(WILSON_9_OF_10, abs=1e-5)
    assert (acc["ci_low"], acc["ci_high"]) == pytest.approx((summary["ci_low"], summary["ci_high"]))
    hl = headline(summary)
    # the API's headline, the CLI and the report write the same figure, interval and method
    assert headline_text({"headline": hl.model_dump(mode="json")}) == ("accuracy 90.0 %", "[59.6–98.2] Wilson")
    assert (_fig(hl.value, hl.proportion), _civ(hl.ci_low, hl.ci_high, hl.proportion, hl.method)) == (
        "90.0 %",
        "[59.6–98.2] Wilson",
    )
    # a score that is not a proportion keeps three decimals and its bootstrap interval
    f1 = headline(_classifier_summary(9, primary="f1_macro"))
    assert (f1.metric, f1.method, f1.proportion) == ("f1_macro", "bootstrap", False)
    assert headline_text({"headline": f1.model_dump(mode="json")})[0] == f"f1_macro {f1.value:.3f}"


def test_the_leaderboard_ranks_a_set_level_accuracy_with_the_same_wilson_interval():
    ev = Evaluation(id=uuid.uuid4(), summary=_classifier_summary(9))
    score = asyncio.run(compute_score(None, ev, "accuracy"))  # type: ignore[arg-type]  # set-level: no query
    assert score["method"] == "wilson" and score["method_detail"].startswith("Wilson")
    assert (score["ci_low"], score["ci_high"]) == pytest.approx(WILSON_9_OF_10, abs=1e-5)
    f1 = asyncio.run(compute_score(None, ev, "f1_macro"))  # type: ignore[arg-type]
    assert f1["method"] == "bootstrap"


def test_hit_at_k_is_a_share_of_queries_with_a_wilson_interval():
    values = {"ndcg@10": np.linspace(0.1, 0.9, 10), "hit@1": np.zeros(10), "recall@10": np.zeros(10)}
    head = ranking_set_metrics(values, 0, n_resamples=400)["headline"]
    assert head["hit@1"]["method"] == "wilson"
    assert (head["hit@1"]["ci_low"], head["hit@1"]["ci_high"]) == pytest.approx(WILSON_0_OF_10, abs=1e-5)
    # recall@k is a mean of fractions, not a proportion of queries: its bootstrap interval stays
    assert head["recall@10"]["method"] == "bootstrap"
    assert head["ndcg@10"]["method"] == "bootstrap"


def test_old_summaries_without_a_method_are_named_bootstrap():
    summary = _classifier_summary(9)
    for v in summary["set_metrics"]["headline"].values():
        v.pop("method")
    assert headline(summary).method == "bootstrap"


def test_a_report_s_per_item_proportion_is_wilson_and_other_means_bootstrap():
    zeros = _est_metric(np.zeros(10))
    assert zeros is not None and zeros.method.startswith("Wilson")
    assert (zeros.ci_low, zeros.ci_high) == pytest.approx(WILSON_0_OF_10, abs=1e-5)
    graded = _est_metric(np.array([0.2, 0.4, 0.5, 0.9, 0.1]))
    assert graded is not None and "bootstrap" in graded.method
