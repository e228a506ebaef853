"""Tables of human evaluation: annotators, annotation tasks, their items (gold items among them),
assignments (who holds which item until when) and submitted annotations.

Models here use :class:`uep_common.tables.base.Base`; :mod:`uep_common.tables.tables` puts them on the one metadata
Alembic sees.

Invariants the schema enforces (the gateway's annotation module relies on them):

- an annotator holds at most one assignment of an item, ever (``uq_annotation_assignments_item_annotator``),
  so the same item is never handed to one annotator twice;
- an annotator submits at most one annotation per item (``uq_annotations_item_annotator``);
- every writer of an item's assignments or annotations first locks the item row (``SELECT … FOR UPDATE``),
  so the count "submitted + assignments still open" is exact under concurrency.
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
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from uep_common.tables import models as _core  # noqa: F401  (registers the core tables its foreign keys name)
from uep_common.tables.base import Base, created_column

ANNOTATION_SOURCES = ("evaluation", "hybrid")
ANNOTATION_TASK_STATUSES = ("open", "completed")
ANNOTATION_ITEM_STATUSES = ("open", "complete")


class Annotator(Base):
    """A person who annotates for one tenant: the annotator of a signed-in user (``user_id``; ``name`` is the
    username) or, for tasks worked through an API key, a name registered by the tenant's builder or admin."""

    __tablename__ = "annotators"
    __table_args__ = (UniqueConstraint("tenant_id", "name", name="uq_annotators_tenant_name"),)
    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False)
    user_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    created_at: Mapped[datetime] = created_column()


class AnnotationTask(Base):
    """A set of items to annotate with one questionnaire.

    ``source`` 'evaluation': the outputs of ``source_evaluation_id`` (and, for pairwise questions, of
    ``compare_evaluation_id`` as answer B); the human scores go to ``result_evaluation_id``, a new
    evaluation row created with the task. ``source`` 'hybrid': the items a hybrid evaluation routed to
    humans (``hybrid_routes`` stage 'human'); the human scores are the missing ScoreComputed of the
    hybrid evaluation's own items (``result_evaluation_id`` = ``source_evaluation_id``).
    ``questions``: list of question specs (``uep_gateway.annotation.questions.Question``).
    """

    __tablename__ = "annotation_tasks"
    __table_args__ = (
        CheckConstraint(f"source IN {ANNOTATION_SOURCES!r}", name="ck_annotation_tasks_source"),
        CheckConstraint(f"status IN {ANNOTATION_TASK_STATUSES!r}", name="ck_annotation_tasks_status"),
        CheckConstraint("annotations_per_item >= 1", name="ck_annotation_tasks_per_item"),
        CheckConstraint("quality_threshold >= 0 AND quality_threshold <= 1", name="ck_annotation_tasks_threshold"),
    )
    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id"), nullable=False)
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    source: Mapped[str] = mapped_column(String(20), nullable=False)
    source_evaluation_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("evaluations.id", ondelete="CASCADE"), nullable=False, index=True
    )
    compare_evaluation_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("evaluations.id", ondelete="SET NULL"))
    result_evaluation_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("evaluations.id", ondelete="SET NULL"), index=True)
    questions: Mapped[list[Any]] = mapped_column(JSONB, nullable=False)
    guidelines: Mapped[str] = mapped_column(Text, nullable=False, default="")
    annotations_per_item: Mapped[int] = mapped_column(
        Integer, nullable=False, doc="N: submitted annotations that complete an item."
    )
    assignment_ttl_seconds: Mapped[int] = mapped_column(
        Integer, nullable=False, doc="An unsubmitted assignment frees its slot after this."
    )
    quality_threshold: Mapped[float] = mapped_column(Float, nullable=False, doc="Gold accuracy below this flags an annotator.")
    min_gold_answers: Mapped[int] = mapped_column(Integer, nullable=False, doc="Gold checks before an annotator can be flagged.")
    gold_rating_tolerance: Mapped[float] = mapped_column(Float, nullable=False, default=0.0)
    show_reference: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True)
    status: Mapped[str] = mapped_column(String(20), nullable=False, default="open")
    total_items: Mapped[int] = mapped_column(Integer, nullable=False, doc="Scored (non-gold) items.")
    gold_items: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    created_at: Mapped[datetime] = created_column()
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class AnnotationItem(Base):
    """One item to annotate: an item (evaluation, sample, repeat, arm) of the task's source evaluation.

    ``content``: what the annotator sees, snapshotted at creation (``prompt``, ``output``, ``output_b``
    for pairwise, ``reference``). Gold items (``is_gold``) carry ``gold_answers`` (question → known answer),
    are offered to every annotator once, never complete and never produce a score. A scored item is
    ``complete`` once ``submitted_count`` reaches the task's ``annotations_per_item``.
    """

    __tablename__ = "annotation_items"
    __table_args__ = (
        UniqueConstraint("task_id", "sample_id", "repeat", "arm", name="uq_annotation_items_item"),
        CheckConstraint(f"status IN {ANNOTATION_ITEM_STATUSES!r}", name="ck_annotation_items_status"),
        Index("ix_annotation_items_next", "task_id", "status", "position"),
    )
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    task_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("annotation_tasks.id", ondelete="CASCADE"), nullable=False)
    tenant_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), nullable=False, doc="Owner tenant; set from the annotation task by a trigger (row-level security)."
    )
    position: Mapped[int] = mapped_column(Integer, nullable=False, doc="Hand-out order (gold items interleaved).")
    evaluation_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False, doc="The source item's evaluation.")
    sample_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("samples.id"), nullable=False)
    repeat: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    arm: Mapped[str] = mapped_column(String(64), nullable=False, default="main")
    sample_ordinal: Mapped[int] = mapped_column(Integer, nullable=False)
    is_gold: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    gold_answers: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True))
    content: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    source_details: Mapped[dict[str, Any]] = mapped_column(
        JSONB, nullable=False, default=dict, doc="Hybrid: the route's reason and judge details; metric of the item."
    )
    submitted_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    status: Mapped[str] = mapped_column(String(20), nullable=False, default="open")
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    score_event_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True), doc="The ScoreComputed it produced.")


class AnnotationAssignment(Base):
    """An item handed to an annotator until ``expires_at``. Open = not submitted and not expired; an
    expired one frees its slot for others (the same annotator never gets the item again)."""

    __tablename__ = "annotation_assignments"
    __table_args__ = (
        UniqueConstraint("item_id", "annotator_id", name="uq_annotation_assignments_item_annotator"),
        Index("ix_annotation_assignments_annotator", "task_id", "annotator_id"),
    )
    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)
    task_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("annotation_tasks.id", ondelete="CASCADE"), nullable=False)
    tenant_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), nullable=False, doc="Owner tenant; set from the annotation task by a trigger (row-level security)."
    )
    item_id: Mapped[int] = mapped_column(ForeignKey("annotation_items.id", ondelete="CASCADE"), nullable=False)
    annotator_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("annotators.id"), nullable=False)
    assigned_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    submitted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Annotation(Base):
    """One annotator's answers to one item (question name → value). On gold items ``gold_checked`` /
    ``gold_correct`` count the questions compared with the known answer and those that matched."""

    __tablename__ = "annotations"
    __table_args__ = (
        UniqueConstraint("item_id", "annotator_id", name="uq_annotations_item_annotator"),
        Index("ix_annotations_task_annotator", "task_id", "annotator_id"),
    )
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    task_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("annotation_tasks.id", ondelete="CASCADE"), nullable=False)
    tenant_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), nullable=False, doc="Owner tenant; set from the annotation task by a trigger (row-level security)."
    )
    item_id: Mapped[int] = mapped_column(ForeignKey("annotation_items.id", ondelete="CASCADE"), nullable=False)
    annotator_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("annotators.id"), nullable=False)
    assignment_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("annotation_assignments.id", ondelete="CASCADE"), nullable=False)
    answers: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    gold_checked: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    gold_correct: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    created_at: Mapped[datetime] = created_column()
