"""Kafka plumbing shared by the services: broker factory, topic creation, consumer defaults, publishing.

Every client (the FastStream broker, admin clients) gets the connection security of the settings
(:func:`security`: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL with SCRAM-SHA-512/256 or PLAIN, an optional CA
file and client certificate). Producers use ``acks="all"`` and the idempotent producer, except with
``kafka_tansu_compat`` (the local stack's tansu rejects aiokafka's InitProducerId; exactly-once comes from
PostgreSQL and idempotent consumers either way). Topics are created explicitly with their partition count,
replication factor and ``min.insync.replicas`` (:func:`ensure_topics`).
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

from uep_common import metrics
from uep_common.events import Event, Topics
from uep_common.fetch_pacing import FetchPacer, PacedKafkaBroker
from uep_common.settings import CommonSettings
from uep_common.trace_propagation import TraceContextMiddleware

log = logging.getLogger(__name__)

DEAD_LETTER_TOPIC = "uep.dead-letter.v1"
"""Messages a consumer could not decode or an item that still failed after its retries, with headers
``uep-dlq-reason``, ``uep-dlq-source-topic`` and optionally ``uep-dlq-id``; the scheduler keeps each in the
``dead_letters`` table and the gateway re-drives them (``POST /v1/dead-letters/{id}/redrive``)."""

PER_EVALUATION_TOPICS = frozenset(
    {
        Topics.EVALUATION_REQUESTED,
        Topics.EVALUATION_COMPLETED,
        Topics.RESCORE_REQUESTED,
        Topics.REPORT_REQUESTED,
        Topics.REPORT_READY,
        DEAD_LETTER_TOPIC,
    }
)
"""Topics that carry a few events per evaluation (or, the dead-letter topic, only failures), not one per item.
Their consumers keep the idle fetch wait while their process is busy (:class:`uep_common.fetch_pacing.FetchPacer`):
on the per-item path a short wait saves latency at every hop, here it would only add fetches — ten a second per
consumer — for events that come once per evaluation, and that admission (the gateway's NOTIFY) and lease
release do not wait for."""


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
    record it publishes (:class:`uep_common.trace_propagation.TraceContextMiddleware`; no messaging spans).

    ``acks="all"``; the idempotent producer unless ``kafka_tansu_compat`` (tansu refuses it); record batches
    compressed with ``kafka_compression_type`` when set. FastStream logs
    through the logger ``faststream.access.kafka`` without handlers of its own (:mod:`uep_common.logs` formats it),
    its per-record lines at ``kafka_access_log_level``."""
    middlewares: list[Any] = [TraceContextMiddleware]
    pacer = fetch_pacer(settings)
    if pacer is not None:
        middlewares.append(pacer.middleware())
    broker = PacedKafkaBroker(
        settings.kafka_bootstrap,
        acks="all",
        enable_idempotence=not settings.kafka_tansu_compat,
        request_timeout_ms=settings.kafka_request_timeout_ms,
        linger_ms=0,
        compression_type=settings.kafka_compression_type,
        middlewares=middlewares,
        client_id=f"uep-{settings.service_name}",
        security=security(settings),
        logger=logging.getLogger("faststream.access.kafka"),
        log_level=logging.getLevelName(settings.kafka_access_log_level),
    )
    if pacer is not None:
        pacer.broker, broker.pacer = broker, pacer
    return broker


def fetch_pacer(settings: CommonSettings) -> FetchPacer | None:
    """The settings' :class:`uep_common.fetch_pacing.FetchPacer`, or None when the idle wait is no longer than
    the busy one (no pacing). Consumers of :data:`PER_EVALUATION_TOPICS` keep the idle wait."""
    if settings.kafka_idle_fetch_max_wait_ms <= settings.kafka_fetch_max_wait_ms:
        return None
    return FetchPacer(
        settings.kafka_fetch_max_wait_ms,
        settings.kafka_idle_fetch_max_wait_ms,
        settings.kafka_idle_after_s,
        steady_topics=PER_EVALUATION_TOPICS,
    )


async def undecoded_body(msg: StreamMessage[Any]) -> None:
    """FastStream decoder of uep's subscribers: decodes nothing. Their handlers read the raw records
    (:func:`raw_records`, through :func:`uep_common.consuming.consume`) and validate each with its event model, so
    FastStream's own JSON decoding of every record (for a batch, after parsing each record again) was thrown
    away."""
    return None


def consumer_options(settings: CommonSettings, service: str) -> dict[str, Any]:
    """Keyword arguments for ``broker.subscriber``: group ``<prefix>.<service>``, fast-join timings, the
    starting fetch wait (:func:`start_fetch_wait_ms`), the fetch loop's idle wake-up period, and
    :func:`undecoded_body` as the decoder (a handler reads the raw records).

    Give every subscriber of a process its own group: two members of one group leaving together can
    wedge the group on tansu (a "ghost leader" the group waits for).
    """
    return {
        "group_id": f"{settings.consumer_group_prefix}.{service}",
        "session_timeout_ms": settings.kafka_session_timeout_ms,
        "heartbeat_interval_ms": settings.kafka_heartbeat_interval_ms,
        **broadcast_options(settings),
    }


def broadcast_options(settings: CommonSettings) -> dict[str, Any]:
    """Keyword arguments for ``broker.subscriber`` of a consumer without a group (every replica reads every
    record, from the start of the topic): the starting fetch wait (:func:`start_fetch_wait_ms`, so an idle process
    long-polls slowly from its start), the fetch loop's idle wake-up period and :func:`undecoded_body` as the
    decoder. :func:`consumer_options` adds a group to these."""
    return {
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": start_fetch_wait_ms(settings),
        "consumer_timeout_ms": settings.kafka_consumer_timeout_ms,
        "decoder": undecoded_body,
    }


def start_fetch_wait_ms(settings: CommonSettings) -> int:
    """Fetch wait a consumer of a broker from :func:`make_broker` starts with: the idle wait when the settings
    pace consumers (the first message shortens it, :mod:`uep_common.fetch_pacing`), else ``kafka_fetch_max_wait_ms``."""
    return max(settings.kafka_fetch_max_wait_ms, settings.kafka_idle_fetch_max_wait_ms)


def topic_spec(settings: CommonSettings, name: str) -> NewTopic:
    """How uep creates topic ``name``: ``kafka_partitions`` partitions, ``kafka_replication_factor`` replicas and,
    above the broker default of 1, ``min.insync.replicas`` = ``kafka_min_insync_replicas``."""
    configs = {"min.insync.replicas": str(settings.kafka_min_insync_replicas)} if settings.kafka_min_insync_replicas > 1 else None
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
    :data:`PUBLISH_ATTEMPTS` times in all (0.1 s, then 0.2 s apart). Raises the last error. Counted in
    ``uep_messages_out_total`` / ``uep_publish_errors_total``."""
    for attempt in range(PUBLISH_ATTEMPTS):
        try:
            await broker.publish(body, topic=topic, key=key, headers=headers)
            metrics.MESSAGES_OUT.labels(topic).inc()
            return
        except KafkaError as exc:
            if attempt == PUBLISH_ATTEMPTS - 1:
                metrics.PUBLISH_ERRORS.labels(topic).inc()
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
    (header ``uep-dlq-id``) is a deterministic id that makes the stored record idempotent. Counted in
    ``uep_messages_dead_lettered_total`` by source topic and :func:`uep_common.metrics.reason_kind`."""
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
