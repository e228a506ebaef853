"""Tables of reports and their files: ``reports``, ``artifacts`` (content-addressed files) and
``artifact_refs`` (which evaluation uses which file). ``evaluations.pinned`` (the pinned baseline of its
model name and benchmark slug) is mapped in models.py and added by migration 0011.

Every file a report writes is an artifact (unique on its SHA-256; the file lies at ``path`` relative to
``UEP_ARTIFACT_DIR``) referenced by its evaluation; retention deletes refs, and deletes an artifact's file
and row only when no ref remains.

Models here use :class:`uep_common.tables.base.Base`; :mod:`uep_common.tables.tables` puts them on the one metadata
Alembic sees.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, CheckConstraint, DateTime, ForeignKey, Index, String, Text, UniqueConstraint, func
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from uep_common.tables import models as _core  # noqa: F401  (registers the core tables its foreign keys name)
from uep_common.tables.base import Base

REPORT_STATUSES = ("pending", "ready", "failed")
ARTIFACT_KINDS = ("report_html", "report_json", "report_pdf")


class Artifact(Base):
    """A file written by uep, stored once per content (``sha256`` unique) under ``UEP_ARTIFACT_DIR``."""

    __tablename__ = "artifacts"
    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)
    sha256: Mapped[str] = mapped_column(String(64), unique=True, nullable=False, doc="Hex SHA-256 of the content.")
    path: Mapped[str] = mapped_column(Text, nullable=False, doc="Path relative to UEP_ARTIFACT_DIR.")
    bytes: Mapped[int] = mapped_column(BigInteger, nullable=False)
    media_type: Mapped[str] = mapped_column(String(100), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)


class ArtifactRef(Base):
    """An evaluation's use of an artifact (``kind``: report_html, report_json, report_pdf, …)."""

    __tablename__ = "artifact_refs"
    __table_args__ = (
        UniqueConstraint("artifact_id", "evaluation_id", "kind", name="uq_artifact_refs"),
        Index("ix_artifact_refs_evaluation", "evaluation_id"),
    )
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    artifact_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("artifacts.id", ondelete="CASCADE"), nullable=False)
    evaluation_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("evaluations.id", ondelete="CASCADE"), nullable=False)
    tenant_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), nullable=False, doc="Owner tenant; set from the evaluation by a trigger (row-level security)."
    )
    kind: Mapped[str] = mapped_column(String(32), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)


class Report(Base):
    """One report of an evaluation: pending (requested), ready (files written) or failed (``error``).

    The newest ready report is the one served at ``/v1/evaluations/{id}/report.{html,json,pdf}``.
    ``pdf_artifact_id`` is None when the PDF could not be rendered (``pdf_error`` says why).
    """

    __tablename__ = "reports"
    __table_args__ = (
        CheckConstraint("status IN ('pending', 'ready', 'failed')", name="ck_reports_status"),
        Index("ix_reports_evaluation_created", "evaluation_id", "created_at"),
    )
    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)
    evaluation_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("evaluations.id", ondelete="CASCADE"), nullable=False)
    tenant_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), nullable=False, doc="Owner tenant; set from the evaluation by a trigger (row-level security)."
    )
    status: Mapped[str] = mapped_column(String(10), nullable=False, default="pending")
    trigger: Mapped[str] = mapped_column(String(20), nullable=False, default="completed", doc="completed | request")
    baseline_evaluation_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    schema_version: Mapped[str | None] = mapped_column(String(20))
    html_artifact_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("artifacts.id", ondelete="SET NULL"))
    json_artifact_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("artifacts.id", ondelete="SET NULL"))
    pdf_artifact_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("artifacts.id", ondelete="SET NULL"))
    pdf_error: Mapped[str | None] = mapped_column(Text)
    build_ms: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict, doc="Milliseconds per build stage.")
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
