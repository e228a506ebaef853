"""uep_common.runtime.trace_propagation: what the publish middleware puts on a record's headers.

Right values: the W3C ``traceparent`` of a sampled span is ``00-<trace id, 32 hex>-<span id, 16 hex>-<flags>``
(https://www.w3.org/TR/trace-context/#traceparent-header; flags 01 sampled, 02 random trace id); a header the caller set is left as it was."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from faststream import ContextRepo
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from uep_common.runtime.telemetry import context_from_headers
from uep_common.runtime.trace_propagation import TraceContextMiddleware

pytestmark = pytest.mark.unit


def _publish(headers: dict[str, str]) -> dict[str, str]:
    """The headers ``call_next`` receives when a command with ``headers`` goes through the middleware."""
    seen: dict[str, str] = {}

    async def call_next(cmd: SimpleNamespace) -> None:
        seen.update(cmd.headers)

    middleware = TraceContextMiddleware(None, context=ContextRepo())
    asyncio.run(middleware.publish_scope(call_next, SimpleNamespace(headers=headers)))
    return seen


def test_a_record_carries_the_current_span_as_its_parent_and_keeps_a_context_it_already_has() -> None:
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("producer") as span:
        ctx = span.get_span_context()
        fresh = _publish({"uep-event-type": "ScoreComputed"})
        stored = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        kept = _publish({"traceparent": stored})
    assert fresh == {
        "uep-event-type": "ScoreComputed",
        "traceparent": f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}",
    }
    assert ctx.trace_flags & 0x01  # sampled
    assert kept == {"traceparent": stored}


def test_without_a_current_span_no_context_is_invented() -> None:
    assert trace.get_current_span().get_span_context().is_valid is False
    assert _publish({"a": "b"}) == {"a": "b"}


@pytest.mark.parametrize(
    "value",
    [b"\xff\xfe-not-utf-8", b"00-" + b"a" * 5000, "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01"],
)
def test_a_malformed_or_huge_traceparent_yields_no_parent_and_no_error(value: str | bytes) -> None:
    ctx = context_from_headers({"traceparent": value, "tracestate": b"\xff" * 10_000})
    assert trace.get_current_span(ctx).get_span_context().is_valid is False
