"""Reporter side of retention: the periodic cleanup and the runs requested through the gateway.

A reporter replica runs :class:`RetentionWorker`: every ``retention_interval_s`` (first after
``retention_initial_delay_s``) a periodic run, and it claims each run requested by ``POST /v1/retention/run``
(a ``retention_runs`` row in status 'requested', claimed ``FOR UPDATE SKIP LOCKED`` so exactly one replica
executes it) as soon as the gateway's NOTIFY on :data:`uep_common.runtime.wakeups.RETENTION_CHANNEL` arrives, and every
``retention_poll_s`` as a backstop. The reporter executes them because it owns the artifact files.
What a run keeps and deletes is defined in :mod:`uep_reporter.retention_policy`.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from uep_common.runtime.artifacts import ArtifactStore, artifact_store
from uep_common.runtime.background import BackgroundLoop
from uep_common.runtime.wakeups import RETENTION_CHANNEL, ChannelListener
from uep_common.tables.leaderboards import RetentionRun
from uep_reporter import retention_policy

log = logging.getLogger(__name__)


async def execute_requested(
    sessionmaker: async_sessionmaker[AsyncSession], default_keep_last: int, artifact_root: Path | ArtifactStore | None
) -> int:
    """Claim and execute every requested run, oldest first; returns how many ran."""
    done = 0
    while True:
        async with sessionmaker() as session, session.begin():
            run = await session.scalar(
                select(RetentionRun)
                .where(RetentionRun.status == "requested")
                .order_by(RetentionRun.requested_at)
                .limit(1)
                .with_for_update(skip_locked=True)
            )
            if run is None:
                return done
            run.status, run.started_at = "running", func.now()
            run_id, dry_run, keep_last, scope = run.id, run.dry_run, run.keep_last or default_keep_last, run.scope or {}
        try:
            result = await retention_policy.run(
                sessionmaker,
                keep_last,
                dry_run=dry_run,
                artifact_root=artifact_root,
                wait_for_lock=True,
                benchmark=scope.get("benchmark"),
                model=scope.get("model"),
            )
            status, error = result["status"], None
        except Exception as exc:
            log.exception("retention run %s failed", run_id)
            result, status, error = None, "failed", f"{type(exc).__name__}: {exc}"[:2000]
        async with sessionmaker() as session, session.begin():
            run = await session.get(RetentionRun, run_id)
            run.status, run.result, run.error, run.finished_at = status, result, error, func.now()
        done += 1


class RetentionWorker:
    """Background loop of one reporter replica (see the module docstring)."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], settings) -> None:
        self._sessionmaker = sessionmaker
        self._settings = settings
        self._root = artifact_store(settings)
        self._next_periodic = time.monotonic() + settings.retention_initial_delay_s
        self._loop = BackgroundLoop("retention", self._round, settings.retention_poll_s)
        self._listener = ChannelListener(settings.database_url, RETENTION_CHANNEL, self._requested)

    async def _requested(self, _run_id: str) -> None:
        self._loop.wake()

    def start(self) -> None:
        """Start on the running event loop: the loop, and the listener that wakes it when a run is requested."""
        self._loop.start()
        self._listener.start()

    async def stop(self) -> None:
        """Cancel the loop (a run in progress is rolled back evaluation by evaluation; each is atomic)."""
        await self._listener.stop()
        await self._loop.stop()

    async def periodic_once(self) -> dict[str, Any]:
        """One periodic run, recorded in ``retention_runs`` unless another replica held the lock."""
        s = self._settings
        started = time.time()
        result = await retention_policy.run(self._sessionmaker, s.retention_keep_last, artifact_root=self._root)
        if result["status"] != "skipped":
            async with self._sessionmaker() as session, session.begin():
                session.add(
                    RetentionRun(
                        trigger="periodic",
                        dry_run=False,
                        keep_last=s.retention_keep_last,
                        status=result["status"],
                        result=result,
                        started_at=func.to_timestamp(started),
                        finished_at=func.now(),
                    )
                )
        return result

    async def _round(self) -> None:
        s = self._settings
        await execute_requested(self._sessionmaker, s.retention_keep_last, self._root)
        if s.retention_enabled and time.monotonic() >= self._next_periodic:
            self._next_periodic = time.monotonic() + s.retention_interval_s
            await self.periodic_once()
