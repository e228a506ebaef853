"""Inference's Prometheus metrics (:mod:`uep_common.runtime.metrics`): each item's wait in Kafka and its model call.

Models are labelled by name, the first 50 a process sees (:class:`uep_common.runtime.metrics.BoundedLabel`); the
outcome is ``ok`` or ``error``.
"""

from __future__ import annotations

from datetime import UTC, datetime

from uep_common.contract.events import OutputGenerated, SampleDispatched
from uep_common.runtime import metrics

MODEL_CALL_SECONDS = metrics.histogram(
    "uep_inference_model_call_seconds",
    "Wall time of an item's model call (its last attempt, without the wait for a model slot), by model and outcome.",
    ("model", "outcome"),
)
MODEL_ATTEMPTS_THROTTLED = metrics.counter(
    "uep_inference_throttled_total", "Items whose model refused an attempt for overload before the outcome, by model.", ("model",)
)
TRITON_ROWS_PER_CALL = metrics.histogram(
    "uep_inference_triton_rows_per_call",
    "Items carried by each Triton call (row batching stacks the one-row requests of items at a model at once).",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128),
)
_models = metrics.BoundedLabel(50)


def observe_triton_call(rows: int) -> None:
    """One Triton call that carried ``rows`` items."""
    TRITON_ROWS_PER_CALL.observe(rows)


def observe_queue_wait(published: datetime) -> None:
    """An item's wait from its publication (the Kafka record's timestamp) until inference took it."""
    metrics.observe_stage("queue_wait", max(0.0, (datetime.now(UTC) - published).total_seconds()))


def observe_output(event: SampleDispatched, out: OutputGenerated, called: bool) -> None:
    """An item's model call (when ``called``: one was made) and its inference error by kind."""
    if called and out.latency_ms is not None:
        model = _models(event.target.name)
        seconds = out.latency_ms / 1000
        MODEL_CALL_SECONDS.labels(model, "ok" if out.error is None else "error").observe(seconds)
        metrics.observe_stage("model_call", seconds)
        if out.throttled:
            MODEL_ATTEMPTS_THROTTLED.labels(model).inc()
    metrics.count_item_error(out.error, "inference")
