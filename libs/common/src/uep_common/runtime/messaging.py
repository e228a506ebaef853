"""Kafka plumbing shared by the services: broker factory, topic creation, consumer defaults, publishing.

Every client (the FastStream broker, admin clients) gets the connection security of the settings
(:func:`security`: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL with SCRAM-SHA-512/256 or PLAIN, an optional CA
file and client certificate). Producers use ``acks="all"`` and the idempotent producer: the broker drops a batch
that a producer retries after a lost acknowledgement (exactly-once results themselves come from PostgreSQL and
idempotent consumers). Topics are created explicitly with their partition count, replication factor,
``min.insync.replicas`` and retention (:func:`ensure_topics`).

Consumer groups: every replica of a service joins the same groups, so the replicas share the partitions of each
topic (Kafka's scaling model); a service has one group per subscription (:func:`consumer_options`), so that a
rebalance of one topic's consumers never pauses the service's others.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError
from aiokafka.helpers import create_ssl_context
from faststream.kafka import KafkaBroker
from faststream.kafka.security import parse_security
from faststream.message import StreamMessage
from faststream.security import BaseSecurity, SASLPlaintext, SASLScram256, SASLScram512

from uep_common.contract.events import Event, Topics
from uep_common.runtime import metrics
from uep_common.runtime.batch_polling import BatchPollingKafkaBroker
from uep_common.runtime.settings import CommonSettings
from uep_common.runtime.trace_propagation import TraceContextMiddleware

log = logging.getLogger(__name__)

DEAD_LETTER_TOPIC = "uep.dead-letter.v1"
"""Messages a consumer could not decode or an item that still failed after its retries, with headers
``uep-dlq-reason``, ``uep-dlq-source-topic`` and optionally ``uep-dlq-id``; the scheduler keeps each in the
``dead_letters`` table and the gateway re-drives them (``POST /v1/dead-letters/{id}/redrive``)."""

_SASL: dict[str, type[SASLPlaintext | SASLScram256 | SASLScram512]] = {
    "SCRAM-SHA-512": SASLScram512,
    "SCRAM-SHA-256": SASLScram256,
    "PLAIN": SASLPlaintext,
}


def security(settings: CommonSettings) -> BaseSecurity | None:
    """FastStream security object of the settings' ``kafka_security_protocol``; None for PLAINTEXT.

    SSL and SASL_SSL verify the brokers' certificates against ``kafka_ssl_ca_file`` (or the system CAs) and
    present ``kafka_ssl_cert_file``/``kafka_ssl_key_file`` when set (mutual TLS); SASL_* authenticate with
    ``kafka_sasl_mechanism`` as ``kafka_sasl_username``. Raises OSError/ssl.SSLError when a file cannot be read.
    """
    protocol = settings.kafka_security_protocol
    if protocol == "PLAINTEXT":
        return None
    tls = protocol in ("SSL", "SASL_SSL")
    context = (
        create_ssl_context(
            cafile=settings.kafka_ssl_ca_file, certfile=settings.kafka_ssl_cert_file, keyfile=settings.kafka_ssl_key_file
        )
        if tls
        else None
    )
    if protocol == "SSL":
        return BaseSecurity(ssl_context=context)
    password = settings.kafka_sasl_password.get_secret_value() if settings.kafka_sasl_password else ""
    return _SASL[settings.kafka_sasl_mechanism](settings.kafka_sasl_username, password, ssl_context=context, use_ssl=tls)


def client_options(settings: CommonSettings) -> dict[str, Any]:
    """Keyword arguments of an aiokafka client (admin, producer, consumer) for the settings' broker and security:
    ``bootstrap_servers``, ``client_id`` and ``security_protocol`` (+ ``ssl_context``, ``sasl_mechanism``,
    ``sasl_plain_username``/``sasl_plain_password`` where used) — the same connection the FastStream broker makes."""
    return {
        "bootstrap_servers": settings.kafka_bootstrap,
        "client_id": f"uep-{settings.service_name}",
        **parse_security(security(settings)),
    }


def make_admin(settings: CommonSettings) -> AIOKafkaAdminClient:
    """An aiokafka admin client (not started) on the settings' broker, with their security."""
    return AIOKafkaAdminClient(request_timeout_ms=settings.kafka_request_timeout_ms, **client_options(settings))


def make_broker(settings: CommonSettings) -> KafkaBroker:
    """FastStream Kafka broker with uep's producer settings, the settings' security and W3C trace context on every
    record it publishes (:class:`uep_common.runtime.trace_propagation.TraceContextMiddleware`; no messaging spans).

    ``acks="all"`` and the idempotent producer; record batches compressed with ``kafka_compression_type`` when set;
    batch subscribers poll without FastStream's sleep (:mod:`uep_common.runtime.batch_polling`). FastStream logs through the
    logger ``faststream.access.kafka`` without handlers of its own (:mod:`uep_common.runtime.logs` formats it), its
    per-record lines at ``kafka_access_log_level``."""
    return BatchPollingKafkaBroker(
        settings.kafka_bootstrap,
        acks="all",
        enable_idempotence=True,
        request_timeout_ms=settings.kafka_request_timeout_ms,
        linger_ms=0,
        compression_type=settings.kafka_compression_type,
        middlewares=[TraceContextMiddleware],
        client_id=f"uep-{settings.service_name}",
        security=security(settings),
        logger=logging.getLogger("faststream.access.kafka"),
        log_level=logging.getLevelName(settings.kafka_access_log_level),
    )


async def undecoded_body(msg: StreamMessage[Any]) -> None:
    """FastStream decoder of uep's subscribers: decodes nothing. Their handlers read the raw records
    (:func:`raw_records`, through :func:`uep_common.runtime.consuming.consume`) and validate each with its event model, so
    FastStream's own JSON decoding of every record (for a batch, after parsing each record again) was thrown
    away."""
    return None


def consumer_options(settings: CommonSettings, service: str) -> dict[str, Any]:
    """Keyword arguments for ``broker.subscriber``: group ``<prefix>.<service>`` (``service`` may name a
    subscription too, e.g. ``scorer.rescore``), the session and heartbeat timings, and :func:`broadcast_options`.

    Every replica of a service passes the same name, so the replicas share the subscription's partitions."""
    return {
        "group_id": f"{settings.consumer_group_prefix}.{service}",
        "session_timeout_ms": settings.kafka_session_timeout_ms,
        "heartbeat_interval_ms": settings.kafka_heartbeat_interval_ms,
        **broadcast_options(settings),
    }


def broadcast_options(settings: CommonSettings) -> dict[str, Any]:
    """Keyword arguments for ``broker.subscriber`` of a consumer without a group (every replica reads every
    record, from the start of the topic): the fetch wait (``kafka_fetch_max_wait_ms``: Kafka answers a waiting fetch
    when a record arrives), the fetch loop's idle wake-up period and :func:`undecoded_body` as the decoder.
    :func:`consumer_options` adds a group to these."""
    return {
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": settings.kafka_fetch_max_wait_ms,
        "consumer_timeout_ms": settings.kafka_consumer_timeout_ms,
        "decoder": undecoded_body,
    }


def topic_spec(settings: CommonSettings, name: str) -> NewTopic:
    """How uep creates topic ``name``: ``kafka_partitions`` partitions, ``kafka_replication_factor`` replicas, the
    retention of the settings (``retention.ms``, ``retention.bytes`` per partition, ``segment.bytes``; the
    dead-letter topic keeps ``kafka_dead_letter_retention_ms``) and, above the broker default of 1,
    ``min.insync.replicas`` = ``kafka_min_insync_replicas``. No topic is compacted: every event is one fact, none
    replaces an earlier one of its key."""
    retention_ms = settings.kafka_dead_letter_retention_ms if name == DEAD_LETTER_TOPIC else settings.kafka_retention_ms
    configs = {
        "cleanup.policy": "delete",
        "retention.ms": str(retention_ms),
        "retention.bytes": str(settings.kafka_retention_bytes),
        "segment.bytes": str(settings.kafka_segment_bytes),
    }
    if settings.kafka_min_insync_replicas > 1:
        configs["min.insync.replicas"] = str(settings.kafka_min_insync_replicas)
    return NewTopic(
        name=name,
        num_partitions=settings.kafka_partitions,
        replication_factor=settings.kafka_replication_factor,
        topic_configs=configs,
    )


async def ensure_topics(settings: CommonSettings) -> list[str]:
    """Create every uep topic (and the dead-letter topic) that does not exist (:func:`topic_spec`); existing
    topics are left as they are. Returns the names created."""
    admin = make_admin(settings)
    await admin.start()
    created: list[str] = []
    try:
        existing = set(await admin.list_topics())
        wanted = [t for t in [*Topics.all(), DEAD_LETTER_TOPIC] if t not in existing]
        for name in wanted:
            try:
                await admin.create_topics([topic_spec(settings, name)])
                created.append(name)
            except TopicAlreadyExistsError:
                pass
    finally:
        await admin.close()
    return created


PUBLISH_ATTEMPTS = 3
"""Tries of :func:`publish` (the first and two more, 0.1 s and 0.2 s later)."""


async def publish(broker: KafkaBroker, body: Any, *, topic: str, key: bytes | str | None, headers: dict[str, str]) -> None:
    """``broker.publish`` with the ack awaited; on a Kafka error (the broker restarting, a leader moving) try
    again, up to :data:`PUBLISH_ATTEMPTS` times in all. The idempotent producer keeps a retried batch from being
    written twice. Raises the last error. Counted in ``uep_messages_out_total`` / ``uep_publish_errors_total``."""
    for attempt in range(PUBLISH_ATTEMPTS):
        try:
            await broker.publish(body, topic=topic, key=key, headers=headers)
            metrics.MESSAGES_OUT.labels(topic).inc()
            return
        except KafkaError as exc:
            if attempt == PUBLISH_ATTEMPTS - 1:
                metrics.PUBLISH_ERRORS.labels(topic).inc()
                raise
            log.warning("publish to %s failed (%r); retrying", topic, exc)
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
    (header ``uep-dlq-id``) is a deterministic id that makes the stored record idempotent. Counted in
    ``uep_messages_dead_lettered_total`` by source topic and :func:`uep_common.runtime.metrics.reason_kind`."""
    log.error("dead-lettering a message from %s: %s", source_topic, reason[:300])
    out = {k: (v.decode("utf-8", "replace") if isinstance(v, bytes | bytearray) else str(v)) for k, v in (headers or {}).items()}
    out.update({"uep-dlq-reason": reason[:1000], "uep-dlq-source-topic": source_topic})
    if dlq_id:
        out["uep-dlq-id"] = dlq_id
    await broker.publish(body, topic=DEAD_LETTER_TOPIC, key=key, headers=out)
    metrics.DEAD_LETTERED.labels(source_topic, metrics.reason_kind(reason)).inc()
    metrics.MESSAGES_OUT.labels(DEAD_LETTER_TOPIC).inc()


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


def kafka_records(msg: StreamMessage[Any]) -> Sequence[Any]:
    r"""The aiokafka ``ConsumerRecord``\ s behind a FastStream message: one, or a batch subscriber's records."""
    raw = msg.raw_message
    return raw if isinstance(raw, tuple | list) else (raw,)


def raw_records(msg: StreamMessage[Any]) -> list[tuple[bytes, dict[str, bytes]]]:
    """``(value, headers)`` of each Kafka record behind a FastStream message (one, or a batch's records).

    Handlers decode values themselves with :func:`decode_event`, so an undecodable message can be
    dead-lettered with its reason instead of failing inside the framework.
    """
    return [(r.value or b"", dict(r.headers or ())) for r in kafka_records(msg)]
