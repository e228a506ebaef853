"""The judge's Prometheus metrics (:mod:`uep_common.runtime.metrics`): judging time per item and each item's outcome."""

from __future__ import annotations

from uep_common.contract.events import ScoreComputed
from uep_common.runtime import metrics

ITEMS = metrics.counter(
    "uep_judge_items_total",
    "Items the judge handled, by outcome: correct, incorrect, unscored, error, or none (no score from this call: "
    "judged before, recorded by another writer first, or sent to human annotators).",
    ("outcome",),
)


def observe_judged(score: ScoreComputed | None, seconds: float) -> None:
    """One item's judging time (the judge calls and storing the verdict), its outcome and judge error by kind."""
    metrics.observe_stage("judge", seconds)
    if score is None:
        ITEMS.labels("none").inc()
        return
    outcome = "error" if score.error else {True: "correct", False: "incorrect", None: "unscored"}[score.is_correct]
    ITEMS.labels(outcome).inc()
    metrics.count_item_error(score.error, "judge")
