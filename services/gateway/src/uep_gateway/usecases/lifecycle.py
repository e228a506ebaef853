"""Ending and re-running an evaluation at its tenant's request: cancel, stop, retry.

Each takes the tenant-scoped session, locks the caller's tenant's evaluation (``not_found`` naming
``path.evaluation_id`` when it is unknown or another tenant's), applies the transition through
:mod:`uep_common.records.lifecycle` / :mod:`uep_common.records.reruns` and commits; a status that refuses the
transition is ``conflict`` with the transition's own ``type`` (``not_cancellable``, ``not_stoppable``,
``not_retryable``, ``nothing_to_retry``). The caller then wakes the outbox relay.
"""

from __future__ import annotations

import contextlib
import uuid

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.analytics.summary import compute_summary
from uep_common.contract.events import EvaluationStatus
from uep_common.records import lifecycle
from uep_common.records.reruns import RetryOutcome, retry_evaluation
from uep_common.runtime.progress import write_progress
from uep_common.tables.lifecycle import LifecycleConflict
from uep_gateway.errors import FieldError
from uep_gateway.usecases.evaluations import owned_evaluation

LOC = ("path", "evaluation_id")


async def cancel(session: AsyncSession, evaluation_id: uuid.UUID) -> None:
    """Cancel a pending or running evaluation (ends ``cancelled``, no summary) and commit."""
    ev = await owned_evaluation(session, evaluation_id, lock=True)
    try:
        await lifecycle.end(session, ev, lifecycle.Transition.cancel, EvaluationStatus.cancelled, "cancelled by request", None)
    except lifecycle.IllegalTransition as exc:
        raise FieldError("conflict", LOC, str(exc), exc.kind) from exc
    await session.commit()


async def stop(session: AsyncSession, evaluation_id: uuid.UUID) -> None:
    """Stop a pending, running or interrupted evaluation (ends ``stopped`` with its partial summary) and
    commit."""
    ev = await owned_evaluation(session, evaluation_id, lock=True)
    try:
        lifecycle.check(ev.status, lifecycle.Transition.stop)
        summary = await compute_summary(session, ev.id)
        await lifecycle.end(session, ev, lifecycle.Transition.stop, EvaluationStatus.stopped, "stopped by request", summary)
    except lifecycle.IllegalTransition as exc:
        raise FieldError("conflict", LOC, str(exc), exc.kind) from exc
    await session.commit()


async def mirror_progress(redis: Redis, evaluation_id: uuid.UUID, completed: int, errors: int, total: int) -> None:
    """Overwrite the live progress in Redis after counters went down (retry/redrive moved rows aside). Redis
    is a cache and PostgreSQL holds the truth: a Redis failure is ignored."""
    with contextlib.suppress(Exception):
        await write_progress(redis, evaluation_id, completed, errors, total)


async def retry(session: AsyncSession, redis: Redis, evaluation_id: uuid.UUID) -> RetryOutcome:
    """Re-open the failed and unfinished items of an evaluation (:func:`uep_common.records.reruns.retry_evaluation`),
    commit, and write its recounted progress to Redis. Returns what was re-opened."""
    ev = await owned_evaluation(session, evaluation_id, lock=True)
    try:
        outcome = await retry_evaluation(session, evaluation_id)
    except LookupError:  # the row is locked above, in this transaction: it cannot have gone
        raise FieldError("not_found", LOC, f"unknown evaluation {evaluation_id}", "unknown_evaluation") from None
    except LifecycleConflict as exc:
        raise FieldError("conflict", LOC, str(exc), exc.kind) from exc
    counts = (ev.completed_items, ev.error_items, ev.total_items)
    await session.commit()
    await mirror_progress(redis, evaluation_id, *counts)
    return outcome
