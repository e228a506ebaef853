"""The scorer's Prometheus metrics (:mod:`uep_common.runtime.metrics`): scoring time per item and each item's outcome.

Metrics are labelled by name (the scorer's registry: a bounded set, passed through
:class:`uep_common.runtime.metrics.BoundedLabel` all the same, since a benchmark's config names it).
"""

from __future__ import annotations

from uep_common.contract.events import JudgeRequested, ScoreComputed
from uep_common.runtime import metrics

SCORES = metrics.counter(
    "uep_scorer_items_total",
    "Items the scorer handled, by metric and outcome: correct, incorrect, unscored (no verdict), error (an "
    "earlier stage's or the scorer's), judge (sent to the judge).",
    ("metric", "outcome"),
)
_metrics = metrics.BoundedLabel(100)


def observe_scored(out: ScoreComputed | JudgeRequested, seconds: float) -> None:
    """One item's scoring time, outcome, and scoring error by kind."""
    metrics.observe_stage("scoring", seconds)
    if isinstance(out, JudgeRequested):
        SCORES.labels("judge", "judge").inc()
        return
    outcome = "error" if out.error else {True: "correct", False: "incorrect", None: "unscored"}[out.is_correct]
    SCORES.labels(_metrics(out.metric_name), outcome).inc()
    metrics.count_item_error(out.error, "scoring")
