"""The common consumer path (uep_common.runtime.consuming.consume) on FastStream's in-memory test broker: decoded
events reach the handler, undecodable records go to the dead-letter topic with the reason, and the handler
runs in its span, a child of (one record) or linked to (a batch) the producer's trace context."""

import uuid

from faststream.kafka import KafkaBroker, KafkaMessage, TestKafkaBroker
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from uep_common.contract.events import EvaluationCompleted, EvaluationStatus, ReportRequested, Topics
from uep_common.runtime.consuming import consume
from uep_common.runtime.messaging import DEAD_LETTER_TOPIC
from uep_common.runtime.trace_propagation import TraceContextMiddleware

E, T = uuid.UUID(int=1), uuid.UUID(int=2)
PRODUCER_TRACE = "0af7651916cd43dd8448eb211c80319c"
PRODUCER_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{PRODUCER_TRACE}-{PRODUCER_SPAN}-01"


def _tracer():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test"), exporter


def _sink(broker: KafkaBroker) -> list[tuple[bytes, dict]]:
    dead: list[tuple[bytes, dict]] = []

    @broker.subscriber(DEAD_LETTER_TOPIC)
    async def sink(msg: KafkaMessage) -> None:
        dead.append((msg.body, msg.headers))

    return dead


async def test_one_record_is_decoded_and_handled_in_a_child_span_of_the_producer():
    broker, (tracer, exporter) = KafkaBroker(), _tracer()
    seen: list[tuple[ReportRequested, bytes]] = []

    @broker.subscriber(Topics.REPORT_REQUESTED)
    @consume(broker, ReportRequested, span="write report", attributes=lambda e: {"uep.report": str(e.report_id)}, tracer=tracer)
    async def on_requested(event: ReportRequested, msg: KafkaMessage) -> None:
        seen.append((event, msg.body))

    dead = _sink(broker)
    event = ReportRequested(evaluation_id=E, tenant_id=T, report_id=uuid.UUID(int=3))
    async with TestKafkaBroker(broker) as br:
        await br.publish(event.model_dump(mode="json"), Topics.REPORT_REQUESTED, headers={"traceparent": TRACEPARENT})
    assert [e for e, _ in seen] == [event] and seen[0][1] == event.model_dump_json().encode()
    assert dead == []
    (span,) = exporter.get_finished_spans()
    assert span.name == "write report" and dict(span.attributes) == {"uep.report": str(uuid.UUID(int=3))}
    assert f"{span.context.trace_id:032x}" == PRODUCER_TRACE and f"{span.parent.span_id:016x}" == PRODUCER_SPAN


async def test_an_undecodable_record_is_dead_lettered_with_its_reason_and_not_handled():
    broker = KafkaBroker()
    seen: list[ReportRequested] = []

    @broker.subscriber(Topics.REPORT_REQUESTED)
    @consume(broker, ReportRequested, span="write report")
    async def on_requested(event: ReportRequested) -> None:
        seen.append(event)

    dead = _sink(broker)
    async with TestKafkaBroker(broker) as br:
        await br.publish(b'{"evaluation_id": "nope"}', Topics.REPORT_REQUESTED)
    assert seen == []
    assert len(dead) == 1
    body, headers = dead[0]
    assert body == b'{"evaluation_id": "nope"}'
    assert headers["uep-dlq-source-topic"] == Topics.REPORT_REQUESTED
    assert headers["uep-dlq-reason"].startswith("invalid ReportRequested: ")
    assert "evaluation_id: Input should be a valid UUID" in headers["uep-dlq-reason"]


async def test_an_undecodable_records_dead_letter_stays_in_the_producers_trace_and_no_context_outlives_it():
    broker = KafkaBroker(middlewares=[TraceContextMiddleware])

    @broker.subscriber(Topics.REPORT_REQUESTED)
    @consume(broker, ReportRequested)
    async def on_requested(event: ReportRequested) -> None:
        raise AssertionError("not decodable, so never handled")

    dead = _sink(broker)
    async with TestKafkaBroker(broker) as br:
        await br.publish(b"not json", Topics.REPORT_REQUESTED, headers={"traceparent": TRACEPARENT})
    assert len(dead) == 1 and dead[0][1]["traceparent"] == TRACEPARENT
    assert trace.get_current_span().get_span_context().is_valid is False


async def test_a_batch_handles_the_decoded_events_in_one_span_linked_to_each_producer():
    broker, (tracer, exporter) = KafkaBroker(), _tracer()
    batches: list[list[EvaluationCompleted]] = []

    @broker.subscriber(Topics.EVALUATION_COMPLETED, batch=True)
    @consume(
        broker, EvaluationCompleted, batch=True, span="store", attributes=lambda es: {"uep.batch_size": len(es)}, tracer=tracer
    )
    async def on_completed(events: list[EvaluationCompleted]) -> None:
        batches.append(events)

    dead = _sink(broker)
    good = EvaluationCompleted(evaluation_id=E, tenant_id=T, status=EvaluationStatus.completed, summary=None)
    async with TestKafkaBroker(broker) as br:
        await br.publish_batch(
            good.model_dump(mode="json"), b"not json", topic=Topics.EVALUATION_COMPLETED, headers={"traceparent": TRACEPARENT}
        )
    assert batches == [[good]]
    assert len(dead) == 1 and dead[0][0] == b"not json"
    assert dead[0][1]["uep-dlq-source-topic"] == Topics.EVALUATION_COMPLETED
    assert dead[0][1]["uep-dlq-reason"].startswith("invalid EvaluationCompleted: ")
    (span,) = exporter.get_finished_spans()
    assert span.name == "store" and dict(span.attributes) == {"uep.batch_size": 1}
    assert [(f"{lk.context.trace_id:032x}", f"{lk.context.span_id:016x}") for lk in span.links] == [
        (PRODUCER_TRACE, PRODUCER_SPAN)
    ]


async def test_a_second_consumer_can_skip_undecodable_records_without_dead_lettering_them():
    broker = KafkaBroker()
    batches: list[list[EvaluationCompleted]] = []

    @broker.subscriber(Topics.EVALUATION_COMPLETED, batch=True)
    @consume(broker, EvaluationCompleted, batch=True, dead_letter_undecodable=False)
    async def on_completed(events: list[EvaluationCompleted]) -> None:
        batches.append(events)

    dead = _sink(broker)
    async with TestKafkaBroker(broker) as br:
        await br.publish_batch(b"not json", topic=Topics.EVALUATION_COMPLETED)
    assert batches == [] and dead == []


async def test_the_message_parameter_is_resolved_without_a_worker_thread(monkeypatch):
    # fast_depends runs a synchronous custom field (FastStream's Context("message")) through run_in_threadpool:
    # a worker-thread round trip per record. consume's subscriber resolves it on the event loop instead.
    import fast_depends.utils

    hops: list[str] = []
    original = fast_depends.utils.run_in_threadpool

    async def counting(func, *args, **kwargs):
        hops.append(getattr(func, "__name__", repr(func)))
        return await original(func, *args, **kwargs)

    monkeypatch.setattr(fast_depends.utils, "run_in_threadpool", counting)
    broker = KafkaBroker()
    seen: list[tuple[ReportRequested, str]] = []

    @broker.subscriber(Topics.REPORT_REQUESTED)
    @consume(broker, ReportRequested)
    async def on_requested(event: ReportRequested, msg: KafkaMessage) -> None:
        seen.append((event, msg.raw_message.topic))

    @broker.subscriber(Topics.REPORT_READY)
    async def plain(msg: KafkaMessage) -> None:  # FastStream's own annotation, for contrast
        seen.append((None, msg.raw_message.topic))

    event = ReportRequested(evaluation_id=E, tenant_id=T, report_id=uuid.UUID(int=3))
    async with TestKafkaBroker(broker) as br:
        await br.publish(event.model_dump(mode="json"), Topics.REPORT_REQUESTED)
        handled_by_consume = list(hops)
        await br.publish(b"{}", Topics.REPORT_READY)
    assert seen == [(event, Topics.REPORT_REQUESTED), (None, Topics.REPORT_READY)]
    assert handled_by_consume == []
    assert hops == ["use"]  # the plain subscriber's Context took the thread hop that consume's avoids


async def test_a_batch_handler_with_records_gets_each_event_with_its_headers_and_timestamp():
    from uep_common.runtime.consuming import Received

    broker = KafkaBroker()
    batches: list[list[Received]] = []

    @broker.subscriber(Topics.EVALUATION_COMPLETED, batch=True)
    @consume(broker, EvaluationCompleted, batch=True, with_records=True)
    async def on_completed(items: list[Received]) -> None:
        batches.append(items)

    dead = _sink(broker)
    good = EvaluationCompleted(evaluation_id=E, tenant_id=T, status=EvaluationStatus.completed, summary=None)
    async with TestKafkaBroker(broker) as br:
        await br.publish_batch(
            b"not json", good.model_dump(mode="json"), topic=Topics.EVALUATION_COMPLETED, headers={"traceparent": TRACEPARENT}
        )
    (items,) = batches
    (item,) = items  # the undecodable record is dead-lettered, not handed over
    assert item.event == good and item.body == good.model_dump_json().encode()
    assert item.headers["traceparent"] == TRACEPARENT.encode()
    assert item.timestamp_ms is None or item.timestamp_ms > 1_700_000_000_000
    assert len(dead) == 1
