"""Tables of the scheduler: fair-queuing state, adaptive model limits, schedules (cron) and their runs.

Models here use :class:`uep_common.tables.base.Base`; :mod:`uep_common.tables.tables` puts them on the one metadata
Alembic sees.

Fair-queuing state (see ``uep_scheduler.fairness`` for the algorithm):

- ``sched_clock``: one row (``id = 1``), the system virtual time ``v`` of the tenant level.
- ``sched_tenants``: per tenant its weight, its finish tag in ``v`` and the virtual time of its own flows.
- ``sched_flows``: per flow (an evaluation, or an A/B experiment whose arms are dispatched together) its
  finish tag in its tenant's virtual time and when it last got a slot (for aging).
- ``sched_models``: the adaptive (AIMD) concurrency limit of a model.

Scheduled evaluations: ``schedules`` (a cron expression, a model and a benchmark, options) and
``schedule_runs``, unique on ``(schedule_id, scheduled_for)`` so that several scheduler replicas create
each due run exactly once.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from uep_common.tables import models as _core  # noqa: F401  (registers the core tables its foreign keys name)
from uep_common.tables.base import Base


class SchedClock(Base):
    """The tenant level's system virtual time ``v`` (a single row, ``id = 1``)."""

    __tablename__ = "sched_clock"
    id: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    vtime: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)


class SchedTenant(Base):
    """Fair-queuing state of a tenant: ``weight`` (share of dispatch slots relative to other tenants),
    ``vfinish`` (finish tag of its last slot, in system virtual time) and ``vtime`` (the virtual time of
    its own flows, the inner level)."""

    __tablename__ = "sched_tenants"
    __table_args__ = (CheckConstraint("weight > 0", name="ck_sched_tenants_weight"),)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True)
    weight: Mapped[float] = mapped_column(Float, nullable=False, default=1.0, server_default="1")
    vfinish: Mapped[float] = mapped_column(Float, nullable=False, default=0.0, server_default="0")
    vtime: Mapped[float] = mapped_column(Float, nullable=False, default=0.0, server_default="0")
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now(), nullable=False
    )


class SchedFlow(Base):
    """Fair-queuing state of a flow: an evaluation, or the A/B experiment whose arms go out together
    (``flow_id`` = ``experiment_id`` then). ``vfinish`` is in its tenant's virtual time."""

    __tablename__ = "sched_flows"
    flow_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False)
    vfinish: Mapped[float] = mapped_column(Float, nullable=False, default=0.0, server_default="0")
    last_dispatch_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    dispatched: Mapped[int] = mapped_column(BigInteger, nullable=False, default=0, server_default="0")
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now(), nullable=False
    )


class SchedModel(Base):
    """Adaptive concurrency of a model: ``limit`` in flight (between 1 and the registry capacity), moved by
    additive increase / multiplicative decrease on transient errors (``uep_scheduler.capacity``)."""

    __tablename__ = "sched_models"
    model_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), primary_key=True)
    limit: Mapped[float] = mapped_column(Float, nullable=False)
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now(), nullable=False
    )


class Schedule(Base):
    """A cron expression that re-runs a model on a benchmark (e.g. a nightly regression).

    ``model``/``benchmark`` are references (name or id) resolved at each run (the newest version unless
    ``options`` pins ``model_version``/``benchmark_version``); ``options`` holds the evaluation options
    (sample_limit, repeats, priority, max_parallel, fewshot_k, chat_template). ``next_run_at`` is the next
    due time (UTC); ``deleted_at`` marks a deleted schedule (its runs stay linked).
    """

    __tablename__ = "schedules"
    __table_args__ = (Index("ix_schedules_due", "next_run_at", postgresql_where="active AND deleted_at IS NULL"),)
    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id"), nullable=False, index=True)
    name: Mapped[str] = mapped_column(String(200), nullable=False, default="")
    cron: Mapped[str] = mapped_column(String(200), nullable=False)
    model: Mapped[str] = mapped_column(String(200), nullable=False)
    benchmark: Mapped[str] = mapped_column(String(100), nullable=False)
    options: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    active: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    next_run_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ScheduleRun(Base):
    """One due run of a schedule: the evaluation it created, or why none was (``error``)."""

    __tablename__ = "schedule_runs"
    __table_args__ = (UniqueConstraint("schedule_id", "scheduled_for", name="uq_schedule_runs_due"),)
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    schedule_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("schedules.id", ondelete="CASCADE"), nullable=False)
    tenant_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), nullable=False, doc="Owner tenant; set from the schedule by a trigger (row-level security)."
    )
    scheduled_for: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    evaluation_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("evaluations.id", ondelete="SET NULL"))
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)
