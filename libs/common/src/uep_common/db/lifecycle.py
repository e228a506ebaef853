"""Tables of the evaluation lifecycle and of faults: retired results, dead-letter records, scheduler instances
(migration 0008); and the item-level work of a retry and a redrive.

Models here use :class:`uep_common.db.base.Base`; :mod:`uep_common.db.tables` puts them on the one metadata
Alembic sees. The functions are used by the gateway (retry, redrive) and by
:mod:`uep_common.lifecycle`, which makes every status change (the transition table); each must run inside
the caller's transaction and locks the evaluation row first (``SELECT … FOR UPDATE``, the lock every writer
of an evaluation takes), so it is serialised with the reporter storing results and the scheduler leasing items.

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

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    Identity,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    func,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from uep_common.db.base import Base
from uep_common.db.budgets import BudgetAccount
from uep_common.db.models import Evaluation

if TYPE_CHECKING:
    from sqlalchemy.engine import CursorResult


class RetiredResult(Base):
    """A stored result moved aside by a retry or a redrive (the item is then run again). Kept forever, so
    every outcome an item ever had can be traced; ``result_id`` is the id the row had in ``sample_results``."""

    __tablename__ = "retired_results"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    result_id: Mapped[int] = mapped_column(BigInteger, nullable=False)
    evaluation_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False, index=True)
    tenant_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), nullable=True, doc="Owner tenant; set from the evaluation by a trigger (row-level security)."
    )
    sample_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    repeat: Mapped[int] = mapped_column(Integer, nullable=False)
    arm: Mapped[str] = mapped_column(String(64), nullable=False)
    output: Mapped[str | None] = mapped_column(Text)
    extracted: Mapped[str | None] = mapped_column(Text)
    is_correct: Mapped[bool | None] = mapped_column(Boolean)
    score: Mapped[float | None] = mapped_column(Float)
    metric_name: Mapped[str | None] = mapped_column(String(100))
    metric_version: Mapped[str | None] = mapped_column(String(20))
    metrics: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    latency_ms: Mapped[float | None] = mapped_column(Float)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True))
    attempt: Mapped[int] = mapped_column(Integer, nullable=False)
    score_event_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    scored_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    reason: Mapped[str] = mapped_column(String(20), nullable=False, doc="'retry' or 'redrive'.")
    retry_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False, index=True)
    retired_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)


class DeadLetter(Base):
    """A message that could not be processed, as consumed from the dead-letter topic ``uep.dead-letter.v1``.

    ``dedupe_key`` makes the consumer idempotent: the ``uep-dlq-id`` header when the producer set one
    (deterministic per failed item), else the SHA-256 of source topic, key and body. ``body``/``key``/
    ``headers`` are the original message (without the ``uep-dlq-*`` headers), re-published by a redrive.
    """

    __tablename__ = "dead_letters"
    __table_args__ = (Index("ix_dead_letters_first_seen", "first_seen_at", "id"),)
    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)
    dedupe_key: Mapped[str] = mapped_column(String(64), unique=True, nullable=False)
    source_topic: Mapped[str] = mapped_column(String(200), nullable=False)
    reason: Mapped[str] = mapped_column(Text, nullable=False)
    event_type: Mapped[str | None] = mapped_column(String(100))
    evaluation_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True), index=True)
    tenant_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), nullable=True, doc="Owner tenant; set from the evaluation by a trigger (row-level security)."
    )
    item_key: Mapped[str | None] = mapped_column(String(200))
    key: Mapped[bytes | None] = mapped_column(LargeBinary)
    body: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    headers: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    first_seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)
    last_seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)
    redrive_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default="0")
    last_redriven_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class SchedulerInstance(Base):
    """A running scheduler replica. It holds the session-level advisory lock ``(LOCK_NAMESPACE, lock_key)``
    on a dedicated connection for its whole life, so PostgreSQL itself says whether it is alive (the lock
    goes when the process or its connection dies, kill -9 included); ``heartbeat_at`` is refreshed every few
    seconds for operators and to drop rows of instances long gone."""

    __tablename__ = "scheduler_instances"
    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)
    lock_key: Mapped[int] = mapped_column(Integer, Identity(always=False), unique=True, nullable=False)
    hostname: Mapped[str] = mapped_column(String(200), nullable=False)
    pid: Mapped[int] = mapped_column(Integer, nullable=False)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)


LOCK_NAMESPACE = 0x55455001
"""First key of the two-key advisory locks of scheduler instances (``(LOCK_NAMESPACE, lock_key)``; key 0 is
the start-up lock under which an instance decides whether to interrupt running evaluations)."""


class LifecycleConflict(Exception):  # noqa: N818 - a public name that callers and tests catch; renaming it breaks them
    """The evaluation's status does not allow the operation (HTTP 409). ``kind`` is machine-readable."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


async def lock_evaluation(session: AsyncSession, evaluation_id: uuid.UUID) -> Evaluation | None:
    """The evaluation row, locked ``FOR UPDATE`` until the transaction ends (None if unknown)."""
    return await session.scalar(select(Evaluation).where(Evaluation.id == evaluation_id).with_for_update())


async def recount(session: AsyncSession, ev: Evaluation) -> tuple[int, int]:
    """Set ``completed_items``/``error_items`` of ``ev`` from its stored ``sample_results`` rows (so counters
    match rows exactly); returns ``(completed, errors)``."""
    completed, errors = (
        await session.execute(text("SELECT count(*), count(error) FROM sample_results WHERE evaluation_id = :e"), {"e": ev.id})
    ).one()
    ev.completed_items, ev.error_items = int(completed), int(errors)
    return ev.completed_items, ev.error_items


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
        LifecycleConflict: the status is not in :data:`uep_common.lifecycle.RETRYABLE` (``not_retryable``),
            the details were cleaned (``details_cleaned``), or nothing is left to re-run (``nothing_to_retry``:
            every item has a result without an error).
    """
    from uep_common import lifecycle

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
    from uep_common import lifecycle

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
