"""The one consumer path of every event subscriber: decode → dead-letter → span → handler.

A subscriber is written as a handler of decoded events under :func:`consume`::

    @broker.subscriber(Topics.OUTPUT_GENERATED, **consumer_options(settings, "scorer"), title=..., description=...)
    @consume(broker, OutputGenerated, span="score sample", attributes=lambda e: {"uep.item": e.item_key()}, tracer=_tracer)
    async def on_output(event: OutputGenerated) -> None: ...

What the wrapper does with each Kafka record behind the FastStream message:

* decodes its value as the event model (:func:`uep_common.messaging.decode_event`);
* an undecodable record is sent to the dead-letter topic with the reason naming the field (headers
  ``uep-dlq-reason``, ``uep-dlq-source-topic``) and skipped, so it cannot fail the subscriber forever
  (``dead_letter_undecodable=False`` skips it without a dead letter: for a second consumer of a topic whose
  first consumer dead-letters it already);
* drops, to the dead-letter topic with reason ``tenant_mismatch``, an event whose ``tenant_id`` is not its
  evaluation's owner (:mod:`uep_common.tenant_guard`, in every service with a database);
* opens the consumer span ``span`` (none when ``span`` is None): for one record, inside the current context,
  which FastStream's telemetry middleware has made the ``<topic> process`` span continuing the producer's
  trace, or, on a broker without that middleware, a child of the producer's ``traceparent`` header; for a
  batch, a span linked to each decoded record's producer span;
* calls the handler with the event (a batch: the list of decoded events, never empty), plus the FastStream
  message when the handler takes a second parameter (to reach the raw records, e.g. to dead-letter one
  after processing). Exceptions of the handler propagate, so the subscriber's ``ack_policy`` applies.

Why a decorator and not a FastStream middleware: FastStream 0.7 has only broker- and router-level
middlewares, which wrap every subscriber of a broker alike and know neither the event model of one
subscriber nor its span; the wrapper keeps the signature ``(msg: KafkaMessage)``, so the AsyncAPI document
(``docs/asyncapi.json``) is the same as for a hand-written subscriber.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from faststream.kafka import KafkaBroker, KafkaMessage
from opentelemetry import trace

from uep_common import tenant_guard
from uep_common.events import Event
from uep_common.messaging import UndecodableEvent, dead_letter, decode_event, raw_records
from uep_common.telemetry import context_from_headers
from uep_common.telemetry import tracer as make_tracer

Attributes = Mapping[str, str | int | float | bool]


def producer_link(headers: Mapping[str, str | bytes]) -> trace.Link | None:
    """A span link to the producer's span named by a record's ``traceparent`` header, or None without one."""
    ctx = trace.get_current_span(context_from_headers(headers)).get_span_context()
    return trace.Link(ctx) if ctx.is_valid else None


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

    Returns:
        a decorator whose result is ``async (msg: KafkaMessage) -> None``, to be decorated with
        ``broker.subscriber(...)``.
    """
    source = topic or cls.topic
    span_tracer = tracer or make_tracer("uep.consumer")

    def decorate(handler: Callable[..., Awaitable[None]]) -> Callable[[KafkaMessage], Awaitable[None]]:
        pass_message = _takes_message(handler)

        async def call(payload: Any, msg: KafkaMessage) -> None:
            await (handler(payload, msg) if pass_message else handler(payload))

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

        async def on_message(msg: KafkaMessage) -> None:
            records = raw_records(msg)
            if not batch:
                body, headers = records[0]
                event = await decoded(body)
                if event is None:
                    return
                if span is None:
                    await call(event, msg)
                    return
                parent = None if trace.get_current_span().get_span_context().is_valid else context_from_headers(headers)
                attrs = attributes(event) if attributes else None
                with span_tracer.start_as_current_span(span, context=parent, attributes=attrs):
                    await call(event, msg)
                return
            events, links = [], []
            for body, headers in records:
                event = await decoded(body)
                if event is None:
                    continue
                events.append(event)
                if (link := producer_link(headers)) is not None:
                    links.append(link)
            if not events:
                return
            if span is None:
                await call(events, msg)
                return
            attrs = attributes(events) if attributes else None
            with span_tracer.start_as_current_span(span, links=links, attributes=attrs):
                await call(events, msg)

        on_message.__name__ = handler.__name__
        on_message.__qualname__ = handler.__qualname__
        on_message.__doc__ = handler.__doc__
        on_message.__module__ = handler.__module__
        return on_message

    return decorate
