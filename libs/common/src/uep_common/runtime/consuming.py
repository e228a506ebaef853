"""The one consumer path of every event subscriber: decode → dead-letter → span → handler.

A subscriber is written as a handler of decoded events under :func:`consume`::

    @broker.subscriber(Topics.OUTPUT_GENERATED, **consumer_options(settings, "scorer"), title=..., description=...)
    @consume(broker, OutputGenerated, span="score sample", attributes=lambda e: {"uep.item": e.item_key()}, tracer=_tracer)
    async def on_output(event: OutputGenerated) -> None: ...

What the wrapper does with each Kafka record behind the FastStream message:

* decodes its value as the event model (:func:`uep_common.runtime.messaging.decode_event`);
* an undecodable record is sent to the dead-letter topic with the reason naming the field (headers
  ``uep-dlq-reason``, ``uep-dlq-source-topic``) and skipped, so it cannot fail the subscriber forever
  (``dead_letter_undecodable=False`` skips it without a dead letter: for a second consumer of a topic whose
  first consumer dead-letters it already);
* drops, to the dead-letter topic with reason ``tenant_mismatch``, an event whose ``tenant_id`` is not its
  evaluation's owner (:mod:`uep_common.runtime.tenant_guard`, in every service with a database);
* for one record, makes the producer's context named by its ``traceparent`` header current while the record
  is decoded, checked and handled (:mod:`uep_common.runtime.trace_propagation`; not where a span is current already),
  so its dead letter, the spans the handler opens and its instrumented SQL continue the producer's trace;
* opens the consumer span ``span``: for one record, a child of that context; for a batch, a span linked to
  each decoded record's producer span, and (``item_span``) one span per record in that record's own trace
  (:func:`item_spans`), so every span of an evaluation's items has its trace id;
* calls the handler with the event (a batch: the list of decoded events, never empty; with ``with_records``,
  each as a :class:`Received` with its record's headers and timestamp), plus the FastStream
  message when the handler takes a second parameter (to reach the raw records, e.g. to dead-letter one
  after processing). Exceptions of the handler propagate, so the subscriber's ``ack_policy`` applies;
* counts what it sees (:mod:`uep_common.runtime.metrics`: records in per topic and handler, the handler's time and
  its exceptions by class) and binds the event's ``evaluation_id`` and ``tenant_id`` to the handler's log
  lines (:mod:`uep_common.runtime.logs`; a batch: those its events share).

Why a decorator and not a FastStream middleware: FastStream 0.7 has only broker- and router-level
middlewares, which wrap every subscriber of a broker alike and know neither the event model of one
subscriber nor its span; the wrapper keeps the signature ``(msg: KafkaMessage)`` (as :data:`InlineKafkaMessage`,
resolved without a worker thread), so the AsyncAPI document (``docs/asyncapi.json``) is the same as for a
hand-written subscriber.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from typing import Annotated, Any, NamedTuple

from faststream._internal.context.context_type import Context
from faststream.kafka import KafkaBroker, KafkaMessage
from faststream.kafka.message import KafkaMessage as _KafkaMessage
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from uep_common.contract.events import Event
from uep_common.runtime import logs, metrics, tenant_guard
from uep_common.runtime.messaging import UndecodableEvent, dead_letter, decode_event, kafka_records, raw_records
from uep_common.runtime.telemetry import context_from_headers
from uep_common.runtime.telemetry import tracer as make_tracer

Attributes = Mapping[str, str | int | float | bool]


class _LoopContext(Context):
    """FastStream's ``Context`` resolved on the event loop. fast_depends runs a custom field's synchronous
    ``use`` through ``anyio.to_thread.run_sync`` — a worker-thread round trip for every record handled — and
    awaits a coroutine ``use`` in place; context lookup is a dictionary read, so it runs here."""

    async def use(self, /, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        return super().use(**kwargs)


class Received(NamedTuple):
    """One decoded record of a batch, for a handler of :func:`consume` with ``with_records=True``: the event, the
    record's value and headers (its ``traceparent`` names the producer's span) and its Kafka timestamp
    (milliseconds since the epoch; None when the record has none)."""

    event: Any
    body: bytes
    headers: dict[str, bytes]
    timestamp_ms: int | None


InlineKafkaMessage = Annotated[_KafkaMessage, _LoopContext("message")]
"""The handled FastStream message as a subscriber parameter, like ``faststream.kafka.KafkaMessage`` but resolved
without a worker thread (:class:`_LoopContext`)."""

_ITEM_SPANS: ContextVar[dict[int, trace.Span] | None] = ContextVar("uep_item_spans", default=None)


def producer_link(headers: Mapping[str, str | bytes]) -> trace.Link | None:
    """A span link to the producer's span named by a record's ``traceparent`` header, or None without one."""
    return _link_to(context_from_headers(headers))


def _link_to(remote: otel_context.Context) -> trace.Link | None:
    ctx = trace.get_current_span(remote).get_span_context()
    return trace.Link(ctx) if ctx.is_valid else None


@contextmanager
def item_spans(
    tracer: trace.Tracer,
    name: str,
    items: Sequence[tuple[object, Mapping[str, str | bytes]]],
    attributes: Callable[[Any], Attributes] | None = None,
    contexts: Sequence[otel_context.Context] | None = None,
) -> Iterator[list[trace.Span]]:
    """One span ``name`` per item of a batch, in the item's own trace, for the duration of the block.

    ``items`` are ``(item, headers)``: the parent of an item's span is the span its W3C ``traceparent``
    header names (an item without one: the current span, i.e. the batch's). Every span starts when the block
    starts and ends when it ends — the batch's work the item took part in — with the attribute
    ``uep.batch_size`` (+ ``attributes(item)``) and a link to the current (batch) span; when the block raises,
    each is marked ERROR with the exception's class and the exception propagates. Inside the block,
    :func:`within_item` makes one item's span current (for work done for that item alone). Yields the spans
    in item order. ``contexts``: each item's context as :func:`uep_common.runtime.telemetry.context_from_headers` reads it
    from its headers, when the caller has it already (one per item, in item order).
    """
    batch = trace.get_current_span().get_span_context()
    links = [trace.Link(batch)] if batch.is_valid else None
    spans: dict[int, trace.Span] = {}
    for i, (item, headers) in enumerate(items):
        remote = contexts[i] if contexts is not None else context_from_headers(headers)
        parent = remote if trace.get_current_span(remote).get_span_context().is_valid else None
        attrs = {"uep.batch_size": len(items), **(attributes(item) if attributes else {})}
        spans[id(item)] = tracer.start_span(name, context=parent, links=links, attributes=attrs)
    token = _ITEM_SPANS.set(spans)
    try:
        yield list(spans.values())
    except BaseException as exc:
        for span in spans.values():
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        raise
    finally:
        _ITEM_SPANS.reset(token)
        for span in spans.values():
            span.end()


@contextmanager
def within_item(item: object) -> Iterator[None]:
    """Make ``item``'s span (:func:`item_spans`, the enclosing block's) the current span; outside such a
    block, or for an item it does not hold, change nothing."""
    span = (_ITEM_SPANS.get() or {}).get(id(item))
    if span is None:
        yield
        return
    with trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
        yield


def _shared_ids(payload: Event | list[Event] | list[Received]) -> tuple[object | None, object | None]:
    """``(evaluation_id, tenant_id)`` of an event, or those every event of a batch shares (else None)."""
    if isinstance(payload, Event):
        return payload.evaluation_id, payload.tenant_id
    events = [e.event if isinstance(e, Received) else e for e in payload]
    evaluations = {e.evaluation_id for e in events}
    tenants = {e.tenant_id for e in events}
    return (next(iter(evaluations)) if len(evaluations) == 1 else None), (next(iter(tenants)) if len(tenants) == 1 else None)


def _takes_message(handler: Callable[..., Any]) -> bool:
    params = [p for p in inspect.signature(handler).parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(params) >= 2


def consume(
    broker: KafkaBroker,
    cls: type[Event],
    *,
    span: str | None = None,
    attributes: Callable[[Any], Attributes] | None = None,
    tracer: trace.Tracer | None = None,
    batch: bool = False,
    dead_letter_undecodable: bool = True,
    topic: str | None = None,
    item_span: str | None = None,
    item_attributes: Callable[[Any], Attributes] | None = None,
    with_records: bool = False,
) -> Callable[[Callable[..., Awaitable[None]]], Callable[[KafkaMessage], Awaitable[None]]]:
    """Decorator: turn a handler of decoded ``cls`` events into a FastStream subscriber function.

    Args:
        broker: where undecodable records are dead-lettered.
        cls: the event model of the subscribed topic.
        span: name of the span the handler runs in (None: no span of its own).
        attributes: the span's attributes from the event (a batch: from the list of events).
        tracer: the service's tracer (default ``uep.consumer``).
        batch: the subscriber is a batch subscriber; the handler gets ``list[cls]``.
        dead_letter_undecodable: dead-letter undecodable records (False: skip them silently).
        topic: the source topic named in dead letters (default ``cls.topic``).
        item_span: a batch subscriber's span per event, in the event's own trace (:func:`item_spans`;
            the handler reaches one with :func:`within_item`). None: none.
        item_attributes: the attributes of an event's ``item_span``.
        with_records: a batch handler gets ``list[Received]`` (each event with its record's value, headers and
            timestamp) instead of the events: for a handler that goes on with an item after it returns, in the
            item's own trace.

    Returns:
        a decorator whose result is ``async (msg: KafkaMessage) -> None``, to be decorated with
        ``broker.subscriber(...)``.
    """
    source = topic or cls.topic
    span_tracer = tracer or make_tracer("uep.consumer")

    def decorate(handler: Callable[..., Awaitable[None]]) -> Callable[[KafkaMessage], Awaitable[None]]:
        pass_message = _takes_message(handler)
        name = handler.__name__

        async def call(payload: Any, msg: KafkaMessage) -> None:
            tokens = logs.bind(*_shared_ids(payload))
            start = time.perf_counter()
            try:
                await (handler(payload, msg) if pass_message else handler(payload))
            except Exception as exc:
                metrics.HANDLER_ERRORS.labels(source, name, type(exc).__name__).inc()
                raise
            finally:
                metrics.HANDLER_SECONDS.labels(source, name).observe(time.perf_counter() - start)
                logs.unbind(tokens)

        async def decoded(body: bytes) -> Event | None:
            try:
                event = decode_event(cls, body)
            except UndecodableEvent as exc:
                if dead_letter_undecodable:
                    await dead_letter(broker, body, source, str(exc))
                return None
            guard = tenant_guard.installed()
            if guard is not None and (reason := await guard.mismatch(event)) is not None:
                if dead_letter_undecodable:
                    await dead_letter(broker, body, source, reason)
                return None
            return event

        async def on_message(msg: InlineKafkaMessage) -> None:
            records = raw_records(msg)
            metrics.MESSAGES_IN.labels(source, name).inc(len(records))
            if not batch:
                body, headers = records[0]
                # the producer's context is current for the whole record (its tenant check and dead letter too),
                # and only for it: detached before the next record, also when the handler raises
                current = trace.get_current_span().get_span_context().is_valid
                token = None if current else otel_context.attach(context_from_headers(headers))
                try:
                    event = await decoded(body)
                    if event is None:
                        return
                    if span is None:
                        await call(event, msg)
                        return
                    attrs = attributes(event) if attributes else None
                    with span_tracer.start_as_current_span(span, attributes=attrs):
                        await call(event, msg)
                finally:
                    if token is not None:
                        otel_context.detach(token)
                return
            events, links, items, received, contexts = [], [], [], [], []
            stamps = [getattr(r, "timestamp", None) for r in kafka_records(msg)]
            for (body, headers), stamp in zip(records, stamps, strict=True):
                event = await decoded(body)
                if event is None:
                    continue
                events.append(event)
                items.append((event, headers))
                received.append(Received(event, body, headers, stamp if isinstance(stamp, int) and stamp > 0 else None))
                contexts.append(remote := context_from_headers(headers))  # read once: the link and the item span
                if (link := _link_to(remote)) is not None:
                    links.append(link)
            if not events:
                return
            with ExitStack() as scope:
                if span is not None:
                    attrs = attributes(events) if attributes else None
                    scope.enter_context(span_tracer.start_as_current_span(span, links=links, attributes=attrs))
                if item_span is not None:
                    scope.enter_context(item_spans(span_tracer, item_span, items, item_attributes, contexts))
                await call(received if with_records else events, msg)

        on_message.__name__ = handler.__name__
        on_message.__qualname__ = handler.__qualname__
        on_message.__doc__ = handler.__doc__
        on_message.__module__ = handler.__module__
        return on_message

    return decorate
