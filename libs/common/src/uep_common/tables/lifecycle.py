"""Tables of the evaluation lifecycle and of faults: retired results, dead-letter records, scheduler instances
(migration 0008), and the row lock and recount every status change starts from.

Models here use :class:`uep_common.tables.base.Base`; :mod:`uep_common.tables.tables` puts them on the one metadata
Alembic sees. The status changes themselves are :mod:`uep_common.records.lifecycle` (the transition table); the
item-level work of a retry and a redrive is :mod:`uep_common.records.reruns`.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

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

from uep_common.tables.base import Base
from uep_common.tables.models import Evaluation

if TYPE_CHECKING:
    pass


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
