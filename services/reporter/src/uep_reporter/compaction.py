"""Compaction of ended evaluations: the leases and spend-ledger rows nothing reads any more go, in bounded batches.

An evaluation is a **candidate** when its status is terminal (:data:`uep_common.records.lifecycle.TERMINAL`), it ended
(``completed_at``) more than ``grace_s`` seconds ago (``UEP_COMPACTION_GRACE_S``, 600), and compaction has not
finished with it since it ended (``details_compacted_at`` NULL or before ``completed_at``: an evaluation that a
retry or a redrive re-opened and that ended again is a candidate again).

**Leases deleted**: those of items with a stored result without an error, last touched (``released_at``, else
``leased_at``) more than ``grace_s`` ago. Nothing reads such a lease after the evaluation ended:

* a retry (:func:`uep_common.records.reruns.retry_evaluation`) re-runs only items with an error result (moved
  aside) or with none: its lease update skips items with a result, and items never leased are dispatched by the
  scheduler's cursor (``dispatched_items``), not from a lease;
* a dead-letter redrive (:func:`uep_common.records.reruns.reopen_item`) changes nothing for an item with a result
  without an error;
* the scheduler reads leases of running evaluations (allocation, reconcile, the orphan sweep — an orphan is a
  released lease *without* a stored result), parked leases of items without a result (exhaustion), and counts an
  ended evaluation's open leases only until they expire (a parked one never would: deleting it frees its slot);
* outbox retention (:mod:`uep_common.runtime.outbox_retention`) keeps the dispatch row of an open lease only;
* reports, analysis, budgets, leaderboards and retention read results and the ledger, not leases.

**Leases kept**:

* of items with an error result: a retry or a redrive runs them again from their lease (``attempt`` and
  ``attempt_base``, from which ``UEP_MAX_LEASE_ATTEMPTS`` counts), and their lease lets their next settlement
  through the ledger's late-settle trigger (:mod:`uep_common.records.ledger_compaction`);
* of items with no result (in flight when the evaluation was cancelled, stopped, failed or ran out of budget, or
  lost): a retry sets them expired to dispatch them again, the exhaustion pass needs them parked, and the orphan
  sweep of a retried evaluation needs them released;
* of items released or leased less than ``grace_s`` ago: the scheduler releases a lease and settles its score in
  one transaction, and after a restart it releases expired leases of stored items before it reads its backlog of
  scores, so a recent release may still have a settlement coming;
* every lease of an evaluation that has not ended (pending, running, interrupted) or ended less than ``grace_s``
  ago.

**Ledger**: in the same transactions, :func:`uep_common.records.ledger_compaction.fold` replaces the evaluation's
reserve and charge rows and the settle rows of items whose lease is gone by aggregate rows with the same sums
(its docstring says what every reader sums and why a late score does not settle twice).

**Batches and replicas**: one transaction per evaluation and batch: the evaluation row ``FOR NO KEY UPDATE SKIP
LOCKED`` with its status and end checked again (a retry that commits first wins; one compactor per
evaluation), its budget account ``FOR UPDATE SKIP LOCKED`` (closed for late settlements), at most
``batch_size`` leases deleted (``FOR UPDATE SKIP LOCKED``) and at most ``batch_size`` ledger rows folded. When
both stay under ``batch_size`` and no lease of an item with a result without an error is left,
``details_compacted_at`` is set. A round runs at most ``max_batches`` transactions; what is left waits for the
next round. Replicas skip what another holds; nothing waits on a lock. A second round over compacted
evaluations finds no candidate and changes nothing.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from uep_common.records import ledger_compaction
from uep_common.records.lifecycle import TERMINAL
from uep_common.runtime.background import BackgroundLoop

if TYPE_CHECKING:
    from uep_reporter.settings import ReporterSettings

log = logging.getLogger(__name__)

_TERMINAL_SQL = ", ".join(f"'{s}'" for s in TERMINAL)
_CUTOFF = "now() - make_interval(secs => :grace)"

_CANDIDATES = text(
    f"""
    SELECT id FROM evaluations
     WHERE status IN ({_TERMINAL_SQL}) AND completed_at < {_CUTOFF}
       AND (details_compacted_at IS NULL OR details_compacted_at < completed_at)
     ORDER BY completed_at, id
     LIMIT :limit
    """
)
_LOCK_EVALUATION = text(
    f"""
    SELECT status IN ({_TERMINAL_SQL}) AND completed_at < {_CUTOFF}
           AND (details_compacted_at IS NULL OR details_compacted_at < completed_at)
      FROM evaluations WHERE id = :e
       FOR NO KEY UPDATE SKIP LOCKED
    """
)
_RESULT_WITHOUT_ERROR = """EXISTS (SELECT 1 FROM sample_results r
                 WHERE r.evaluation_id = l.evaluation_id AND r.sample_id = l.sample_id AND r.repeat = l.repeat
                   AND r.arm = l.arm AND r.error IS NULL)"""
_DELETE_LEASES = text(
    f"""
    DELETE FROM sample_leases WHERE id IN (
      SELECT l.id FROM sample_leases l
       WHERE l.evaluation_id = :e AND coalesce(l.released_at, l.leased_at) < {_CUTOFF}
         AND {_RESULT_WITHOUT_ERROR}
       LIMIT :limit
       FOR UPDATE OF l SKIP LOCKED)
    """
)
_LEASES_LEFT = text(f"SELECT EXISTS (SELECT 1 FROM sample_leases l WHERE l.evaluation_id = :e AND {_RESULT_WITHOUT_ERROR})")
_FINISH = text("UPDATE evaluations SET details_compacted_at = now() WHERE id = :e")


@dataclass(frozen=True)
class Batch:
    """What one transaction did for one evaluation: ``leases`` deleted, ledger rows as written ``folded``, and
    whether compaction is ``finished`` with it (``details_compacted_at`` set)."""

    leases: int
    folded: int
    finished: bool


def _check(grace_s: float, batch_size: int) -> None:
    if grace_s < 0 or batch_size < 1:
        raise ValueError(f"grace_s must be >= 0 and batch_size >= 1, got {grace_s} and {batch_size}")


async def candidates(session: AsyncSession, grace_s: float, limit: int = 100) -> list[uuid.UUID]:
    """Ids of at most ``limit`` candidate evaluations (module docstring), those that ended first first."""
    rows = await session.scalars(_CANDIDATES, {"grace": float(grace_s), "limit": int(limit)})
    return list(rows)


async def compact_batch(session: AsyncSession, evaluation_id: uuid.UUID, grace_s: float, batch_size: int) -> Batch | None:
    """One batch of one evaluation's compaction, in the caller's transaction (module docstring).

    Returns None when the evaluation or its budget account is locked by another transaction, or the evaluation
    is not (any more) a candidate; else what was done. Raises ValueError for a negative ``grace_s`` or a
    ``batch_size`` below 1."""
    _check(grace_s, batch_size)
    params = {"e": evaluation_id, "grace": float(grace_s)}
    if not await session.scalar(_LOCK_EVALUATION, params):
        return None
    if not await ledger_compaction.close_settlement(session, evaluation_id):
        return None
    deleted = await session.execute(_DELETE_LEASES, {**params, "limit": int(batch_size)})
    leases = int(getattr(deleted, "rowcount", 0) or 0)
    folded = await ledger_compaction.fold(session, evaluation_id, batch_size)
    finished = leases < batch_size and folded < batch_size and not await session.scalar(_LEASES_LEFT, params)
    if finished:
        await session.execute(_FINISH, params)
    return Batch(leases, folded, finished)


async def run_round(
    sessionmaker: async_sessionmaker[AsyncSession],
    grace_s: float,
    batch_size: int = 2000,
    max_batches: int = 50,
    max_evaluations: int = 100,
) -> dict[str, Any]:
    """One compaction round over the candidates, at most ``max_batches`` transactions in all.

    Args:
        sessionmaker: async session factory on the uep database (connecting as the tables' owner).
        grace_s: seconds after an evaluation's end, and after a lease's release, before compaction takes them.
        batch_size: leases deleted and ledger rows folded per transaction, each at most this many.
        max_batches: transactions per round (the rest waits for the next round).
        max_evaluations: candidates looked at per round.

    Returns:
        ``{"evaluations": candidates looked at, "finished": evaluations finished, "skipped": evaluations another
        transaction held, "batches": transactions run, "leases": deleted, "ledger_rows": folded}``.

    Raises:
        ValueError: a negative ``grace_s`` or a batch size, batch count or evaluation count below 1.
    """
    _check(grace_s, batch_size)
    if max_batches < 1 or max_evaluations < 1:
        raise ValueError(f"max_batches and max_evaluations must be >= 1, got {max_batches} and {max_evaluations}")
    async with sessionmaker() as session:
        todo = await candidates(session, grace_s, max_evaluations)
    out = {"evaluations": len(todo), "finished": 0, "skipped": 0, "batches": 0, "leases": 0, "ledger_rows": 0}
    for evaluation_id in todo:
        while out["batches"] < max_batches:
            async with sessionmaker() as session, session.begin():
                batch = await compact_batch(session, evaluation_id, grace_s, batch_size)
            out["batches"] += 1
            if batch is None:
                out["skipped"] += 1
                break
            out["leases"] += batch.leases
            out["ledger_rows"] += batch.folded
            if batch.finished:
                out["finished"] += 1
                break
            if batch.leases < batch_size and batch.folded < batch_size:
                break  # a lease too recent to go yet: the next round looks again
        if out["batches"] >= max_batches:
            break
    if out["leases"] or out["ledger_rows"]:
        log.info("compaction: %s", out)
    return out


class CompactionWorker:
    """The reporter's periodic compaction: a round every ``compaction_interval_s`` when ``compaction_enabled``
    (settings of :class:`uep_reporter.settings.ReporterSettings`)."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], settings: ReporterSettings) -> None:
        self._sessionmaker = sessionmaker
        self._settings = settings
        self._loop = BackgroundLoop("compaction", self.round_once, settings.compaction_interval_s)

    def start(self) -> None:
        """Start on the running event loop (nothing when compaction is disabled)."""
        if self._settings.compaction_enabled:
            self._loop.start()

    async def stop(self) -> None:
        """Cancel the loop (a batch in progress is rolled back; each is atomic)."""
        await self._loop.stop()

    async def round_once(self) -> dict[str, Any]:
        """One round with the settings' grace period and bounds (:func:`run_round`)."""
        s = self._settings
        return await run_round(self._sessionmaker, s.compaction_grace_s, s.compaction_batch_size, s.compaction_max_batches)
