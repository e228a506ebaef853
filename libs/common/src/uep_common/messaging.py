"""Kafka plumbing shared by the services: broker factory, topic creation, consumer defaults, publishing.

Settings suit the tansu broker: no idempotent/transactional producer (tansu rejects
aiokafka's InitProducerId v0; exactly-once comes from PostgreSQL and idempotent consumers), topics created
explicitly with their partition counts, session_timeout 6 s and fetch_max_wait 100 ms.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError
from faststream.kafka import KafkaBroker
from faststream.kafka.opentelemetry import KafkaTelemetryMiddleware
from faststream.message import StreamMessage
from opentelemetry.sdk.trace import TracerProvider

from uep_common.events import Event, Topics
from uep_common.settings import CommonSettings

log = logging.getLogger(__name__)

DEAD_LETTER_TOPIC = "uep.dead-letter.v1"
"""Messages a consumer could not decode or an item that still failed after its retries, with headers
``uep-dlq-reason``, ``uep-dlq-source-topic`` and optionally ``uep-dlq-id``; the scheduler keeps each in the
``dead_letters`` table and the gateway re-drives them (``POST /v1/dead-letters/{id}/redrive``)."""


def make_broker(settings: CommonSettings, tracer_provider: TracerProvider | None = None) -> KafkaBroker:
    """FastStream Kafka broker with uep's producer settings and the OpenTelemetry middleware."""
    middlewares = [KafkaTelemetryMiddleware(tracer_provider=tracer_provider)] if tracer_provider else []
    return KafkaBroker(
        settings.kafka_bootstrap,
        acks="all",
        enable_idempotence=False,
        request_timeout_ms=settings.kafka_request_timeout_ms,
        linger_ms=0,
        middlewares=middlewares,
        client_id=f"uep-{settings.service_name}",
    )


def consumer_options(settings: CommonSettings, service: str) -> dict[str, Any]:
    """Keyword arguments for ``broker.subscriber``: group ``<prefix>.<service>`` and fast-join timings.

    Give every subscriber of a process its own group: two members of one group leaving together can
    wedge the group on tansu (a "ghost leader" the group waits for).
    """
    return {
        "group_id": f"{settings.consumer_group_prefix}.{service}",
        "auto_offset_reset": "earliest",
        "session_timeout_ms": settings.kafka_session_timeout_ms,
        "heartbeat_interval_ms": settings.kafka_heartbeat_interval_ms,
        "fetch_max_wait_ms": settings.kafka_fetch_max_wait_ms,
    }


async def ensure_topics(settings: CommonSettings) -> list[str]:
    """Create every uep topic (and the dead-letter topic) that does not exist. Returns the names created."""
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    created: list[str] = []
    try:
        existing = set(await admin.list_topics())
        wanted = [t for t in [*Topics.all(), DEAD_LETTER_TOPIC] if t not in existing]
        for name in wanted:
            try:
                await admin.create_topics(
                    [
                        NewTopic(
                            name=name,
                            num_partitions=settings.kafka_partitions,
                            replication_factor=settings.kafka_replication_factor,
                        )
                    ]
                )
                created.append(name)
            except TopicAlreadyExistsError:
                pass
    finally:
        await admin.close()
    return created


PUBLISH_ATTEMPTS = 3
"""Tries of :func:`publish` (the first and two after a metadata refresh)."""


def refresh_metadata(broker: KafkaBroker) -> bool:
    """Ask the broker's aiokafka producer to refresh its cluster metadata now; False when it has none yet.

    A producer whose cached metadata names partitions the broker no longer has (a memory-storage broker
    restarted and a topic re-created with fewer partitions) fails every
    send to them with ``UnknownError`` and does not refresh by itself until ``metadata_max_age_ms``.
    """
    state = getattr(broker._producer, "_producer", None)  # FastStream 0.7: AioKafkaFastProducerImpl → RealProducer
    producer = getattr(state, "producer", None)
    if producer is None:
        return False
    producer.client.force_metadata_update()
    return True


async def publish(broker: KafkaBroker, body: Any, *, topic: str, key: bytes | str | None, headers: dict[str, str]) -> None:
    """``broker.publish`` with the ack awaited; on a Kafka error refresh the metadata and try again, up to
    :data:`PUBLISH_ATTEMPTS` times in all (0.1 s, then 0.2 s apart). Raises the last error."""
    for attempt in range(PUBLISH_ATTEMPTS):
        try:
            await broker.publish(body, topic=topic, key=key, headers=headers)
            return
        except KafkaError as exc:
            if attempt == PUBLISH_ATTEMPTS - 1:
                raise
            log.warning("publish to %s failed (%r); refreshing metadata and retrying", topic, exc)
            refresh_metadata(broker)
            await asyncio.sleep(0.1 * 2**attempt)


async def publish_event(broker: KafkaBroker, event: Event, headers: dict[str, str] | None = None) -> None:
    """Publish ``event`` on its topic with its key and uep headers (+ ``headers``); waits for the ack and
    retries as :func:`publish` does."""
    await publish(
        broker, event.model_dump(mode="json"), topic=event.topic, key=event.key(), headers={**event.headers(), **(headers or {})}
    )


async def dead_letter(
    broker: KafkaBroker,
    body: bytes,
    source_topic: str,
    reason: str,
    *,
    key: bytes | None = None,
    headers: Mapping[str, bytes | str] | None = None,
    dlq_id: str | None = None,
) -> None:
    """Send a message that could not be processed to the dead-letter topic with the reason (never silently
    dropped). ``key``/``headers`` are the original message's (a redrive re-publishes them); ``dlq_id``
    (header ``uep-dlq-id``) is a deterministic id that makes the stored record idempotent."""
    log.error("dead-lettering a message from %s: %s", source_topic, reason[:300])
    out = {k: (v.decode("utf-8", "replace") if isinstance(v, bytes | bytearray) else str(v)) for k, v in (headers or {}).items()}
    out.update({"uep-dlq-reason": reason[:1000], "uep-dlq-source-topic": source_topic})
    if dlq_id:
        out["uep-dlq-id"] = dlq_id
    await broker.publish(body, topic=DEAD_LETTER_TOPIC, key=key, headers=out)


class UndecodableEvent(ValueError):  # noqa: N818 - a public name that callers and tests catch; renaming it breaks them
    """A message body is not valid JSON for the expected event schema (the reason names the field)."""


def decode_event(cls: type[Event], body: bytes | str | dict[str, Any]) -> Event:
    """Validate a message body as ``cls``.

    Raises:
        UndecodableEvent: the body is not JSON or does not match the schema; the message names the
            offending field(s) and why.
    """
    from pydantic import ValidationError

    try:
        if isinstance(body, dict):
            return cls.model_validate(body)
        return cls.model_validate_json(body)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '<body>'}: {e['msg']}" for e in exc.errors()[:5])
        raise UndecodableEvent(f"invalid {cls.__name__}: {problems}") from exc


def raw_records(msg: StreamMessage[Any]) -> list[tuple[bytes, dict[str, bytes]]]:
    """``(value, headers)`` of each Kafka record behind a FastStream message (one, or a batch's records).

    Handlers decode values themselves with :func:`decode_event`, so an undecodable message can be
    dead-lettered with its reason instead of failing inside the framework.
    """
    raw = msg.raw_message
    records = raw if isinstance(raw, tuple | list) else (raw,)
    return [(r.value or b"", dict(r.headers or ())) for r in records]
