"""The metric a report's charts draw: the evaluation's headline metric
(:func:`uep_common.analytics.summary.headline_of`), so that the trend, the capability profile and the
per-category bars of a ranker plot its ``ndcg@10`` (not the hit@1 its item verdicts hold) and name it.

Pure functions over stored summaries; the per-group estimates are computed in :mod:`uep_reporter.analysis`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from uep_common.analytics.set_metrics import CLASSIFICATION_HEADLINE, is_proportion
from uep_common.analytics.summary import headline_of


@dataclass(frozen=True)
class ChartMetric:
    """What a report's charts draw.

    Attributes:
        key: the headline metric's name: ``accuracy`` (the share of correct verdicts), a set-level metric
            (``ndcg@10``, ``mrr``, ``f1_macro``…) or a graded metric (``bleu``: its mean).
        kind: ``ranking`` or ``classification`` for a set-level headline, None otherwise.
        item_key: a ranking metric's per-query value in ``sample_results.metrics`` (``ndcg@10``; ``rr`` for
            ``mrr``, ``ap@10`` for ``map@10``); None for other kinds.
        proportion: a share of items (Wilson interval, shown as a percentage) rather than a score.
    """

    key: str
    kind: str | None = None
    item_key: str | None = None
    proportion: bool = True

    @property
    def per_group(self) -> bool:
        """Whether a value of the metric can be computed for a subset of the items (a category): every metric
        but a classifier's probability-based ones (ROC-AUC, log loss…) and a graded metric."""
        if self.kind == "ranking" or self.key == "accuracy":
            return True
        return self.kind == "classification" and self.key in CLASSIFICATION_HEADLINE


ACCURACY = ChartMetric("accuracy")


def item_key(name: str) -> str:
    """The per-query value behind a ranking headline name: ``mrr`` → ``rr``, ``map@10`` → ``ap@10``, others as
    they are (the inverse of :func:`uep_common.analytics.set_metrics.headline_name`)."""
    if name == "mrr":
        return "rr"
    return "ap" + name[3:] if name.startswith("map@") else name


def chart_metric(summary: Mapping[str, Any] | None) -> ChartMetric:
    """The metric the charts of an evaluation with stored ``summary`` draw: its headline's (accuracy when it
    has none)."""
    hl = headline_of(summary)
    if hl is None:
        return ACCURACY
    if not hl.set_level:
        return ChartMetric(hl.metric, proportion=hl.proportion)
    kind = str(((summary or {}).get("set_metrics") or {}).get("kind") or "")
    if kind == "ranking":
        return ChartMetric(hl.metric, "ranking", item_key(hl.metric), is_proportion(hl.metric))
    if hl.metric == "accuracy":
        return ACCURACY  # a classifier's set-level accuracy is the share of correct verdicts
    return ChartMetric(hl.metric, "classification", None, is_proportion(hl.metric))


def figure_of(summary: Mapping[str, Any] | None, metric: ChartMetric) -> tuple[float, float | None, float | None] | None:
    """``(value, ci_low, ci_high)`` of ``metric`` in a stored ``summary`` when that summary's headline is the
    same metric (a run scored with another metric is not on the same axis); None otherwise."""
    hl = headline_of(summary)
    if hl is None or hl.value is None or hl.metric != metric.key:
        return None
    if hl.set_level != (metric.kind is not None) and metric.key != "accuracy":
        return None
    return hl.value, hl.ci_low, hl.ci_high
