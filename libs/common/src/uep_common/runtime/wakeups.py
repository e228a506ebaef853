"""PostgreSQL NOTIFY wake-ups: the gateway tells the scheduler "an evaluation is waiting" in the transaction
that creates it, so admission does not wait for the EvaluationRequested round trip through Kafka, and tells
the reporters "a retention run was requested" (:data:`RETENTION_CHANNEL`), so they need no short poll.

``NOTIFY`` is transactional: PostgreSQL delivers it only when the transaction commits, so a scheduler never
hears of an evaluation it cannot read. The wake-up is an optimisation, never the record: the
EvaluationRequested event (the public contract) and the scheduler's reconcile pass (which admits pending
evaluations whose event was lost) still admit everything, and admission is idempotent (pending → running
once), so an evaluation admitted on the wake-up ignores its event later. Every scheduler replica listens;
their allocation passes are serialised by the allocation advisory lock.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.runtime.background import BackgroundLoop

log = logging.getLogger(__name__)

EVALUATIONS_CHANNEL = "uep_evaluations_waiting"
"""Channel name; the payload is one evaluation id (text)."""

RETENTION_CHANNEL = "uep_retention_requested"
"""Channel name; the payload is one ``retention_runs`` id (text); the reporters' retention workers listen."""

DRAIN_S = 0.01
"""How long :func:`notifications` keeps reading once the socket is readable (notifications sent together)."""


async def notify(session: AsyncSession, channel: str, payload: str) -> None:
    """Queue one notification on ``channel`` in the caller's transaction (sent on commit, dropped on rollback)."""
    await session.execute(text("SELECT pg_notify(:ch, :payload)"), {"ch": channel, "payload": payload})


async def notify_waiting(session: AsyncSession, evaluation_ids: Iterable[uuid.UUID]) -> None:
    """Queue one notification per id in the caller's transaction (sent on commit, dropped on rollback)."""
    for evaluation_id in evaluation_ids:
        await notify(session, EVALUATIONS_CHANNEL, str(evaluation_id))


def _libpq_url(database_url: str) -> str:
    """``postgresql+psycopg://…`` (SQLAlchemy) → ``postgresql://…`` (psycopg), password kept."""
    return make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def notifications(conn: Any) -> AsyncIterator[Any]:
    """The notifications of a listening psycopg ``AsyncConnection``, as they arrive, forever.

    psycopg's own ``conn.notifies()`` waits on the socket with a 0.1 s timer it re-arms until data comes (its
    ``_WAIT_INTERVAL``): ten wake-ups a second per idle listener. Here the event loop watches the socket
    (``add_reader``) with no timer, and ``conn.notifies(timeout=DRAIN_S)`` reads only once it is readable; what
    psycopg received during other commands (its backlog) is drained first. A closed connection makes the socket
    readable and ``notifies`` raise ``psycopg.OperationalError``.
    """
    loop = asyncio.get_running_loop()
    while True:
        async for note in conn.notifies(timeout=DRAIN_S):
            yield note
        readable = loop.create_future()
        fd = conn.fileno()
        loop.add_reader(fd, _resolve, readable)
        try:
            await readable
        finally:
            loop.remove_reader(fd)


class ChannelListener:
    """Listens on ``channel`` on its own connection and calls ``on_payload(payload)`` for each notification
    (one at a time, in arrival order), waking only when one arrives (:func:`notifications`). A lost connection
    is reopened after ``retry_s``; whoever listens must also poll as a backstop for what was sent meanwhile.

    Args:
        database_url: SQLAlchemy URL of the system-of-record database.
        channel: the channel name (a plain identifier).
        on_payload: coroutine function taking the payload (text); its exceptions are logged, not raised.
        retry_s: seconds before reconnecting.
    """

    def __init__(
        self, database_url: str, channel: str, on_payload: Callable[[str], Awaitable[object]], retry_s: float = 1.0
    ) -> None:
        if not channel.isidentifier():
            raise ValueError(f"channel {channel!r} is not a plain identifier")
        self._url = _libpq_url(database_url)
        self.channel = channel
        self._on_payload = on_payload
        self._loop = BackgroundLoop(f"listener-{channel}", self._listen, retry_s)
        self.received = 0

    async def _listen(self) -> None:
        import psycopg

        async with await psycopg.AsyncConnection.connect(self._url, autocommit=True) as conn:
            await conn.execute(f"LISTEN {self.channel}")
            async for note in notifications(conn):
                self.received += 1
                try:
                    await self._on_payload(note.payload)
                except Exception:
                    log.exception("handling a notification on %s failed", self.channel)

    def start(self) -> None:
        """Start listening on the running event loop."""
        self._loop.start()

    async def stop(self) -> None:
        """Stop listening (closes the connection)."""
        await self._loop.stop()


class WaitingListener(ChannelListener):
    """Listens on :data:`EVALUATIONS_CHANNEL` and calls ``on_waiting(id)`` for each notification (one at a time,
    in arrival order); a payload that is not a UUID is logged and skipped. What was notified while the
    connection was lost is admitted by the reconcile pass.

    Args:
        database_url: SQLAlchemy URL of the system-of-record database.
        on_waiting: coroutine function taking the evaluation id; its exceptions are logged, not raised.
        retry_s: seconds before reconnecting.
    """

    def __init__(self, database_url: str, on_waiting: Callable[[uuid.UUID], Awaitable[object]], retry_s: float = 1.0) -> None:
        super().__init__(database_url, EVALUATIONS_CHANNEL, self._admit, retry_s)
        self._on_waiting = on_waiting

    async def _admit(self, payload: str) -> None:
        try:
            evaluation_id = uuid.UUID(payload)
        except ValueError:
            log.warning("ignoring a notification with payload %r on %s", payload[:100], EVALUATIONS_CHANNEL)
            return
        try:
            await self._on_waiting(evaluation_id)
        except Exception:
            log.exception("admitting %s on its wake-up failed", evaluation_id)
