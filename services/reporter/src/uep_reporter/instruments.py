"""The reporter's Prometheus metrics (:mod:`uep_common.runtime.metrics`): storing results, evaluations finished,
reports written and their build time."""

from __future__ import annotations

from uep_common.runtime import metrics

EVALUATIONS_FINISHED = metrics.counter(
    "uep_reporter_evaluations_finished_total", "Evaluations the reporter finished, by final status.", ("status",)
)
REPORTS = metrics.counter("uep_reports_total", "Reports built, by final status (ready, failed).", ("status",))
REPORT_SECONDS = metrics.histogram(
    "uep_report_build_seconds", "Time to build a ready report: collect, render HTML and JSON, PDF, store."
)


def observe_stored(items: int, seconds: float, finished_statuses: list[str]) -> None:
    """A stored batch: its transaction time for each of its ``items``, and the evaluations it finished."""
    metrics.observe_stage("storage", seconds, items)
    for status in finished_statuses:
        EVALUATIONS_FINISHED.labels(status).inc()


def observe_report(status: str, seconds: float | None = None) -> None:
    """A report built with ``status``; a ready one's build time."""
    REPORTS.labels(status).inc()
    if seconds is not None:
        REPORT_SECONDS.observe(seconds)
