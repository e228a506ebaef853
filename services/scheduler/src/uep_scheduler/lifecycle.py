"""Scheduler lifecycle and faults: replica registry, interrupting on restart, lease-attempt exhaustion,
and the dead-letter consumer.

Replicas
    Each scheduler process registers a ``scheduler_instances`` row and holds the session-level PostgreSQL
    advisory lock ``(LOCK_NAMESPACE, lock_key)`` on a dedicated connection for its whole life; a heartbeat
    refreshes ``heartbeat_at`` every ``UEP_SCHEDULER_HEARTBEAT_SECONDS``. An instance is *live* exactly
    when its lock is held: PostgreSQL drops the lock when the process or its connection dies (kill -9
    included), so a restarted replica needs no timeout to know its predecessor is gone.

Restart → interrupted
    At start-up, under the transaction advisory lock ``(LOCK_NAMESPACE, 0)`` (one starting replica at a
    time), the instance drops the rows of dead instances (``pg_try_advisory_xact_lock`` on their key
    succeeds) and, only if no other live instance remains, marks every evaluation that was ``running``
    before it started as ``interrupted`` (counters recounted from the stored rows, a partial summary).
    With other live replicas nothing is interrupted: they are driving those evaluations. Resuming an
    interrupted evaluation is an explicit ``POST /v1/evaluations/{id}/retry``.

Lease attempts
    A lease dispatched for the ``UEP_MAX_LEASE_ATTEMPTS``-th time since the item's last retry (attempt −
    attempt_base) is *parked*: ``final_deadline`` takes its expiry and ``lease_expires_at`` becomes
    :data:`PARKED` (year 9999), so the dispatch loop never re-dispatches it. Past ``final_deadline`` with still no
    result, the item is recorded failed — a ScoreComputed with error ``lease_attempts_exhausted`` through
    the outbox, stored by the reporter like any result — and the last SampleDispatched of the item is sent
    to the dead-letter topic with the reason. Both messages have deterministic ids, and the deadline moves
    one lease period on, so if they are lost (a broker restart) they are sent again; consumers are idempotent.

Dead letters
    Messages on ``uep.dead-letter.v1`` (undecodable events from any consumer, items inference gave up on
    after its retries, exhausted leases) are stored in ``dead_letters`` (idempotent on ``dedupe_key``);
    the gateway lists and re-drives them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from faststream import AckPolicy
from faststream.kafka import KafkaBroker, KafkaMessage
from pydantic import Field
from sqlalchemy import select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker

from uep_common.contract.configs import parse_benchmark_config
from uep_common.contract.events import ErrorInfo, EvaluationStatus, ScoreComputed, Topics
from uep_common.records.lifecycle import interrupt_running
from uep_common.runtime.background import BackgroundLoop
from uep_common.runtime.consuming import item_spans
from uep_common.runtime.messaging import DEAD_LETTER_TOPIC, consumer_options, kafka_records
from uep_common.runtime.outbox import OutboxRelay, add_to_outbox
from uep_common.runtime.settings import CommonSettings
from uep_common.runtime.telemetry import tracer
from uep_common.tables.lifecycle import LOCK_NAMESPACE, DeadLetter, SchedulerInstance, lock_evaluation
from uep_common.tables.models import Benchmark, OutboxMessage, SampleLease, SampleResult

if TYPE_CHECKING:
    from uep_common.runtime.service import ServiceRuntime

log = logging.getLogger(__name__)
_tracer = tracer("uep.scheduler")

# What ``broker.subscriber(...)`` returns, as a decorator of a subscriber function: mypy resolves the call to
# ``Any`` (its overloads are ambiguous given ``**consumer_options(...)``), so it is bound to this type first.
_Subscribe = Callable[[Callable[[KafkaMessage], Awaitable[None]]], object]

DLQ_ID, DLQ_REASON, DLQ_SOURCE = "uep-dlq-id", "uep-dlq-reason", "uep-dlq-source-topic"
"""Dead-letter headers: deterministic id (optional), reason, topic the original message came from."""
_NS = uuid.UUID("6f1d2a8e-5b7c-4e0a-9c41-0d7e2b3f5a10")


class LifecycleSettings(CommonSettings):
    """Settings of the scheduler's lifecycle part (``UEP_*`` environment variables)."""

    max_lease_attempts: int = Field(
        5,
        ge=1,
        le=100,
        description="Dispatches of one item (since its last retry) before it is recorded failed "
        "and dead-lettered; each ends when its lease expires without a result.",
    )
    scheduler_heartbeat_seconds: float = Field(
        2.0,
        gt=0,
        description="Period of a scheduler instance's heartbeat (``heartbeat_at``, shown in the live-instances gauge). "
        "Liveness itself is the advisory lock, but the heartbeat is also how an instance notices that its registration "
        "connection, and so its lock, is gone (a PostgreSQL restart) and takes it again: until then a replica starting "
        "up sees no live instance and interrupts the running evaluations, so this stays short.",
    )
    lease_seconds: float = Field(300.0, gt=0, description="The scheduler's lease length (same variable as dispatch).")
    tick_seconds: float = Field(1.0, gt=0, description="Period of the lease-exhaustion pass.")


PARKED = datetime(9999, 1, 1, tzinfo=UTC)
"""``lease_expires_at`` of a lease on its last attempt: never expires for the dispatch loop (a finite date, since
Python's datetime cannot hold PostgreSQL's 'infinity'); ``final_deadline`` holds its real expiry."""


def dead_letter_id(kind: str, item_key: str, attempt: int) -> uuid.UUID:
    """Deterministic id of the dead letter of one item's failure (``kind`` e.g. 'lease', 'inference')."""
    return uuid.uuid5(_NS, f"{kind}:{item_key}:{attempt}")


class Lifecycle:
    """Instance registration, interrupt-on-restart and the lease-exhaustion loop of one scheduler process.

    Args:
        engine: the scheduler's async engine (one connection is held for the instance's advisory lock).
        sessionmaker: session factory on ``engine``.
        relay: the scheduler's outbox relay (kicked after failures are staged).
        settings: :class:`LifecycleSettings`.
    """

    def __init__(
        self, engine: AsyncEngine, sessionmaker: async_sessionmaker[AsyncSession], relay: OutboxRelay, settings: LifecycleSettings
    ) -> None:
        self.engine, self.sm, self.relay, self.settings = engine, sessionmaker, relay, settings
        self.instance_id = uuid.uuid4()
        self.lock_key: int | None = None
        self.started_at = datetime.now(UTC)
        """Process start (before the broker's subscribers run): evaluations running since before it are
        interrupted at start-up, ones this process admits are not."""
        self._conn: AsyncConnection | None = None
        self._loops: list[BackgroundLoop] = []
        self.interrupted: list[uuid.UUID] = []
        self.exhaust_interval: Callable[[], float] = lambda: self.settings.tick_seconds
        """Seconds between lease-exhaustion passes (the process sets a longer one while nothing runs)."""

    async def _register(self) -> None:
        self._conn = await self.engine.connect()
        row = (
            await self._conn.execute(
                text(
                    "INSERT INTO scheduler_instances (id, hostname, pid) VALUES (:id, :h, :p) "
                    "ON CONFLICT (id) DO UPDATE SET heartbeat_at = now() RETURNING lock_key"
                ),
                {"id": self.instance_id, "h": socket.gethostname()[:200], "p": os.getpid()},
            )
        ).one()
        await self._conn.execute(text("SELECT pg_advisory_lock(:ns, :k)"), {"ns": LOCK_NAMESPACE, "k": row.lock_key})
        await self._conn.commit()
        self.lock_key = row.lock_key

    async def live_others(self, session: AsyncSession) -> int:
        """Drop the rows of dead instances (their advisory lock is free); return how many others are live.
        Must run in a transaction (the probes are transaction-level locks, released at its end)."""
        others = (
            await session.execute(
                select(SchedulerInstance.id, SchedulerInstance.lock_key).where(SchedulerInstance.id != self.instance_id)
            )
        ).all()
        live = 0
        for other_id, key in others:
            free = await session.scalar(text("SELECT pg_try_advisory_xact_lock(:ns, :k)"), {"ns": LOCK_NAMESPACE, "k": key})
            if free:
                await session.execute(text("DELETE FROM scheduler_instances WHERE id = :id"), {"id": other_id})
            else:
                live += 1
        return live

    async def start(self) -> None:
        """Register this instance, interrupt what no live replica drives, start the heartbeat and the
        lease-exhaustion loops. Call before the dispatch loop starts."""
        await self._register()
        async with self.sm() as s, s.begin():
            await s.execute(text("SELECT pg_advisory_xact_lock(:ns, 0)"), {"ns": LOCK_NAMESPACE})
            live = await self.live_others(s)
            if live == 0:
                self.interrupted = await interrupt_running(s, self.started_at)
        if self.interrupted:
            log.warning(
                "scheduler restarted with no other live replica: %d running evaluations marked interrupted "
                "(POST /v1/evaluations/{id}/retry resumes one)",
                len(self.interrupted),
            )
        elif live:
            log.info("%d other live scheduler replica(s): running evaluations left to them", live)
        try:  # parked leases first, before the dispatch loop sees expired ones; never fails the start-up
            await self.exhaust_once()
        except Exception:
            log.exception("lease-exhaustion pass at start-up failed; the loop retries it")
        self._loops = [
            BackgroundLoop("scheduler-heartbeat", self._heartbeat, self.settings.scheduler_heartbeat_seconds),
            BackgroundLoop("lease-exhaustion", self.exhaust_once, lambda: self.exhaust_interval()),
        ]
        for loop in self._loops:
            loop.start()

    async def stop(self) -> None:
        """Stop the loops, drop this instance's row and release its lock."""
        for loop in self._loops:
            await loop.stop()
        if self._conn is not None:
            try:
                await self._conn.execute(text("DELETE FROM scheduler_instances WHERE id = :id"), {"id": self.instance_id})
                await self._conn.commit()
                await self._conn.close()
            except Exception:
                log.warning("could not deregister scheduler instance", exc_info=True)

    async def _heartbeat(self) -> None:
        conn = self._conn
        try:
            if conn is None:
                raise RuntimeError("no registration connection")
            await conn.execute(
                text("UPDATE scheduler_instances SET heartbeat_at = now() WHERE id = :id"), {"id": self.instance_id}
            )
            await conn.commit()
        except Exception:
            # The connection (and so the lock) is gone, e.g. PostgreSQL restarted: take the lock again on a new
            # one. Another replica that started meanwhile may have interrupted evaluations; they wait for a retry.
            log.warning("heartbeat connection lost; re-registering", exc_info=True)
            with contextlib.suppress(Exception):  # the connection is already broken
                if conn is not None:
                    await conn.close()
            await self._register()

    async def exhaust_once(self) -> int:
        """Park leases on their last allowed attempt; record failed and dead-letter the parked ones past their
        deadline with no result. Returns the items recorded failed in this pass."""
        async with self.sm() as s, s.begin():
            await s.execute(
                text(
                    "UPDATE sample_leases l SET final_deadline = l.lease_expires_at, lease_expires_at = :parked "
                    "WHERE l.state = 'leased' AND l.final_deadline IS NULL AND l.lease_expires_at < :parked "
                    "AND l.attempt - l.attempt_base >= :max AND NOT EXISTS (SELECT 1 FROM sample_results r "
                    "WHERE r.evaluation_id = l.evaluation_id AND r.sample_id = l.sample_id AND r.repeat = l.repeat AND r.arm = l.arm)"
                ),
                {"max": self.settings.max_lease_attempts, "parked": PARKED},
            )
            due = (
                (
                    await s.execute(
                        select(SampleLease.evaluation_id).where(SampleLease.final_deadline < datetime.now(UTC)).distinct()
                    )
                )
                .scalars()
                .all()
            )
        n = 0
        for evaluation_id in sorted(due):
            n += await self._fail_exhausted(evaluation_id)
        if n:
            self.relay.kick()
        return n

    async def _fail_exhausted(self, evaluation_id: uuid.UUID) -> int:
        now = datetime.now(UTC)
        async with self.sm() as s, s.begin():
            ev = await lock_evaluation(s, evaluation_id)
            if ev is None:
                return 0
            stored = (
                select(SampleResult.id)
                .where(
                    SampleResult.evaluation_id == SampleLease.evaluation_id,
                    SampleResult.sample_id == SampleLease.sample_id,
                    SampleResult.repeat == SampleLease.repeat,
                    SampleResult.arm == SampleLease.arm,
                )
                .exists()
            )
            leases = (
                await s.scalars(
                    select(SampleLease)
                    .where(SampleLease.evaluation_id == evaluation_id, SampleLease.final_deadline < now)
                    .with_for_update()
                )
            ).all()
            bench = await s.get(Benchmark, ev.benchmark_id)
            assert bench is not None  # evaluations.benchmark_id is a foreign key
            metric = parse_benchmark_config(bench.config).metric_name or "none"
            failed = 0
            for lease in leases:
                if await s.scalar(select(stored.where(SampleLease.id == lease.id))):
                    lease.final_deadline = None  # a result arrived after all
                    continue
                n = lease.attempt - lease.attempt_base
                reason = (
                    f"no result after {n} dispatch attempt(s): each lease of {self.settings.lease_seconds:g} s "
                    f"expired (UEP_MAX_LEASE_ATTEMPTS={self.settings.max_lease_attempts})"
                )
                item_key = f"{ev.id}:{lease.sample_id}:{lease.repeat}:{lease.arm}"
                if ev.status == EvaluationStatus.cancelled:  # its late results are discarded anyway
                    lease.final_deadline = None
                    continue
                score = ScoreComputed(
                    event_id=dead_letter_id("lease-score", item_key, lease.attempt),
                    evaluation_id=ev.id,
                    tenant_id=ev.tenant_id,
                    sample_id=lease.sample_id,
                    repeat=lease.repeat,
                    arm=lease.arm,
                    attempt=lease.attempt,
                    benchmark_id=ev.benchmark_id,
                    model_id=ev.model_id,
                    metric_name=metric,
                    metric_version="-",
                    is_correct=None,
                    score=None,
                    output=None,
                    error=ErrorInfo(stage="inference", type="lease_attempts_exhausted", message=reason),
                )
                # sent again (same event id) if an earlier copy was lost, e.g. by a broker restart
                await s.execute(text("DELETE FROM outbox WHERE event_id = :id"), {"id": score.event_id})
                add_to_outbox(s, score, ev.trace_context or {})
                await self._stage_dead_letter(s, item_key, lease.attempt, reason)
                lease.final_deadline = now + timedelta(seconds=self.settings.lease_seconds)
                failed += 1
            if failed:
                log.warning("evaluation %s: %d item(s) recorded failed after exhausting their lease attempts", ev.id, failed)
            return failed

    async def _stage_dead_letter(self, s: AsyncSession, item_key: str, attempt: int, reason: str) -> None:
        """Stage the item's last SampleDispatched (from the outbox) on the dead-letter topic with ``reason``."""
        original = await s.scalar(
            select(OutboxMessage)
            .where(OutboxMessage.topic == Topics.SAMPLE_DISPATCHED, OutboxMessage.key == item_key.encode())
            .order_by(OutboxMessage.id.desc())
            .limit(1)
        )
        if original is None:
            return
        dlq_id = dead_letter_id("lease", item_key, attempt)
        await s.execute(text("DELETE FROM outbox WHERE event_id = :id"), {"id": dlq_id})
        s.add(
            OutboxMessage(
                event_id=dlq_id,
                event_type=original.event_type,
                topic=DEAD_LETTER_TOPIC,
                key=original.key,
                payload=original.payload,
                headers={**original.headers, DLQ_ID: str(dlq_id), DLQ_REASON: reason[:1000], DLQ_SOURCE: original.topic},
            )
        )


# ----------------------------------------------------------------------------------------------- dead letters
def dead_letter_row(body: bytes, headers: dict[str, bytes], key: bytes | None) -> dict[str, Any]:
    """The ``dead_letters`` row of one dead-letter record (values for an insert).

    ``evaluation_id``/``item_key`` are read from the body when it is a JSON event that has them."""
    h = {k: (v.decode("utf-8", "replace") if isinstance(v, bytes | bytearray) else str(v)) for k, v in headers.items()}
    source = h.pop(DLQ_SOURCE, "") or "unknown"
    reason = h.pop(DLQ_REASON, "") or "no reason given"
    dlq_id = h.pop(DLQ_ID, None)
    evaluation_id = item_key = None
    try:
        doc = json.loads(body)
        if isinstance(doc, dict) and doc.get("evaluation_id"):
            evaluation_id = uuid.UUID(str(doc["evaluation_id"]))
            if doc.get("sample_id"):
                item_key = f"{evaluation_id}:{doc['sample_id']}:{doc.get('repeat', 0)}:{doc.get('arm', 'main')}"
    except (ValueError, TypeError):
        pass
    dedupe = dlq_id or hashlib.sha256(source.encode() + b"\0" + (key or b"") + b"\0" + body).hexdigest()
    return {
        "id": uuid.uuid4(),
        "dedupe_key": dedupe[:64],
        "source_topic": source[:200],
        "reason": reason,
        "event_type": h.get("uep-event-type"),
        "evaluation_id": evaluation_id,
        "item_key": item_key,
        "key": key,
        "body": body,
        "headers": h,
    }


async def store_dead_letters(session: AsyncSession, records: list[tuple[bytes, dict[str, bytes], bytes | None]]) -> int:
    """Insert dead-letter records (idempotent: a record seen again only refreshes ``last_seen_at`` and the
    reason). Must run inside a transaction; returns the records given."""
    if not records:
        return 0
    rows = list({r["dedupe_key"]: r for r in (dead_letter_row(b, h, k) for b, h, k in records)}.values())
    stmt = pg_insert(DeadLetter).values(rows)
    await session.execute(
        stmt.on_conflict_do_update(
            index_elements=["dedupe_key"], set_={"last_seen_at": text("now()"), "reason": stmt.excluded.reason}
        )
    )
    return len(records)


def register_dead_letters(broker: KafkaBroker, settings: CommonSettings, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
    """Subscribe the dead-letter consumer (group ``<prefix>.scheduler.dead-letters``) on ``broker``."""
    subscribe: _Subscribe = broker.subscriber(
        DEAD_LETTER_TOPIC,
        **consumer_options(settings, "scheduler.dead-letters"),
        batch=True,
        max_records=200,
        batch_timeout_ms=500,  # dead letters are rare and not urgent: an idle consumer wakes once a second
        ack_policy=AckPolicy.NACK_ON_ERROR,
        title="scheduler:DeadLetter",
        description="Keeps every dead-lettered message, with its reason, in PostgreSQL (dead_letters).",
    )

    @subscribe
    async def on_dead_letters(msg: KafkaMessage) -> None:
        batch = [(r.value or b"", dict(r.headers or ()), r.key) for r in kafka_records(msg)]
        # a span per dead letter in its message's trace (the headers are the original message's)
        with item_spans(_tracer, "store dead letter", [(b, b[1]) for b in batch]):
            async with sessionmaker() as s, s.begin():
                await store_dead_letters(s, batch)
        log.info("stored %d dead letter(s)", len(batch))


def install(runtime: ServiceRuntime, relay: OutboxRelay) -> Lifecycle:
    """Wire the lifecycle part into the scheduler process: the dead-letter consumer on ``runtime.broker``
    and a :class:`Lifecycle` whose ``start()``/``stop()`` the process calls around its dispatch loop."""
    if runtime.engine is None or runtime.sessionmaker is None:
        raise ValueError("the scheduler lifecycle needs a runtime with a database (use_db=True)")
    settings = LifecycleSettings()
    register_dead_letters(runtime.broker, settings, runtime.sessionmaker)
    return Lifecycle(runtime.engine, runtime.sessionmaker, relay, settings)
