"""Spans of batched consumers in each item's own trace (uep_common.runtime.consuming.item_spans / within_item and
consume(item_span=...)), and the tracer of the client instrumentations that makes spans only inside an
existing one (uep_common.runtime.telemetry.ChildOnlyTracer)."""

import json
import uuid

import pytest
from faststream.kafka import KafkaBroker, TestKafkaBroker
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from uep_common.contract.events import EvaluationCompleted, EvaluationStatus, Topics
from uep_common.runtime.consuming import consume, item_spans, within_item
from uep_common.runtime.telemetry import ChildOnlyTracerProvider, span_json_line

E, T = uuid.UUID(int=1), uuid.UUID(int=2)
TRACE_A, SPAN_A = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
TRACE_B, SPAN_B = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


def _provider():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _hex(span):
    return f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"


def test_each_item_gets_a_span_in_its_own_trace_linked_to_the_batch_span():
    provider, exporter = _provider()
    tracer = provider.get_tracer("test")
    a, b, bare = object(), object(), object()
    items = [
        (a, {"traceparent": f"00-{TRACE_A}-{SPAN_A}-01"}),
        (b, {"traceparent": f"00-{TRACE_B}-{SPAN_B}-01".encode()}),
        (bare, {}),
    ]
    which = {id(a): "a", id(b): "b", id(bare): "bare"}
    with (
        tracer.start_as_current_span("batch") as batch,
        item_spans(tracer, "store result", items, lambda item: {"uep.which": which[id(item)]}),
    ):
        with within_item(b):
            tracer.start_span("write progress").end()  # work for item b alone: in b's trace
        with within_item(object()):  # not an item of the block: the current span stays the batch's
            assert trace.get_current_span() is batch
    spans = {
        s.name + ("" if s.name != "store result" else ":" + s.attributes["uep.which"]): s for s in exporter.get_finished_spans()
    }
    stored = [s for s in exporter.get_finished_spans() if s.name == "store result"]
    assert len(stored) == 3
    by_trace = {f"{s.context.trace_id:032x}": s for s in stored}
    # a and b: children of their producers' spans, in their producers' traces
    assert f"{by_trace[TRACE_A].parent.span_id:016x}" == SPAN_A and by_trace[TRACE_A].attributes["uep.which"] == "a"
    assert by_trace[TRACE_B].attributes["uep.which"] == "b"
    assert f"{by_trace[TRACE_B].parent.span_id:016x}" == SPAN_B
    # the item without a traceparent: a child of the batch span
    batch_span = spans["batch"]
    (orphan,) = [s for s in stored if s.context.trace_id == batch_span.context.trace_id]
    assert orphan.parent.span_id == batch_span.context.span_id
    for s in stored:
        assert s.attributes["uep.batch_size"] == 3
        assert [(lk.context.trace_id, lk.context.span_id) for lk in s.links] == [
            (batch_span.context.trace_id, batch_span.context.span_id)
        ]
        assert s.status.status_code == StatusCode.UNSET
        # the item span covers the batch's work: it starts before and ends after the work done inside it
        assert s.start_time <= spans["write progress"].start_time and s.end_time >= spans["write progress"].end_time
    progress = spans["write progress"]
    assert _hex(progress)[0] == TRACE_B and progress.parent.span_id == by_trace[TRACE_B].context.span_id


def test_a_failed_batch_marks_every_item_span_as_an_error():
    provider, exporter = _provider()
    tracer = provider.get_tracer("test")
    items = [(object(), {"traceparent": f"00-{TRACE_A}-{SPAN_A}-01"}), (object(), {"traceparent": f"00-{TRACE_B}-{SPAN_B}-01"})]
    with pytest.raises(RuntimeError), item_spans(tracer, "store result", items):
        raise RuntimeError("database down")
    stored = exporter.get_finished_spans()
    assert [(s.status.status_code, s.status.description) for s in stored] == [(StatusCode.ERROR, "RuntimeError")] * 2
    assert sorted(f"{s.context.trace_id:032x}" for s in stored) == sorted([TRACE_A, TRACE_B])


async def test_consume_opens_the_item_spans_around_a_batch_handler():
    provider, exporter = _provider()
    tracer = provider.get_tracer("test")
    broker = KafkaBroker()
    seen_trace: list[str] = []

    @broker.subscriber(Topics.EVALUATION_COMPLETED, batch=True)
    @consume(
        broker,
        EvaluationCompleted,
        batch=True,
        span="store",
        tracer=tracer,
        item_span="store one",
        item_attributes=lambda e: {"uep.evaluation_id": str(e.evaluation_id)},
    )
    async def on_completed(events: list[EvaluationCompleted]) -> None:
        with within_item(events[1]):
            seen_trace.append(f"{trace.get_current_span().get_span_context().trace_id:032x}")

    one = EvaluationCompleted(evaluation_id=E, tenant_id=T, status=EvaluationStatus.completed, summary=None)
    two = EvaluationCompleted(evaluation_id=uuid.UUID(int=9), tenant_id=T, status=EvaluationStatus.completed, summary=None)
    async with TestKafkaBroker(broker) as br:
        await br.publish_batch(
            one.model_dump(mode="json"),
            two.model_dump(mode="json"),
            topic=Topics.EVALUATION_COMPLETED,
            headers={"traceparent": f"00-{TRACE_A}-{SPAN_A}-01"},
        )
    assert seen_trace == [TRACE_A]
    spans = exporter.get_finished_spans()
    (batch,) = [s for s in spans if s.name == "store"]
    items = [s for s in spans if s.name == "store one"]
    assert sorted(s.attributes["uep.evaluation_id"] for s in items) == sorted([str(E), str(uuid.UUID(int=9))])
    assert all(_hex(s)[0] == TRACE_A and f"{s.parent.span_id:016x}" == SPAN_A for s in items)
    assert all(s.links[0].context.span_id == batch.context.span_id for s in items)
    assert _hex(batch)[0] != TRACE_A  # the batch span is a trace of its own, linked to the producers


def test_client_spans_are_made_only_inside_a_span_of_the_service():
    provider, exporter = _provider()
    own = provider.get_tracer("uep.test")
    clients = ChildOnlyTracerProvider(provider).get_tracer("opentelemetry.instrumentation.sqlalchemy")
    outside = clients.start_span("SELECT uep")
    assert outside is trace.INVALID_SPAN and not outside.get_span_context().is_valid
    with clients.start_as_current_span("GET") as span:
        assert span is trace.INVALID_SPAN and trace.get_current_span() is trace.INVALID_SPAN
    with own.start_as_current_span("handler") as handler:
        clients.start_span("SELECT uep").end()
        with clients.start_as_current_span("GET"):
            pass
    names = {s.name: s for s in exporter.get_finished_spans()}
    assert set(names) == {"handler", "SELECT uep", "GET"}
    for name in ("SELECT uep", "GET"):
        assert names[name].parent.span_id == handler.get_span_context().span_id
    line = json.loads(span_json_line(names["SELECT uep"]))
    assert line["scope"] == "opentelemetry.instrumentation.sqlalchemy"
    assert line["parent_id"] == f"0x{handler.get_span_context().span_id:016x}"


PROBE = """
import json, os
from opentelemetry import trace
from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
from opentelemetry.instrumentation.redis import RedisInstrumentor
from uep_common.runtime import telemetry
from uep_common.runtime.settings import CommonSettings

telemetry.setup_telemetry(CommonSettings(service_name="probe"))
with trace.get_tracer("probe").start_as_current_span("work") as span:
    headers = telemetry.current_trace_headers()
    recording = span.is_recording()
telemetry.shutdown_telemetry()
print(json.dumps({
    "recording": recording,
    "traceparent": headers.get("traceparent", ""),
    "redis": RedisInstrumentor().is_instrumented_by_opentelemetry,
    "httpx": HTTPXClientInstrumentor().is_instrumented_by_opentelemetry,
    "sql": telemetry._DB_TRACER is not None,
}))
"""


def _probe(tmp_path, **env: str) -> dict:
    import os
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**os.environ, "UEP_OTEL_CONSOLE_PATH": str(tmp_path / "spans.jsonl"), **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_exporter_none_records_no_span_and_instruments_no_client(tmp_path):
    """``UEP_OTEL_EXPORTER=none``: spans are bare contexts (not recorded, not exported) whose W3C context still
    travels (its sampled flag 0); no client library is instrumented. ``console``: recorded, exported, and
    SQL, Redis and httpx instrumented — unless switched off one by one."""
    off = _probe(tmp_path, UEP_OTEL_EXPORTER="none")
    version, trace_id, span_id, flags = off["traceparent"].split("-")
    assert off["recording"] is False and int(flags, 16) & 1 == 0 and int(trace_id, 16) != 0 and len(span_id) == 16
    assert (off["redis"], off["httpx"], off["sql"]) == (False, False, False)
    assert not (tmp_path / "spans.jsonl").exists()

    on = _probe(tmp_path, UEP_OTEL_EXPORTER="console")
    assert on["recording"] is True and int(on["traceparent"].split("-")[3], 16) & 1 == 1
    assert (on["redis"], on["httpx"], on["sql"]) == (True, True, True)
    (line,) = (tmp_path / "spans.jsonl").read_text().splitlines()
    assert json.loads(line)["name"] == "work" and json.loads(line)["resource"]["service.name"] == "probe"

    no_db = _probe(tmp_path, UEP_OTEL_EXPORTER="console", UEP_OTEL_INSTRUMENT_DB="false", UEP_OTEL_INSTRUMENT_HTTP="false")
    assert no_db["recording"] is True and (no_db["redis"], no_db["httpx"], no_db["sql"]) == (False, False, False)
