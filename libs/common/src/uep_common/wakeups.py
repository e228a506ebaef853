"""PostgreSQL NOTIFY wake-ups: the gateway tells the scheduler "an evaluation is waiting" in the transaction
that creates it, so admission does not wait for the EvaluationRequested round trip through Kafka.

``NOTIFY`` is transactional: PostgreSQL delivers it only when the transaction commits, so a scheduler never
hears of an evaluation it cannot read. The wake-up is an optimisation, never the record: the
EvaluationRequested event (the public contract) and the scheduler's reconcile pass (which admits pending
evaluations whose event was lost) still admit everything, and admission is idempotent (pending → running
once), so an evaluation admitted on the wake-up ignores its event later. Every scheduler replica listens;
their allocation passes are serialised by the allocation advisory lock.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.background import BackgroundLoop

log = logging.getLogger(__name__)

EVALUATIONS_CHANNEL = "uep_evaluations_waiting"
"""Channel name; the payload is one evaluation id (text)."""


async def notify_waiting(session: AsyncSession, evaluation_ids: Iterable[uuid.UUID]) -> None:
    """Queue one notification per id in the caller's transaction (sent on commit, dropped on rollback)."""
    for evaluation_id in evaluation_ids:
        await session.execute(text("SELECT pg_notify(:ch, :id)"), {"ch": EVALUATIONS_CHANNEL, "id": str(evaluation_id)})


def _libpq_url(database_url: str) -> str:
    """``postgresql+psycopg://…`` (SQLAlchemy) → ``postgresql://…`` (psycopg), password kept."""
    return make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)


class WaitingListener:
    """Listens on :data:`EVALUATIONS_CHANNEL` on its own connection and calls ``on_waiting(id)`` for each
    notification (one at a time, in arrival order). A lost connection is reopened after ``retry_s``; what
    was notified meanwhile is admitted by the reconcile pass.

    Args:
        database_url: SQLAlchemy URL of the system-of-record database.
        on_waiting: coroutine function taking the evaluation id; its exceptions are logged, not raised.
        retry_s: seconds before reconnecting.
    """

    def __init__(self, database_url: str, on_waiting: Callable[[uuid.UUID], Awaitable[object]], retry_s: float = 1.0) -> None:
        self._url = _libpq_url(database_url)
        self._on_waiting = on_waiting
        self._loop = BackgroundLoop("evaluations-waiting-listener", self._listen, retry_s)
        self.received = 0

    async def _listen(self) -> None:
        import psycopg

        async with await psycopg.AsyncConnection.connect(self._url, autocommit=True) as conn:
            await conn.execute(f"LISTEN {EVALUATIONS_CHANNEL}")
            async for note in conn.notifies():
                self.received += 1
                try:
                    evaluation_id = uuid.UUID(note.payload)
                except ValueError:
                    log.warning("ignoring a notification with payload %r on %s", note.payload[:100], EVALUATIONS_CHANNEL)
                    continue
                try:
                    await self._on_waiting(evaluation_id)
                except Exception:
                    log.exception("admitting %s on its wake-up failed", evaluation_id)

    def start(self) -> None:
        """Start listening on the running event loop."""
        self._loop.start()

    async def stop(self) -> None:
        """Stop listening (closes the connection)."""
        await self._loop.stop()
