"""OpenTelemetry set-up and W3C Trace Context helpers.

Every evaluation is one trace: the gateway opens the root span and stores its ``traceparent`` with the
evaluation; every later stage continues it, across Kafka, through the ``traceparent``/``tracestate``
message headers (W3C Trace Context, https://www.w3.org/TR/trace-context/).

The exporter is a setting (``UEP_OTEL_EXPORTER``): ``none``, ``console`` (one JSON span per line, to
stdout or to ``UEP_OTEL_CONSOLE_PATH``) or ``otlp`` (OTLP/HTTP to ``UEP_OTEL_OTLP_ENDPOINT``). With ``none``
no span is recorded (the sampler drops every one; a dropped span is a bare context, no attributes, never
exported) and no client library is instrumented; the W3C context is still made and carried, so log lines
keep their trace id.

With an exporter, the clients every service has are instrumented with the OpenTelemetry contrib
instrumentations: SQLAlchemy engines (a span per statement, :func:`instrument_engine`, no sqlcommenter) and
Redis commands (``UEP_OTEL_INSTRUMENT_DB``), httpx requests (``UEP_OTEL_INSTRUMENT_HTTP``: a client span,
whose ``traceparent`` goes out on the request). Their spans are made only inside a span the service already
has (:class:`ChildOnlyTracerProvider`): a statement of a polling loop outside any span costs no span and
starts no trace of its own.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased
from opentelemetry.util.types import Attributes

from uep_common.runtime.settings import CommonSettings

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

_PROVIDER: TracerProvider | None = None
_QUEUE = 16_384
"""Finished spans the exporter buffers (the SDK's default, 2,048, drops spans in a burst of a few hundred
items: a dozen spans each, plus their SQL)."""
_DB_TRACER: trace.Tracer | None = None
"""The tracer of SQL statement spans (:func:`instrument_engine`); None while SQL is not instrumented."""


def setup_telemetry(settings: CommonSettings) -> TracerProvider:
    """Create (once per process) and register the global tracer provider for ``settings.service_name``.

    Returns the provider.
    """
    global _PROVIDER
    if _PROVIDER is not None:
        return _PROVIDER
    recording = settings.otel_exporter != "none"
    sampler = ParentBased(ALWAYS_ON) if recording else ALWAYS_OFF
    provider = TracerProvider(resource=Resource.create({"service.name": settings.service_name}), sampler=sampler)
    if settings.otel_exporter == "console":
        out = open(settings.otel_console_path, "a", buffering=1) if settings.otel_console_path else sys.stdout  # noqa: SIM115
        exporter = ConsoleSpanExporter(out=out, formatter=span_json_line)
        provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=_QUEUE, schedule_delay_millis=500))
    elif settings.otel_exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=settings.otel_otlp_endpoint), max_queue_size=_QUEUE)
        )
    trace.set_tracer_provider(provider)
    _PROVIDER = provider
    if recording:
        instrument_clients(settings, provider)
    return provider


class ChildOnlyTracer(trace.Tracer):
    """A tracer that makes a span only where its parent context has a valid span; elsewhere it returns
    :data:`opentelemetry.trace.INVALID_SPAN` (no id, nothing recorded). The contrib instrumentations get it,
    so a SQL statement or Redis command outside the service's own spans costs no span and starts no trace."""

    def __init__(self, inner: trace.Tracer) -> None:
        self._inner = inner

    def start_span(self, name: str, context: otel_context.Context | None = None, *args: Any, **kwargs: Any) -> trace.Span:
        """The inner tracer's span, or INVALID_SPAN without a valid parent."""
        if not trace.get_current_span(context).get_span_context().is_valid:
            return trace.INVALID_SPAN
        return self._inner.start_span(name, context, *args, **kwargs)

    @contextmanager
    def start_as_current_span(  # type: ignore[override]  # the SDK's signature, passed through
        self, name: str, context: otel_context.Context | None = None, *args: Any, **kwargs: Any
    ) -> Iterator[trace.Span]:
        """The inner tracer's ``start_as_current_span``, or INVALID_SPAN (not made current) without a parent."""
        if not trace.get_current_span(context).get_span_context().is_valid:
            yield trace.INVALID_SPAN
            return
        with self._inner.start_as_current_span(name, context, *args, **kwargs) as span:
            yield span


class ChildOnlyTracerProvider(trace.TracerProvider):
    """The tracers of ``inner``, each wrapped in :class:`ChildOnlyTracer`."""

    def __init__(self, inner: trace.TracerProvider) -> None:
        self._inner = inner

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: Attributes | None = None,
    ) -> trace.Tracer:
        """A :class:`ChildOnlyTracer` of ``inner``'s tracer for the module."""
        return ChildOnlyTracer(
            self._inner.get_tracer(instrumenting_module_name, instrumenting_library_version, schema_url, attributes)
        )


def instrument_clients(settings: CommonSettings, provider: TracerProvider) -> None:
    """Instrument Redis (``otel_instrument_db``) and httpx (``otel_instrument_http``) process-wide, and let
    :func:`instrument_engine` instrument SQLAlchemy engines (``otel_instrument_db``); each span only inside
    one of the service's (:class:`ChildOnlyTracerProvider`). Called by :func:`setup_telemetry` when spans are
    exported."""
    global _DB_TRACER
    children = ChildOnlyTracerProvider(provider)
    if settings.otel_instrument_db:
        from opentelemetry.instrumentation.redis import RedisInstrumentor
        from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor

        RedisInstrumentor().instrument(tracer_provider=children)
        _DB_TRACER = children.get_tracer(SQLAlchemyInstrumentor.__module__)
    if settings.otel_instrument_http:
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

        HTTPXClientInstrumentor().instrument(tracer_provider=children)


def instrument_engine(engine: AsyncEngine) -> None:
    """Record a span per SQL statement of ``engine`` (the contrib SQLAlchemy instrumentation's
    ``EngineTracer``: statement, ``db.system``, no sqlcommenter) when SQL is instrumented, else nothing.
    :func:`uep_common.runtime.session.make_async_engine` calls it for every engine it makes."""
    if _DB_TRACER is None:
        return
    from opentelemetry.instrumentation.sqlalchemy.engine import EngineTracer
    from opentelemetry.metrics import NoOpUpDownCounter

    EngineTracer(_DB_TRACER, engine.sync_engine, NoOpUpDownCounter("db.client.connections.usage"))  # type: ignore[no-untyped-call]


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def span_json_line(span: ReadableSpan) -> str:
    """One finished span as a single JSON line (trace/span ids as 0x-prefixed hex, as the SDK's
    ``to_json`` writes them). Bytes attributes — FastStream records Kafka keys as bytes, which the SDK's
    own ``to_json`` cannot serialise — are decoded as UTF-8."""
    ctx = span.context
    return (
        json.dumps(
            {
                "name": span.name,
                "context": {"trace_id": f"0x{ctx.trace_id:032x}", "span_id": f"0x{ctx.span_id:016x}"},
                "parent_id": f"0x{span.parent.span_id:016x}" if span.parent else None,
                "kind": str(span.kind),
                "start_time": span.start_time,
                "end_time": span.end_time,
                "status": span.status.status_code.name,
                "scope": span.instrumentation_scope.name if span.instrumentation_scope else None,
                "attributes": {k: _plain(v) for k, v in (span.attributes or {}).items()},
                "links": [
                    {"context": {"trace_id": f"0x{link.context.trace_id:032x}", "span_id": f"0x{link.context.span_id:016x}"}}
                    for link in span.links
                ],
                "resource": {k: _plain(v) for k, v in span.resource.attributes.items()},
            },
            separators=(",", ":"),
        )
        + "\n"
    )


def shutdown_telemetry() -> None:
    """Flush and stop the exporter (call on service shutdown)."""
    if _PROVIDER is not None:
        _PROVIDER.shutdown()


def current_trace_headers() -> dict[str, str]:
    """``traceparent``/``tracestate`` of the current span, as a header dict (empty if no span)."""
    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier


def context_from_headers(headers: Mapping[str, str | bytes] | None) -> otel_context.Context:
    """OpenTelemetry context from W3C headers (bytes values are decoded as UTF-8, invalid bytes replaced, so a
    malformed header yields no parent instead of an error). Header lengths are bounded by the propagators
    (``traceparent``/``tracestate`` 512 characters, ``baggage`` 8,192); an invalid value is ignored."""
    carrier = {k: (v.decode("utf-8", "replace") if isinstance(v, bytes) else v) for k, v in (headers or {}).items()}
    return extract(carrier)


def tracer(name: str) -> trace.Tracer:
    """A tracer of the global provider."""
    return trace.get_tracer(name)
