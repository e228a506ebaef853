"""Prometheus metrics of every uep service: the registry, the shared names and buckets, the ``/metrics``
endpoint, the on/off switch and the sampler of sampled gauges.

Library: ``prometheus-client``, the Prometheus project's own Python client. Prometheus pulls: each process
serves its current values on ``GET /metrics`` and keeps no history, so an observation costs a lock and an
addition and nothing happens between scrapes. One registry per process, the client's default, which also
carries its process and Python collectors (CPU seconds, resident memory, open file descriptors, GC). Every
uep service is one asyncio process with one uvicorn worker, so the client's multiprocess mode (shared files
for pre-forked workers) is not needed. Traces stay with OpenTelemetry (:mod:`uep_common.runtime.telemetry`); its
metrics SDK would add a pipeline and an exporter for the same numbers.

Names are ``uep_<area>_<what>[_<unit>]`` (``_total`` for counters, ``_seconds`` for durations). Label values
come from bounded sets only: topics, handler names, stages, templated routes, error kinds from code. Values
that come from data (tenant slugs, model names) pass through :class:`BoundedLabel` (the first N seen, the
rest ``other``) or :func:`fold_top` (the N largest, the rest summed as ``other``). No label ever carries an
evaluation, item, sample or request id.

Each service defines its own metrics in its ``instruments`` module; the ones here are those of the code in
``uep_common`` that every service runs: the consumer path (:mod:`uep_common.runtime.consuming`), publishing
(:mod:`uep_common.runtime.messaging`), consumer lag, and the per-stage item latencies every stage observes.

``UEP_METRICS_ENABLED=false`` (:func:`configure`) turns every metric made here into a no-op and removes
``/metrics``, so a bench can measure the pipeline without them. ``UEP_METRICS_PORT`` serves ``/metrics`` on a
port of its own (the client's threaded HTTP server) instead of the health port.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import prometheus_client
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from uep_common.runtime.background import BackgroundLoop

if TYPE_CHECKING:
    from faststream.kafka import KafkaBroker

    from uep_common.contract.events import ErrorInfo
    from uep_common.runtime.settings import CommonSettings

log = logging.getLogger(__name__)

REGISTRY: CollectorRegistry = prometheus_client.REGISTRY
"""The process's one registry (prometheus-client's default, with its process and platform collectors)."""

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""Seconds: from a cached decode (1 ms) to a slow model call or a lease's length (5 min)."""
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Seconds of a gateway request (a report download takes the longest)."""

STAGES = ("queue_wait", "model_call", "scoring", "judge", "storage", "end_to_end")
"""Stages of :data:`ITEM_STAGE_SECONDS`: Kafka wait of a dispatched item until inference takes it; the model
call (its last attempt, without the wait for a model slot); scoring; judging; storing the result (the
reporter's batch transaction, observed for each item of the batch); end to end, from the lease to the score
back at the scheduler."""


class _State:
    enabled = True


_state = _State()


def configure(settings: CommonSettings) -> None:
    """Apply ``settings.metrics_enabled`` (call once at start-up, before any traffic)."""
    _state.enabled = settings.metrics_enabled


def enabled() -> bool:
    """Whether metrics are recorded (``UEP_METRICS_ENABLED``)."""
    return _state.enabled


class _Noop:
    """What a metric's ``labels(...)`` returns while metrics are off: every method does nothing."""

    def labels(self, *values: str) -> _Noop:
        return self

    def inc(self, amount: float = 1.0) -> None:
        pass

    def dec(self, amount: float = 1.0) -> None:
        pass

    def set(self, value: float) -> None:
        pass

    def observe(self, value: float) -> None:
        pass

    def time(self) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()


NOOP = _Noop()


class Metric:
    """A prometheus-client metric behind the on/off switch: ``labels(...)`` returns the labelled child (or a
    no-op while metrics are off); ``inc``, ``set``, ``observe``, ``time`` act on an unlabelled metric.

    Args:
        raw: the prometheus-client ``Counter``, ``Gauge`` or ``Histogram``.
    """

    __slots__ = ("_seen", "raw")

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self._seen: set[tuple[str, ...]] = set()

    def labels(self, *values: str) -> Any:
        """The child of these label values (positional, in the metric's label order)."""
        return self.raw.labels(*values) if _state.enabled else NOOP

    def inc(self, amount: float = 1.0) -> None:
        """Add ``amount`` (a counter or gauge without labels)."""
        if _state.enabled:
            self.raw.inc(amount)

    def set(self, value: float) -> None:
        """Set a gauge without labels."""
        if _state.enabled:
            self.raw.set(value)

    def observe(self, value: float) -> None:
        """Observe ``value`` (a histogram without labels)."""
        if _state.enabled:
            self.raw.observe(value)

    def time(self) -> Any:
        """Context manager observing its wall time in seconds (a histogram without labels)."""
        return self.raw.time() if _state.enabled else contextlib.nullcontext()

    def replace(self, values: Mapping[tuple[str, ...], float]) -> None:
        """Set a labelled gauge to a snapshot: each label tuple to its value, and remove the children that
        the previous snapshot had and this one has not (a partition no longer assigned, a tenant gone)."""
        if not _state.enabled:
            return
        for key, value in values.items():
            self.raw.labels(*key).set(value)
        for gone in self._seen - set(values):
            with contextlib.suppress(KeyError):
                self.raw.remove(*gone)
        self._seen = set(values)


def counter(name: str, documentation: str, labelnames: Iterable[str] = ()) -> Metric:
    """A counter on :data:`REGISTRY` (``name`` ends with ``_total``)."""
    return Metric(prometheus_client.Counter(name, documentation, tuple(labelnames), registry=REGISTRY))


def gauge(name: str, documentation: str, labelnames: Iterable[str] = ()) -> Metric:
    """A gauge on :data:`REGISTRY`."""
    return Metric(prometheus_client.Gauge(name, documentation, tuple(labelnames), registry=REGISTRY))


def histogram(
    name: str, documentation: str, labelnames: Iterable[str] = (), buckets: tuple[float, ...] = LATENCY_BUCKETS
) -> Metric:
    """A histogram on :data:`REGISTRY` with ``buckets`` (upper bounds, seconds by default)."""
    return Metric(prometheus_client.Histogram(name, documentation, tuple(labelnames), registry=REGISTRY, buckets=buckets))


OTHER = "other"
"""The label value that stands for every value past a bound."""


class BoundedLabel:
    """Label values from data, at most ``limit`` distinct ones per process: the first ``limit`` values seen keep
    their value (cut to 100 characters), later new ones become :data:`OTHER`; empty or None is ``none``."""

    def __init__(self, limit: int = 50) -> None:
        self._limit = limit
        self._seen: set[str] = set()

    def __call__(self, value: str | None) -> str:
        """The label value for ``value``: itself (cut to 100 characters), :data:`OTHER` past the limit, or ``none``."""
        if not value:
            return "none"
        value = value[:100]
        if value in self._seen:
            return value
        if len(self._seen) < self._limit:
            self._seen.add(value)
            return value
        return OTHER


def fold_top(values: Mapping[tuple[str, ...], float], position: int, limit: int = 50) -> dict[tuple[str, ...], float]:
    """Bound the label at ``position`` of a gauge snapshot: its ``limit`` values with the largest totals keep
    their value, every other one is summed under :data:`OTHER`. Returns the new snapshot."""
    totals: dict[str, float] = {}
    for key, value in values.items():
        totals[key[position]] = totals.get(key[position], 0.0) + value
    keep = set(sorted(totals, key=lambda k: (-totals[k], k))[:limit])
    out: dict[tuple[str, ...], float] = {}
    for key, value in values.items():
        if key[position] not in keep:
            key = (*key[:position], OTHER, *key[position + 1 :])
        out[key] = out.get(key, 0.0) + value
    return out


# ------------------------------------------------------------------------------------------ shared metrics
MESSAGES_IN = counter(
    "uep_messages_in_total", "Kafka records a subscriber received (before decoding), by topic and handler.", ("topic", "handler")
)
MESSAGES_OUT = counter("uep_messages_out_total", "Records published and acknowledged by the broker, by topic.", ("topic",))
PUBLISH_ERRORS = counter("uep_publish_errors_total", "Publishes that failed after every retry, by topic.", ("topic",))
DEAD_LETTERED = counter(
    "uep_messages_dead_lettered_total",
    "Records sent to the dead-letter topic, by source topic and reason kind (undecodable, tenant_mismatch, an "
    "inference error type, lease_exhausted, ...).",
    ("topic", "reason"),
)
HANDLER_SECONDS = histogram(
    "uep_handler_seconds", "Time in a subscriber's handler per message (a batch subscriber: per batch).", ("topic", "handler")
)
HANDLER_ERRORS = counter(
    "uep_handler_errors_total",
    "Exceptions raised by a subscriber's handler (the ack policy then redelivers or skips), by exception class.",
    ("topic", "handler", "kind"),
)
CONSUMER_LAG = gauge(
    "uep_consumer_lag",
    "Records behind the high watermark of each assigned partition (high watermark of the latest fetch minus the "
    "consumer's position), sampled every UEP_METRICS_SAMPLE_S.",
    ("topic", "partition", "group"),
)
ITEM_STAGE_SECONDS = histogram(
    "uep_item_stage_seconds", "Latency of one item in each pipeline stage (see uep_common.runtime.metrics.STAGES).", ("stage",)
)
ITEM_ERRORS = counter(
    "uep_item_errors_total", "Items whose stage failed, by stage (inference, scoring, judge) and error kind.", ("stage", "kind")
)
_error_kinds = BoundedLabel(100)
_reason_kinds = BoundedLabel(50)


def observe_stage(stage: str, seconds: float, items: int = 1) -> None:
    """Observe ``seconds`` for ``items`` items in ``stage`` (one of :data:`STAGES`)."""
    if _state.enabled:
        child = ITEM_STAGE_SECONDS.raw.labels(stage)
        for _ in range(items):
            child.observe(seconds)


def count_item_error(error: ErrorInfo | None, stage: str) -> None:
    """Count ``error`` when it arose in ``stage`` (an error passed on from an earlier stage is not counted again)."""
    if error is not None and error.stage == stage and _state.enabled:
        ITEM_ERRORS.raw.labels(stage, _error_kinds(error.type)).inc()


def reason_kind(reason: str) -> str:
    """The kind of a dead-letter reason: ``undecodable`` for a decoding error (``invalid <Event>: ...``), else the
    word before the first colon (``tenant_mismatch: ...``, ``timeout: ...``) when it is an identifier, else ``other``."""
    if reason.startswith("invalid "):
        return "undecodable"
    head = reason.split(":", 1)[0].strip()
    return _reason_kinds(head) if head.isidentifier() and len(head) <= 40 else OTHER


# ----------------------------------------------------------------------------------------------- serving
def asgi_app() -> Callable[..., Awaitable[None]]:
    """ASGI app of ``GET /metrics`` (prometheus-client's: text format 0.0.4, or OpenMetrics when asked, gzip)."""
    return prometheus_client.make_asgi_app(REGISTRY)


def render(accept: str | None) -> tuple[bytes, str]:
    """``(body, content type)`` of the registry's exposition for an ``Accept`` header."""
    encoder, content_type = choose_encoder(accept or "")
    return encoder(REGISTRY), content_type


def on_health_port(settings: CommonSettings) -> bool:
    """Whether ``/metrics`` is served on the health (or API) port: metrics on and no ``metrics_port``."""
    return settings.metrics_enabled and not settings.metrics_port


_server: Any = None


def start_server(settings: CommonSettings) -> bool:
    """Serve ``/metrics`` on ``settings.health_host``:``settings.metrics_port`` in a thread (once per process) when
    metrics are on and that port is set; returns whether a server runs. Raises OSError when the port is taken."""
    global _server
    if not settings.metrics_enabled or not settings.metrics_port:
        return False
    if _server is None:
        _server, _thread = prometheus_client.start_http_server(settings.metrics_port, settings.health_host, REGISTRY)
    return True


# ---------------------------------------------------------------------------------------------- sampling
SampleFn = Callable[[], Awaitable[None]]


class Sampler:
    """Runs sample functions (:func:`consumer_lag`, a service's database gauges) every ``interval_s`` seconds
    on the event loop; one that fails is logged and the others still run. Does nothing while metrics are off."""

    def __init__(self, interval_s: float, functions: Iterable[SampleFn] = ()) -> None:
        self.functions = list(functions)
        self._loop = BackgroundLoop("metrics-sampler", self.sample_once, interval_s)

    async def sample_once(self) -> None:
        """Run each sample function once."""
        if not _state.enabled:
            return
        for fn in self.functions:
            try:
                await fn()
            except Exception as exc:  # noqa: BLE001 - a gauge left stale must not stop the others
                log.warning("metrics sample %s failed: %r", getattr(fn, "__qualname__", fn), exc)

    def start(self) -> None:
        """Start sampling on the running event loop (no-op while metrics are off)."""
        if _state.enabled and self.functions:
            self._loop.start()

    async def stop(self) -> None:
        """Stop sampling."""
        await self._loop.stop()


def consumer_lag(broker: KafkaBroker) -> SampleFn:
    """A sample function setting :data:`CONSUMER_LAG` for every started subscriber of ``broker``: for each
    assigned partition, the high watermark of its latest fetch response (``AIOKafkaConsumer.highwater``, known
    without a request) minus the consumer's position, at least 0. A partition not fetched yet is skipped."""

    async def sample() -> None:
        values: dict[tuple[str, ...], float] = {}
        for sub in broker.subscribers:
            consumer = getattr(sub, "consumer", None)
            if consumer is None:
                continue
            group = getattr(sub, "group_id", None) or "none"
            for tp in list(consumer.assignment()):
                highwater = consumer.highwater(tp)
                if highwater is None:
                    continue
                try:
                    position = await asyncio.wait_for(consumer.position(tp), 2.0)
                except Exception:  # noqa: BLE001 - rebalancing or the broker is away: next sample
                    continue
                values[(tp.topic, str(tp.partition), group)] = float(max(0, highwater - position))
        CONSUMER_LAG.replace(values)

    return sample
