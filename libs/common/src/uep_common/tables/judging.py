"""Tables of LLM-as-judge and hybrid routing (written by the judge service, read by the gateway's
``/v1/judges/diagnostics`` and by human evaluation).

- ``judge_verdicts``: one row per judge model × item × order (pairwise asks twice: ``position`` 'AB' has the
  candidate's answer first, 'BA' the baseline's). Holds every raw answer (``attempts_log``), whether the last
  one was valid, the parsed scores or winner, the template and its version, and the candidate answer's
  length. Diagnostics are computed from these rows.
- ``judge_items``: the judge's final outcome of one item (unique per item): ``decision`` 'scored' (a
  ScoreComputed was staged in the outbox in the same transaction), 'invalid' (no usable verdict: a
  ScoreComputed with an error and no score) or 'human' (hybrid: sent to annotators, no ScoreComputed). A
  redelivered JudgeRequested whose item has a row is skipped, so an item is judged, charged and scored once.
- ``hybrid_routes``: how a hybrid evaluation routed an item: stage 'judge' (the automatic metric could not
  decide: ``reason`` 'no_answer' or 'free_form') and stage 'human' (the judge could not decide: reason
  'swap_inconsistent', 'jury_disagreement' or 'judge_invalid'; ``details`` holds the judge's verdicts).
  Human evaluation builds annotation tasks from the stage 'human' rows and publishes their ScoreComputed.
- ``judge_calibrations``: a judge's agreement with people on one question of an annotation task, as computed
  at ``computed_at`` (written by the gateway when a task over judged items completes or on request); the
  rows of a judge over time are its calibration history, the newest its standing.

Models here use :class:`uep_common.tables.base.Base`; :mod:`uep_common.tables.tables` puts them on the one metadata
Alembic sees.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
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

JUDGE_DECISIONS = ("scored", "invalid", "human")
ROUTE_STAGES = ("judge", "human")


class JudgeVerdict(Base):
    """One judge model's verdict on one item (one order, for pairwise), with every raw answer."""

    __tablename__ = "judge_verdicts"
    __table_args__ = (
        UniqueConstraint(
            "evaluation_id", "sample_id", "repeat", "arm", "judge_model_id", "position", name="uq_judge_verdicts_call"
        ),
        Index("ix_judge_verdicts_judge", "judge_model_name", "template", "template_version"),
        Index("ix_judge_verdicts_evaluation", "evaluation_id"),
    )
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    evaluation_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("evaluations.id", ondelete="CASCADE"), nullable=False)
    tenant_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), nullable=False, doc="Owner tenant; set from the evaluation by a trigger (row-level security)."
    )
    sample_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    repeat: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    arm: Mapped[str] = mapped_column(String(64), nullable=False, default="main")
    benchmark_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    candidate_model_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False, doc="The evaluated model.")
    opponent_model_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True), doc="Pairwise: the baseline's model.")
    judge_model_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    judge_model_name: Mapped[str] = mapped_column(String(200), nullable=False)
    mode: Mapped[str] = mapped_column(String(20), nullable=False)
    template: Mapped[str] = mapped_column(String(100), nullable=False, doc="Template name, e.g. 'rubric'.")
    template_version: Mapped[str] = mapped_column(String(40), nullable=False, doc="'v1', or 'custom-<sha256[:12]>'.")
    position: Mapped[str] = mapped_column(String(2), nullable=False, default="-", doc="'AB', 'BA' (pairwise) or '-'.")
    valid: Mapped[bool] = mapped_column(Boolean, nullable=False)
    attempts: Mapped[int] = mapped_column(Integer, nullable=False)
    overall: Mapped[float | None] = mapped_column(Float, doc="Rubric: the overall score on its scale.")
    scores: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict, doc="Rubric: dimension → score.")
    winner: Mapped[str | None] = mapped_column(String(4), doc="Pairwise: 'A', 'B' or 'tie' as answered.")
    candidate_outcome: Mapped[str | None] = mapped_column(String(4), doc="Pairwise: 'win', 'loss' or 'tie' for the candidate.")
    reasoning: Mapped[str | None] = mapped_column(Text)
    raw_text: Mapped[str | None] = mapped_column(Text, doc="The last raw answer.")
    attempts_log: Mapped[list[Any]] = mapped_column(JSONB, nullable=False, default=list, doc="[{raw, error}] of every call.")
    error: Mapped[str | None] = mapped_column(Text, doc="Why the last answer was invalid.")
    answer_chars: Mapped[int | None] = mapped_column(Integer, doc="Length of the candidate's answer, characters.")
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    latency_ms: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = created_column()


class JudgeItem(Base):
    """The judge's final outcome of one item (see the module docstring)."""

    __tablename__ = "judge_items"
    __table_args__ = (
        UniqueConstraint("evaluation_id", "sample_id", "repeat", "arm", name="uq_judge_items_item"),
        CheckConstraint(f"decision IN {JUDGE_DECISIONS!r}", name="ck_judge_items_decision"),
    )
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    evaluation_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("evaluations.id", ondelete="CASCADE"), nullable=False)
    tenant_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), nullable=False, doc="Owner tenant; set from the evaluation by a trigger (row-level security)."
    )
    sample_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    repeat: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    arm: Mapped[str] = mapped_column(String(64), nullable=False, default="main")
    mode: Mapped[str] = mapped_column(String(20), nullable=False)
    decision: Mapped[str] = mapped_column(String(10), nullable=False)
    details: Mapped[dict[str, Any]] = mapped_column(
        JSONB, nullable=False, default=dict, doc="The aggregate verdict (ScoreComputed.metrics)."
    )
    score_event_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    created_at: Mapped[datetime] = created_column()


class HybridRoute(Base):
    """A routing step of a hybrid evaluation's item (stage 'judge' or 'human'; see the module docstring)."""

    __tablename__ = "hybrid_routes"
    __table_args__ = (
        UniqueConstraint("evaluation_id", "sample_id", "repeat", "arm", "stage", name="uq_hybrid_routes_item_stage"),
        CheckConstraint(f"stage IN {ROUTE_STAGES!r}", name="ck_hybrid_routes_stage"),
        Index("ix_hybrid_routes_evaluation_stage", "evaluation_id", "stage"),
    )
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    evaluation_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("evaluations.id", ondelete="CASCADE"), nullable=False)
    tenant_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), nullable=False, doc="Owner tenant; set from the evaluation by a trigger (row-level security)."
    )
    sample_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("samples.id"), nullable=False)
    repeat: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    arm: Mapped[str] = mapped_column(String(64), nullable=False, default="main")
    stage: Mapped[str] = mapped_column(String(10), nullable=False)
    reason: Mapped[str] = mapped_column(String(40), nullable=False)
    details: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    created_at: Mapped[datetime] = created_column()


class JudgeCalibration(Base):
    """One judge (model × template × template version) against the annotators of one annotation task on one
    question, at one moment (see the module docstring)."""

    __tablename__ = "judge_calibrations"
    __table_args__ = (
        Index("ix_judge_calibrations_judge", "tenant_id", "judge_model_name", "computed_at"),
        Index("ix_judge_calibrations_task", "task_id"),
    )
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False)
    task_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("annotation_tasks.id", ondelete="CASCADE"), nullable=False)
    evaluation_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("evaluations.id", ondelete="CASCADE"), nullable=False, doc="The judged evaluation (the task's source)."
    )
    judge_model_name: Mapped[str] = mapped_column(String(200), nullable=False)
    template: Mapped[str] = mapped_column(String(100), nullable=False)
    template_version: Mapped[str] = mapped_column(String(40), nullable=False)
    question: Mapped[str] = mapped_column(String(100), nullable=False)
    question_type: Mapped[str] = mapped_column(String(20), nullable=False)
    items: Mapped[int] = mapped_column(Integer, nullable=False, doc="Items both the judge and an annotator answered.")
    agreement: Mapped[float | None] = mapped_column(
        Float, doc="Mean over annotators of the judge's kappa (quadratic-weighted for ratings); None when undefined."
    )
    alpha: Mapped[float | None] = mapped_column(Float, doc="Krippendorff's alpha, the judge as one more coder.")
    statistics: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict, doc="Every statistic computed.")
    computed_at: Mapped[datetime] = created_column()
