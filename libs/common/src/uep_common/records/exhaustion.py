"""The end of an evaluation whose budget ran out: a cap let no item through with none in flight
(:func:`uep_common.records.budget.reserve_for_dispatch` recorded why and shrank ``total_items``). The scheduler
ends it here once every kept item is stored (:func:`finish_exhausted`, after its allocation pass, and from its
reconcile with :func:`exhausted_and_done`); the reporter asks :func:`exhausted_reason` when it stores the last
result."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from sqlalchemy import select

from uep_common.analytics.summary import compute_summary
from uep_common.contract.events import EvaluationStatus
from uep_common.records import lifecycle
from uep_common.tables.budgets import BudgetAccount
from uep_common.tables.lifecycle import lock_evaluation
from uep_common.tables.models import Evaluation

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy.ext.asyncio import AsyncSession


async def finish_exhausted(session: AsyncSession, evaluation_id: uuid.UUID) -> bool:
    """End a running evaluation ``budget_exhausted`` when its budget account records an exhaustion and every
    item it kept is stored (``completed_items >= total_items``): partial summary, EvaluationCompleted in the
    outbox (``finish`` in :mod:`uep_common.records.lifecycle`). Locks the evaluation row; run it in its own
    transaction after the allocation pass that exhausted the budget has committed, and from the scheduler's
    reconcile (:func:`exhausted_and_done`) for one whose ending a crash cut short.

    Returns:
        Whether it ended the evaluation (False: not running, not exhausted, or items still in flight).
    """
    ev = await lock_evaluation(session, evaluation_id)
    if ev is None or ev.status != EvaluationStatus.running:
        return False
    reason = await exhausted_reason(session, ev.id)
    if reason is None or ev.completed_items < ev.total_items:
        return False
    await _finish_exhausted(session, ev, reason)
    return True


async def exhausted_and_done(session: AsyncSession, limit: int = 100) -> list[uuid.UUID]:
    """Ids of up to ``limit`` running evaluations that :func:`finish_exhausted` would end now (an exhausted
    budget and every kept item stored), for the scheduler's reconcile pass."""
    rows = await session.scalars(
        select(Evaluation.id)
        .join(BudgetAccount, BudgetAccount.evaluation_id == Evaluation.id)
        .where(
            Evaluation.status == EvaluationStatus.running,
            BudgetAccount.exhausted_reason.is_not(None),
            Evaluation.completed_items >= Evaluation.total_items,
        )
        .limit(limit)
    )
    return list(rows)


async def _finish_exhausted(session: AsyncSession, ev: Evaluation, reason: str) -> None:
    """End ``ev`` (locked) as budget_exhausted now (``finish`` in :mod:`uep_common.records.lifecycle`): partial summary,
    EvaluationCompleted in the outbox."""
    summary = await compute_summary(session, ev.id)
    await lifecycle.end(session, ev, lifecycle.Transition.finish, EvaluationStatus.budget_exhausted, reason, summary)


async def exhausted_reason(session: AsyncSession, evaluation_id: uuid.UUID) -> str | None:
    """Why a cap stopped the evaluation's dispatch, or None (the reporter ends it ``budget_exhausted`` then)."""
    return await session.scalar(select(BudgetAccount.exhausted_reason).where(BudgetAccount.evaluation_id == evaluation_id))
