"""A set-level evaluation's report charts its primary metric and names it: a ranker whose headline is NDCG@10
draws NDCG@10 in its trend, category radar and bars (not the hit@1 of its item verdicts labelled "accuracy"),
and its header names the metric once (``metric NDCG@10``, not ``metric ndcg ndcg -, v1``).

Expected values are computed by hand from the items given here."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
import pytest

from uep_common.analytics.set_metrics import ranking_set_metrics
from uep_common.contract.events import EvaluationSummary, SetMetrics
from uep_reporter.analysis import Items, breakdown
from uep_reporter.primary import ChartMetric, chart_metric, figure_of
from uep_reporter.report import charts, render_html
from uep_reporter.report_model import Breakdown, BreakdownRow, Estimate, Profile, TrendPoint

from .test_report_render import EV, OTHER, T0, make_report

BASE = {"n": 4, "scored": 4, "correct": 2, "errors": 0, "accuracy": 0.5, "ci_low": 0.15, "ci_high": 0.85}
BASE |= {"latency_ms_p50": 1.0, "latency_ms_p90": 2.0, "prompt_tokens": 0, "completion_tokens": 0}


def _primary(row: BreakdownRow) -> Estimate:
    """A category row's primary-metric estimate, which every row of these tests has."""
    assert row.primary is not None
    return row.primary


def _ranker_summary() -> dict:
    values = {"rr": np.array([1.0, 0.5, 1.0, 0.25]), "ndcg@10": np.array([1.0, 0.6, 0.9, 0.5]), "hit@1": np.array([1.0, 0, 1, 0])}
    sm = SetMetrics.model_validate({**ranking_set_metrics(values, 0, n_resamples=200), "excluded": 0, "primary": "ndcg@10"})
    return EvaluationSummary.model_validate(BASE | {"metric_name": "ndcg", "set_metrics": sm.model_dump(mode="json")}).model_dump(
        mode="json"
    )


def test_the_chart_metric_of_a_ranker_is_its_primary_and_the_trend_keeps_only_runs_with_it():
    summary = _ranker_summary()
    metric = chart_metric(summary)
    assert (metric.key, metric.kind, metric.item_key, metric.proportion) == ("ndcg@10", "ranking", "ndcg@10", False)
    figure = figure_of(summary, metric)
    assert figure is not None
    value, lo, hi = figure
    assert value == pytest.approx(0.75)  # mean of 1.0, 0.6, 0.9, 0.5; the hit@1 (accuracy) is 0.5
    assert lo is not None and hi is not None and lo <= 0.75 <= hi
    # an older run scored by exact match has an accuracy headline: not on the NDCG@10 axis
    assert figure_of(BASE | {"metric_name": "exact_match"}, metric) is None
    mrr = dict(summary, set_metrics=summary["set_metrics"] | {"primary": "mrr"})
    assert chart_metric(mrr).item_key == "rr" and chart_metric(None).key == "accuracy"


def _items(metric: ChartMetric, **over) -> Items:
    n = 5
    fields: dict[str, Any] = {
        "category": ["law", "law", "law", "bio", "bio"],
        "dimension": [None] * n,
        "is_correct": np.array([1.0, 0.0, 0.0, 1.0, np.nan]),
        "score": np.full(n, np.nan),
        "latency": np.full(n, np.nan),
        "prompt_tokens": np.zeros(n, dtype=np.int64),
        "completion_tokens": np.zeros(n, dtype=np.int64),
        "error_kind": [None, None, None, None, ("inference", "timeout")],
        "extraction": [None] * n,
        "category_source": "metadata.category",
        "chart_metric": metric,
        "primary": np.array([1.0, 0.5, 0.3, 0.8, np.nan]),
    }
    return Items(**(fields | over))


def test_categories_carry_the_primary_metric_per_group():
    rows = {
        r.name: r
        for r in breakdown(
            _items(ChartMetric("ndcg@10", "ranking", "ndcg@10", False)).category,
            _items(ChartMetric("ndcg@10", "ranking", "ndcg@10", False)),
            "metadata.category",
            "",
        ).rows
    }
    assert _primary(rows["law"]).value == pytest.approx(0.6)  # (1.0 + 0.5 + 0.3) / 3, against accuracy 1/3
    assert (rows["law"].accuracy.value if rows["law"].accuracy else None) == pytest.approx(1 / 3)
    assert _primary(rows["bio"]).value == pytest.approx(0.8) and _primary(rows["bio"]).n == 1  # the errored query is left out
    # a classifier whose primary is F1 (macro): recomputed on the group's items
    f1 = ChartMetric("f1_macro", "classification", None, False)
    items = _items(
        f1, gold=["a", "a", "b", "b", "b"], predicted=["a", "b", "b", "b", None], is_correct=np.array([1.0, 0, 1, 1, np.nan])
    )
    law = {r.name: r for r in breakdown(items.category, items, "metadata.category", "").rows}["law"]
    # law: gold a a b, predicted a b b → F1(a) = 2·1·0.5/1.5 = 2/3, F1(b) = 2·0.5·1/1.5 = 2/3; macro 2/3
    assert _primary(law).value == pytest.approx(2 / 3) and _primary(law).n == 3


def _est(v: float | None, lo: float | None = None, hi: float | None = None, method: str = "bootstrap BCa") -> Estimate:
    return Estimate(value=v, ci_low=lo, ci_high=hi, n=3, method=method)


def _ranker_report():
    row = lambda name, acc, nd: BreakdownRow(  # noqa: E731
        name=name,
        n=3,
        scored=3,
        correct=1,
        errors=0,
        accuracy=_est(acc, method="Wilson"),
        score_mean=None,
        primary=_est(nd, nd - 0.1, nd + 0.1),
    )
    base = make_report()
    summary = base.summary.model_copy(
        update={"metric_name": "ndcg", "metric_versions": {"ndcg": ["-", "v1"]}, "accuracy": _est(0.5, 0.2, 0.8, "Wilson")}
    )
    return make_report(
        summary=summary,
        chart_metric="ndcg@10",
        headline=None,
        categories=Breakdown(source="metadata.category", note="", rows=[row("law", 0.33, 0.61), row("bio", 0.9, 0.87), row("art", 0.2, 0.4)]),
        profile=Profile(source="categories", note="NDCG@10 per category", series={"m (this run)": {"law": 0.61, "bio": 0.87, "art": 0.4}}),
        trend=[
            TrendPoint(evaluation_id=OTHER, time=T0 - timedelta(days=1), value=0.7, ci_low=0.6, ci_high=0.8, label="q4_1",
                       model_version="q4_1", benchmark_version="a", scheduled=False, current=False),
            TrendPoint(evaluation_id=EV, time=T0, value=0.75, ci_low=0.65, ci_high=0.85, label="this run",
                       model_version="q4_1", benchmark_version="a", scheduled=False, current=True),
        ],
    )  # fmt: skip


def test_a_ranker_report_charts_ndcg_and_names_it():
    report = _ranker_report()
    radar, trend, bars = charts(report)
    assert "NDCG@10 over runs" in trend and "accuracy" not in trend.lower()
    assert bars is not None and "NDCG@10 by metadata.category (bootstrap 95 %)" in bars and "accuracy" not in bars.lower()
    assert "NDCG@10 by category" in radar and "accuracy" not in radar.lower()
    page = render_html(report)
    header = page.split("<header>")[1].split("</header>")[0]
    assert 'metric <b id="chart-metric">NDCG@10</b>' in header
    assert "ndcg -" not in header and '<span class="mono">ndcg v1</span>' in header
    table = page.split('id="category-table"')[1].split("</table>")[0]
    assert '<th class="num">NDCG@10 [95 % CI]</th>' in table and "0.870 [0.770–0.970]" in table
    assert "whose headline is NDCG@10; NDCG@10 with its bootstrap 95 % interval" in page


def test_an_accuracy_report_keeps_its_accuracy_charts():
    row = BreakdownRow(name="x", n=2, scored=2, correct=1, errors=0, accuracy=_est(0.5, 0.1, 0.9, "Wilson"), score_mean=None,
                       primary=_est(0.5, 0.1, 0.9, "Wilson"))  # fmt: skip
    report = make_report(categories=Breakdown(source="input.subject", note="", rows=[row, row.model_copy(update={"name": "y"})]))
    _, trend, bars = charts(report)
    assert trend is not None and bars is not None
    assert "accuracy over runs" in trend and "Accuracy by input.subject (Wilson 95 %)" in bars
    assert 'metric <b id="chart-metric">accuracy</b>' in render_html(report)
