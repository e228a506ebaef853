"""OpenTelemetry set-up and W3C Trace Context helpers.

Every evaluation is one trace: the gateway opens the root span and stores its ``traceparent`` with the
evaluation; every later stage continues it, across Kafka, through the ``traceparent``/``tracestate``
message headers (W3C Trace Context, https://www.w3.org/TR/trace-context/).

The exporter is a setting (``UEP_OTEL_EXPORTER``): ``none``, ``console`` (one JSON span per line, to
stdout or to ``UEP_OTEL_CONSOLE_PATH``) or ``otlp`` (OTLP/HTTP to ``UEP_OTEL_OTLP_ENDPOINT``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

from uep_common.settings import CommonSettings

_PROVIDER: TracerProvider | None = None


def setup_telemetry(settings: CommonSettings) -> TracerProvider:
    """Create (once per process) and register the global tracer provider for ``settings.service_name``.

    Returns the provider, which the FastStream telemetry middleware also uses.
    """
    global _PROVIDER
    if _PROVIDER is not None:
        return _PROVIDER
    provider = TracerProvider(resource=Resource.create({"service.name": settings.service_name}))
    if settings.otel_exporter == "console":
        out = open(settings.otel_console_path, "a", buffering=1) if settings.otel_console_path else sys.stdout  # noqa: SIM115
        exporter = ConsoleSpanExporter(out=out, formatter=span_json_line)
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=500))
    elif settings.otel_exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=settings.otel_otlp_endpoint)))
    trace.set_tracer_provider(provider)
    _PROVIDER = provider
    return provider


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
    """OpenTelemetry context from W3C headers (bytes values are decoded as UTF-8)."""
    carrier = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in (headers or {}).items()}
    return extract(carrier)


def tracer(name: str) -> trace.Tracer:
    """A tracer of the global provider."""
    return trace.get_tracer(name)
