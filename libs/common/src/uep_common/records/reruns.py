"""Reruns: the item-level work of a retry and of a dead-letter redrive, on the lifecycle tables
(:mod:`uep_common.tables.lifecycle`) and through the transition table (:mod:`uep_common.records.lifecycle`).

Each function runs inside the caller's transaction and locks the evaluation row first (``SELECT … FOR UPDATE``,
the lock every writer of an evaluation takes), so it is serialised with the reporter storing results and the
scheduler leasing items.

Retry (``POST /v1/evaluations/{id}/retry``) re-runs only what did not finish:
  * stored results with an error are moved to ``retired_results`` (kept, with the retry id and reason),
  * their leases, and the open leases of items with no result, are set expired (``lease_expires_at`` in
    the past, ``attempt_base = attempt``), so the scheduler dispatches them again with ``attempt + 1``;
    items never leased are dispatched by the scheduler's cursor as before,
  * counters are recounted from the stored rows and the evaluation is ``running`` again.
Results without an error are never touched: same row ids, same ``score_event_id``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.records import lifecycle
from uep_common.tables.budgets import BudgetAccount
from uep_common.tables.lifecycle import LifecycleConflict, lock_evaluation, recount
from uep_common.tables.models import Evaluation

if TYPE_CHECKING:
    from sqlalchemy.engine import CursorResult


_RETIRE_SQL = """
WITH moved AS (
    DELETE FROM sample_results r
    WHERE r.evaluation_id = :e AND r.error IS NOT NULL {extra}
    RETURNING r.*
)
INSERT INTO retired_results (result_id, evaluation_id, sample_id, repeat, arm, output, extracted, is_correct, score,
    metric_name, metric_version, metrics, latency_ms, prompt_tokens, completion_tokens, error, attempt,
    score_event_id, scored_at, reason, retry_id)
SELECT id, evaluation_id, sample_id, repeat, arm, output, extracted, is_correct, score, metric_name, metric_version,
    metrics, latency_ms, prompt_tokens, completion_tokens, error, attempt, score_event_id, created_at, :reason, :rid
FROM moved
RETURNING sample_id, repeat, arm
"""

_EXPIRE_UNFINISHED_SQL = """
UPDATE sample_leases l
SET state = 'leased', lease_expires_at = {expiry}, final_deadline = NULL, attempt_base = l.attempt,
    released_at = NULL
WHERE l.evaluation_id = :e {extra}
  AND NOT EXISTS (SELECT 1 FROM sample_results r WHERE r.evaluation_id = l.evaluation_id
                  AND r.sample_id = l.sample_id AND r.repeat = l.repeat AND r.arm = l.arm)
"""


@dataclass(frozen=True)
class RetryOutcome:
    """What a retry re-opened: ``failed`` error results moved aside, ``unfinished`` leased items with no
    result set to be dispatched again, ``undispatched`` items the scheduler has not leased yet."""

    retry_id: uuid.UUID
    previous_status: str
    failed: int
    unfinished: int
    undispatched: int


async def retry_evaluation(session: AsyncSession, evaluation_id: uuid.UUID) -> RetryOutcome:
    """Re-run the failed and unfinished items of an ended or interrupted evaluation (see the module docstring).

    Raises:
        LookupError: unknown evaluation.
        LifecycleConflict: the status is not in :data:`uep_common.records.lifecycle.RETRYABLE` (``not_retryable``),
            the details were cleaned (``details_cleaned``), or nothing is left to re-run (``nothing_to_retry``:
            every item has a result without an error).
    """
    ev = await lock_evaluation(session, evaluation_id)
    if ev is None:
        raise LookupError(evaluation_id)
    lifecycle.check(ev.status, lifecycle.Transition.retry)
    if ev.details_cleaned_at is not None:
        raise LifecycleConflict(
            "retention cleaned this evaluation's per-item details; its items cannot be told apart any more: "
            "start a new evaluation",
            "details_cleaned",
        )
    if ev.status == lifecycle.S.budget_exhausted:
        # The budget shrank total_items to what it let through; a retry (after a cap was raised) restores
        # the plan, and the budget hook decides again at dispatch.
        planned = await session.scalar(select(BudgetAccount.planned_items).where(BudgetAccount.evaluation_id == ev.id))
        if planned is not None and planned > ev.total_items:
            ev.total_items = planned
    retry_id = uuid.uuid4()
    moved = (await session.execute(text(_RETIRE_SQL.format(extra="")), {"e": ev.id, "reason": "retry", "rid": retry_id})).all()
    expired = await session.execute(
        text(_EXPIRE_UNFINISHED_SQL.format(expiry="now() - interval '1 second'", extra="")), {"e": ev.id}
    )
    unfinished = cast("CursorResult[Any]", expired).rowcount
    undispatched = ev.total_items - ev.dispatched_items
    if not moved and not unfinished and undispatched <= 0:
        raise LifecycleConflict("every item has a result without an error: nothing to retry", "nothing_to_retry")
    previous = ev.status
    await recount(session, ev)
    lifecycle.resume(ev, lifecycle.Transition.retry)
    return RetryOutcome(retry_id, previous, len(moved), max(0, unfinished - len(moved)), max(0, undispatched))


async def reopen_item(
    session: AsyncSession, ev: Evaluation, sample_id: uuid.UUID, repeat: int, arm: str, lease_expires_at: datetime
) -> bool:
    """Re-open one item for a redrive: its stored error result (if any) is moved aside, its lease is set
    ``leased`` until ``lease_expires_at`` (the redriven message is in flight; if that is lost too, the lease
    expires and the scheduler dispatches the item again), and an ended evaluation is ``running`` again.

    ``ev`` must be locked by the caller. Returns False (and changes nothing) when the item has a result
    without an error — it is finished and is never run again.
    """
    params = {"e": ev.id, "s": sample_id, "rp": repeat, "a": arm}
    finished = await session.scalar(
        text(
            "SELECT count(*) FROM sample_results WHERE evaluation_id = :e AND sample_id = :s AND repeat = :rp "
            "AND arm = :a AND error IS NULL"
        ),
        params,
    )
    if finished:
        return False
    extra = "AND r.sample_id = :s AND r.repeat = :rp AND r.arm = :a"
    await session.execute(text(_RETIRE_SQL.format(extra=extra)), {**params, "reason": "redrive", "rid": uuid.uuid4()})
    await session.execute(
        text(_EXPIRE_UNFINISHED_SQL.format(expiry=":exp", extra="AND l.sample_id = :s AND l.repeat = :rp AND l.arm = :a")),
        {**params, "exp": lease_expires_at},
    )
    await recount(session, ev)
    if lifecycle.allowed(ev.status, lifecycle.Transition.reopen):  # pending and running ones stay as they are
        lifecycle.resume(ev, lifecycle.Transition.reopen)
    return True
