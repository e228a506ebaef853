"""Transactional outbox: write an event in the same transaction as the state change it announces, and
relay unpublished rows to Kafka at least once.

Writers call :func:`add_to_outbox` inside their transaction. Each service that writes runs an
:class:`OutboxRelay`; relays in several replicas share the table safely (``SELECT … FOR UPDATE SKIP
LOCKED``). A crash between publish and the ``published_at`` stamp republishes the row: consumers are
idempotent by ``event_id`` / item key, so that is harmless.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from faststream.kafka import KafkaBroker
from sqlalchemy import BigInteger, Table, any_, bindparam, func, insert, or_, select, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from uep_common.contract.events import Event
from uep_common.runtime.background import BackgroundLoop
from uep_common.runtime.messaging import publish
from uep_common.runtime.outbox_retention import DEFAULT_RETAIN_S, OutboxRetentionSettings, prune_published
from uep_common.runtime.telemetry import current_trace_headers
from uep_common.tables.models import OutboxMessage

log = logging.getLogger(__name__)


def add_to_outbox(
    session: AsyncSession, event: Event, trace_headers: dict[str, str] | None = None, claim_until: datetime | None = None
) -> OutboxMessage:
    """Stage ``event`` in the outbox within the caller's transaction.

    ``trace_headers`` (W3C ``traceparent``/``tracestate``) default to the current span's, so the relay
    publishes the event as part of the same trace. ``claim_until``: the caller publishes the row itself
    after its commit (:meth:`OutboxRelay.publish_claimed`); relays take it over only after this time.
    """
    headers = trace_headers if trace_headers is not None else current_trace_headers()
    row = OutboxMessage(**_row_values(event, headers, claim_until))
    session.add(row)
    return row


def _row_values(event: Event, trace_headers: dict[str, str], claim_until: datetime | None) -> dict[str, Any]:
    """The ``outbox`` columns of ``event`` (its uep headers plus ``trace_headers``)."""
    return {
        "claimed_until": claim_until,
        "event_id": event.event_id,
        "event_type": type(event).__name__,
        "topic": event.topic,
        "key": event.key(),
        "payload": event.model_dump(mode="json"),
        "headers": {**event.headers(), **trace_headers},
    }


@dataclass(frozen=True)
class StagedMessage:
    """An outbox row staged by :func:`stage_in_outbox`: what :meth:`OutboxRelay.publish_claimed` publishes."""

    id: int
    topic: str
    key: bytes
    payload: dict[str, Any]
    headers: dict[str, Any]


_OUTBOX = cast(Table, OutboxMessage.__table__)
_INSERT_OUTBOX = insert(_OUTBOX).returning(_OUTBOX.c.id, sort_by_parameter_order=True)
"""Staged rows go in as an executemany: their JSON payloads are dumped once each. (Column arrays,
:mod:`uep_common.tables.bulk`, would send them as a text ``jsonb[]`` literal, which psycopg escapes element by element
with a regular expression: that cost the scheduler more than the statement conversion it saves.)"""
_MARK_PUBLISHED = (
    update(_OUTBOX)
    .where(_OUTBOX.c.id == any_(bindparam("ids", type_=ARRAY(BigInteger))), _OUTBOX.c.published_at.is_(None))
    .values(published_at=bindparam("now"), attempts=_OUTBOX.c.attempts + 1)
)
"""Stamp ``published_at`` on the rows ``ids`` (one array parameter: the same statement for any number of rows)."""


async def stage_in_outbox(
    session: AsyncSession, events: Sequence[tuple[Event, dict[str, str]]], claim_until: datetime | None = None
) -> list[StagedMessage]:
    """Stage many events in the outbox within the caller's transaction, in one executemany INSERT (one cached
    statement for any number of rows; :func:`add_to_outbox` adds one ORM object per event). ``events`` are
    ``(event, trace_headers)``; ``claim_until`` as in :func:`add_to_outbox`. Returns the rows in ``events``
    order, with their ids."""
    if not events:
        return []
    rows = [_row_values(event, trace_headers, claim_until) for event, trace_headers in events]
    ids = (await session.execute(_INSERT_OUTBOX, rows)).scalars().all()
    return [
        StagedMessage(row_id, row["topic"], row["key"], row["payload"], row["headers"])
        for row_id, row in zip(ids, rows, strict=True)
    ]


class OutboxRelay:
    """Publishes unpublished outbox rows; woken by :meth:`kick` after a commit, and polls as a backstop.

    Args:
        sessionmaker: async session factory of the system-of-record database.
        broker: a started FastStream Kafka broker.
        poll_interval_s: seconds between backstop polls (rows left by a crashed writer or relay, claims that
            expired); writers kick the relay after each commit, so the poll is only the safety net.
        batch_size: rows per transaction.
        retain_s: published rows older than this are deleted (:mod:`uep_common.runtime.outbox_retention`); None keeps them.
        prune_interval_s: seconds between pruning rounds.
    """

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        broker: KafkaBroker,
        poll_interval_s: float = 2.0,
        batch_size: int = 500,
        retain_s: float | None = DEFAULT_RETAIN_S,
        prune_interval_s: float = 30.0,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._broker = broker
        self._batch = batch_size
        self._loop = BackgroundLoop("outbox-relay", self._drain, poll_interval_s)
        self._retain_s = retain_s
        self._prune_interval_s = prune_interval_s
        self._next_prune = time.monotonic() + prune_interval_s
        self.published = 0
        self.pruned = 0

    @classmethod
    def from_settings(
        cls, sessionmaker: async_sessionmaker[AsyncSession], broker: KafkaBroker, settings: OutboxRetentionSettings
    ) -> OutboxRelay:
        """The relay of a service, with the backstop poll and retention of its settings
        (``UEP_OUTBOX_POLL_INTERVAL_S``, ``UEP_OUTBOX_RETAIN_S``, ``UEP_OUTBOX_PRUNE_INTERVAL_S``) and the other
        defaults."""
        return cls(
            sessionmaker,
            broker,
            poll_interval_s=settings.outbox_poll_interval_s,
            retain_s=settings.outbox_retain_s,
            prune_interval_s=settings.outbox_prune_interval_s,
        )

    def kick(self) -> None:
        """Ask the relay to run now (call after committing outbox rows)."""
        self._loop.wake()

    def start(self) -> None:
        """Start the background loop on the running event loop."""
        self._loop.start()

    async def stop(self) -> None:
        """Stop the loop (rows not yet published stay in the table for the next relay)."""
        await self._loop.stop()

    async def _drain(self) -> None:
        while await self.relay_once() == self._batch:
            pass
        if self._retain_s is not None and time.monotonic() >= self._next_prune:
            self._next_prune = time.monotonic() + self._prune_interval_s
            await self.prune_once()

    async def prune_once(self) -> int:
        """Delete published rows past their retention, one batch per transaction until none is left; returns
        how many were deleted."""
        if self._retain_s is None:
            return 0
        deleted = 0
        while True:
            async with self._sessionmaker() as session, session.begin():
                n = await prune_published(session, self._retain_s)
            deleted += n
            if n < 5000:
                break
        self.pruned += deleted
        return deleted

    async def relay_once(self) -> int:
        """Publish one batch of unpublished rows; returns how many were published."""
        async with self._sessionmaker() as session, session.begin():
            rows = (
                await session.scalars(
                    select(OutboxMessage)
                    .where(
                        OutboxMessage.published_at.is_(None),
                        or_(OutboxMessage.claimed_until.is_(None), OutboxMessage.claimed_until < func.now()),
                    )
                    .order_by(OutboxMessage.id)
                    .limit(self._batch)
                    .with_for_update(skip_locked=True)
                )
            ).all()
            if not rows:
                return 0
            results = await asyncio.gather(*(self._publish(r) for r in rows), return_exceptions=True)
            now = datetime.now(UTC)
            ok = 0
            for row, result in zip(rows, results, strict=True):
                row.attempts += 1
                if isinstance(result, BaseException):
                    row.last_error = repr(result)[:2000]
                else:
                    row.published_at = now
                    ok += 1
        self.published += ok
        return ok

    async def publish_claimed(self, rows: Sequence[OutboxMessage | StagedMessage]) -> int:
        """Publish committed rows that this process staged with a claim (``claim_until`` of :func:`add_to_outbox`
        or :func:`stage_in_outbox`)
        at once, without the relay's SELECT, then stamp ``published_at`` on those acknowledged. A row that
        failed loses its claim (its error recorded) and the relay is kicked to retry it; if this process
        dies first, relays take the rows over when the claim expires. Returns how many were published."""
        if not rows:
            return 0
        results = await asyncio.gather(*(self._publish(r) for r in rows), return_exceptions=True)
        now = datetime.now(UTC)
        ok = [r.id for r, res in zip(rows, results, strict=True) if not isinstance(res, BaseException)]
        failed = [(r.id, repr(res)[:2000]) for r, res in zip(rows, results, strict=True) if isinstance(res, BaseException)]
        async with self._sessionmaker() as session, session.begin():
            if ok:
                await session.execute(_MARK_PUBLISHED, {"ids": ok, "now": now})
            for row_id, error in failed:
                await session.execute(
                    update(OutboxMessage)
                    .where(OutboxMessage.id == row_id)
                    .values(claimed_until=None, last_error=error, attempts=OutboxMessage.attempts + 1)
                )
        if failed:
            log.warning("%d claimed outbox rows failed to publish; left to the relay: %s", len(failed), failed[0][1][:200])
            self.kick()
        self.published += len(ok)
        return len(ok)

    async def _publish(self, row: OutboxMessage | StagedMessage) -> None:
        # the row's stored trace headers go out as they are (TraceContextMiddleware keeps a traceparent it is given),
        # so the record continues the trace of the transaction that staged it
        await publish(self._broker, row.payload, topic=row.topic, key=row.key, headers=dict(row.headers))
