"""W3C Trace Context across Kafka without messaging spans of their own.

Every evaluation is one trace (:mod:`uep_common.runtime.telemetry`): a consumer's span continues the span that was
current where the message was produced. That needs only the ``traceparent``/``tracestate`` headers on each
record, which :class:`TraceContextMiddleware` adds at publish time from the current context (a header the
caller already set — an outbox row's stored context, a re-driven dead letter's original — is kept). The
consumer side is :func:`uep_common.runtime.consuming.consume`, which makes the record's ``traceparent`` context current
while the record is decoded and handled, so the handler's span (if it has one), the spans it opens, its
instrumented SQL and a dead letter for the record all continue the producer's trace.

Why not FastStream's ``KafkaTelemetryMiddleware``: it records three spans of its own around each hop
(``<topic> create`` and ``<topic> publish`` at the producer, ``<topic> process`` at the consumer) beside uep's
item span, 12 of the ~22 spans an item made on its way through the pipeline; exported, they cost more CPU per
item than the item's own work in some services. The hop is still visible: a consumer span's parent is in
another service.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from faststream import BaseMiddleware
from opentelemetry.propagate import inject

TRACE_HEADERS = ("traceparent", "tracestate")
"""The W3C Trace Context headers (https://www.w3.org/TR/trace-context/); the outbox relay publishes a row's stored
ones as they are (:meth:`uep_common.runtime.outbox.OutboxRelay.publish_claimed`)."""


class TraceContextMiddleware(BaseMiddleware):
    """FastStream broker middleware: every published record carries the current trace context (W3C headers,
    through the global propagator), unless its headers already name one. Records no span."""

    async def publish_scope(self, call_next: Callable[[Any], Awaitable[Any]], cmd: Any) -> Any:
        """Add ``traceparent`` (and ``tracestate``) of the current context to ``cmd.headers`` when absent."""
        headers = cmd.headers if isinstance(cmd.headers, dict) else dict(cmd.headers or {})
        if "traceparent" not in headers:
            inject(headers)
            cmd.headers = headers
        return await call_next(cmd)
