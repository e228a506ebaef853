"""Tables of leaderboards and retention.

- ``leaderboard_scores``: the leaderboard score of one completed evaluation (score, 95 % interval, method),
  computed once when it completes and kept forever, so boards survive retention deleting per-item details.
- ``leaderboard_snapshots``: the ranked board of one (benchmark slug, score type) as it stood after an
  evaluation completed; the rank-change history is read from consecutive snapshots.
- ``retention_runs``: each retention run (periodic or requested through the API), what it kept and cleaned.

Models here use :class:`uep_common.tables.base.Base`; :mod:`uep_common.tables.tables` puts them on the one metadata
Alembic sees.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, CheckConstraint, DateTime, Float, ForeignKey, Index, Integer, String, Text, func
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from uep_common.tables import models as _core  # noqa: F401  (registers the core tables its foreign keys name)
from uep_common.tables.base import Base

SCORE_METHODS = ("wilson", "bootstrap", "none")
RETENTION_RUN_STATUSES = ("requested", "running", "completed", "failed", "skipped")


class LeaderboardScore(Base):
    """Leaderboard score of one completed evaluation on the board (benchmark slug, score type).

    ``score`` is the accuracy (``method`` 'wilson': Wilson 95 % interval) or the mean of a continuous score
    (``method`` 'bootstrap': bootstrap 95 % interval, ``method_detail`` says which); ``n`` is the number of
    scored items. ``ci_low``/``ci_high`` are NULL when undefined (fewer than one scored item, or fewer than two for
    a mean)."""

    __tablename__ = "leaderboard_scores"
    __table_args__ = (
        CheckConstraint("method IN ('wilson', 'bootstrap', 'none')", name="ck_leaderboard_scores_method"),
        Index("ix_leaderboard_scores_board", "benchmark_slug", "score_type", "model_name", "model_version", "evaluated_at"),
    )
    evaluation_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("evaluations.id", ondelete="CASCADE"), primary_key=True)
    tenant_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), nullable=False, doc="Owner tenant; set from the evaluation by a trigger (row-level security)."
    )
    benchmark_slug: Mapped[str] = mapped_column(String(100), nullable=False)
    benchmark_version: Mapped[str] = mapped_column(String(64), nullable=False)
    score_type: Mapped[str] = mapped_column(String(100), nullable=False)
    model_name: Mapped[str] = mapped_column(String(200), nullable=False)
    model_version: Mapped[str] = mapped_column(String(100), nullable=False)
    score: Mapped[float | None] = mapped_column(Float)
    ci_low: Mapped[float | None] = mapped_column(Float)
    ci_high: Mapped[float | None] = mapped_column(Float)
    n: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    method: Mapped[str] = mapped_column(String(40), nullable=False)
    method_detail: Mapped[str] = mapped_column(Text, nullable=False, default="")
    evaluated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    computed_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now(), nullable=False
    )


class LeaderboardSnapshot(Base):
    """The ranked board of (benchmark slug, score type) right after ``evaluation_id`` was recorded.

    ``entries``: list of ``{model, model_version, position, rank, tie_group, score, ci_low, ci_high, n,
    evaluation_id}`` in board order (see :mod:`uep_common.analytics.leaderboards`)."""

    __tablename__ = "leaderboard_snapshots"
    __table_args__ = (Index("ix_leaderboard_snapshots_board", "benchmark_slug", "score_type", "id"),)
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    benchmark_slug: Mapped[str] = mapped_column(String(100), nullable=False)
    score_type: Mapped[str] = mapped_column(String(100), nullable=False)
    evaluation_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    tenant_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), nullable=True, doc="Owner tenant; set from the evaluation by a trigger (row-level security)."
    )
    entries: Mapped[list[Any]] = mapped_column(JSONB, nullable=False, default=list)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)


class RetentionRun(Base):
    """One retention run: requested through the API (``trigger`` 'api', executed by a reporter) or
    periodic. ``keep_last`` NULL means the reporter's setting. ``result`` holds what was kept (with the
    reason) and cleaned, and the rows and files deleted (see :mod:`uep_reporter.retention_policy`)."""

    __tablename__ = "retention_runs"
    __table_args__ = (
        CheckConstraint("status IN ('requested', 'running', 'completed', 'failed', 'skipped')", name="ck_retention_runs_status"),
        Index("ix_retention_runs_requested", "requested_at", postgresql_where="status = 'requested'"),
    )
    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)
    trigger: Mapped[str] = mapped_column(String(20), nullable=False, default="api")
    dry_run: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    keep_last: Mapped[int | None] = mapped_column(Integer)
    scope: Mapped[dict[str, Any]] = mapped_column(
        JSONB, nullable=False, default=dict, doc="{benchmark, model}: clean only evaluations of this slug / model name."
    )
    status: Mapped[str] = mapped_column(String(20), nullable=False, default="requested")
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True))
    error: Mapped[str | None] = mapped_column(Text)
    requested_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
