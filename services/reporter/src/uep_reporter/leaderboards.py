"""Reporter side of the leaderboards: record each completed evaluation's score and a board snapshot.

:func:`record_completed` runs right after the transaction that completed (or rescored) evaluations commits;
:class:`LeaderboardReconciler` is the backstop that records completed evaluations a crash left unrecorded
(and those completed before leaderboards existed). Recording is idempotent (see
:func:`uep_common.analytics.leaderboards.record_evaluation`), so replicas and retries never write a snapshot twice for
an unchanged score. Every completed evaluation's score is stored, A/B arms' too (so the reconciler never
picks them up again), but only the evaluations :func:`uep_common.analytics.leaderboards.on_board` admits — not an A/B
arm unless it was created as a release run — enter a board and write a snapshot. The ranking itself (one item
set at a time) lives in :mod:`uep_common.analytics.leaderboards` (the gateway reads boards too).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from uep_common.analytics import leaderboards
from uep_common.runtime.background import BackgroundLoop
from uep_common.tables.models import Rescore

log = logging.getLogger(__name__)


async def record_completed(sessionmaker: async_sessionmaker[AsyncSession], evaluation_ids: Iterable[uuid.UUID]) -> int:
    """Record the leaderboard score of each evaluation (one transaction each); returns how many snapshots
    were written. Failures are logged, not raised: the reconciler records what is missing later."""
    written = 0
    for evaluation_id in evaluation_ids:
        try:
            async with sessionmaker() as session, session.begin():
                written += await leaderboards.record_evaluation(session, evaluation_id)
        except Exception:
            log.warning("recording the leaderboard score of %s failed; the reconciler retries", evaluation_id, exc_info=True)
    return written


async def record_rescored(sessionmaker: async_sessionmaker[AsyncSession], rescore_ids: Iterable[uuid.UUID]) -> int:
    """Refresh the leaderboard score of the evaluations of completed rescores (their summaries changed)."""
    ids = list(rescore_ids)
    if not ids:
        return 0
    async with sessionmaker() as session:
        evaluation_ids = (await session.scalars(select(Rescore.evaluation_id).where(Rescore.id.in_(ids)))).all()
    return await record_completed(sessionmaker, sorted(set(evaluation_ids)))


async def reconcile_once(sessionmaker: async_sessionmaker[AsyncSession], limit: int = 100) -> int:
    """Record up to ``limit`` completed evaluations that have no leaderboard score; returns how many."""
    async with sessionmaker() as session:
        missing = await leaderboards.unrecorded_evaluations(session, limit)
    await record_completed(sessionmaker, missing)
    return len(missing)


class LeaderboardReconciler:
    """Background loop: every ``interval_s`` seconds, :func:`reconcile_once`."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], interval_s: float) -> None:
        self._sessionmaker = sessionmaker
        self._loop = BackgroundLoop("leaderboard-reconciler", self._drain, interval_s)

    def start(self) -> None:
        """Start on the running event loop."""
        self._loop.start()

    async def stop(self) -> None:
        """Cancel the loop."""
        await self._loop.stop()

    async def _drain(self) -> None:
        while await reconcile_once(self._sessionmaker) == 100:
            pass
