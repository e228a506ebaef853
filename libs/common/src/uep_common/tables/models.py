"""SQLAlchemy 2.0 models of the core tables: the system of record of uep (PostgreSQL).

Tables: tenants, benchmarks, samples, models, evaluations, sample_leases (scheduler-owned dispatch state),
sample_results (reporter-owned results, unique per item), rescores and score_history (re-scoring and the
scores it replaced), outbox (transactional outbox).
Schema changes go through Alembic migrations in ``uep_common/tables/migrations``. The tables of later areas
are in their own modules (:mod:`uep_common.tables.tables` lists them); they import this module, never the reverse.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
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
    LargeBinary,
    Numeric,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column, validates

from uep_common.contract.configs import EvaluationType
from uep_common.contract.costs import COST_UNITS
from uep_common.contract.events import Backend, ModelKind
from uep_common.tables.base import Base, created_column, in_list, uuid_pk

BENCHMARK_CATEGORIES = ("nlp", "code", "math", "reasoning", "safety", "custom")
BENCHMARK_STATUSES = ("active", "deprecated", "draft")
BENCHMARK_VISIBILITIES = ("private", "shared")
EVALUATION_TYPES = tuple(t.value for t in EvaluationType)
EVALUATION_STATUSES = ("pending", "running", "completed", "failed", "cancelled", "interrupted", "stopped", "budget_exhausted")
PRIORITIES = ("urgent", "high", "normal", "low")
BACKENDS = tuple(b.value for b in Backend)
"""The backend names a model row may have: the event contract's :class:`Backend`, the one list. Checked in code
(:meth:`Model.check_backend`, the registry's ``ModelCreate``), not by a constraint, so adding a backend needs
no migration."""
LEASE_STATES = ("leased", "released")
MODEL_KINDS = tuple(k.value for k in ModelKind)
MODEL_VISIBILITIES = ("private", "shared")


TENANT_LIMIT_COLUMNS = ("max_items_per_evaluation", "max_queued_items", "max_evaluations_per_minute", "min_schedule_interval_s")


class Tenant(Base):
    """A team using uep; every evaluation belongs to one tenant.

    The ``max_*``/``min_*`` columns (migration 0014) override the site's work limits for this tenant (null =
    the site default; see :class:`uep_common.records.work_limits.WorkLimits`)."""

    __tablename__ = "tenants"
    __table_args__ = tuple(CheckConstraint(f"{c} IS NULL OR {c} >= 1", name=f"ck_tenants_{c}") for c in TENANT_LIMIT_COLUMNS)
    id: Mapped[uuid.UUID] = uuid_pk()
    slug: Mapped[str] = mapped_column(String(64), unique=True, nullable=False)
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    created_at: Mapped[datetime] = created_column()
    max_items_per_evaluation: Mapped[int | None] = mapped_column(Integer, doc="Items (samples × repeats) of one evaluation.")
    max_queued_items: Mapped[int | None] = mapped_column(Integer, doc="Items not yet finished across its evaluations.")
    max_evaluations_per_minute: Mapped[int | None] = mapped_column(Integer, doc="Evaluations created in any 60 s.")
    min_schedule_interval_s: Mapped[int | None] = mapped_column(Integer, doc="Closest two runs of a schedule, seconds.")


class Benchmark(Base):
    """One version of a benchmark. A version is the SHA-256 content hash of its samples and config,
    so the same content registered twice is one row (unique on slug + version)."""

    __tablename__ = "benchmarks"
    __table_args__ = (
        UniqueConstraint("slug", "version", name="uq_benchmarks_slug_version"),
        CheckConstraint(in_list("category", BENCHMARK_CATEGORIES), name="ck_benchmarks_category"),
        CheckConstraint(in_list("status", BENCHMARK_STATUSES), name="ck_benchmarks_status"),
        CheckConstraint(in_list("evaluation_type", EVALUATION_TYPES), name="ck_benchmarks_evaluation_type"),
        CheckConstraint(in_list("visibility", BENCHMARK_VISIBILITIES), name="ck_benchmarks_visibility"),
    )
    id: Mapped[uuid.UUID] = uuid_pk()
    slug: Mapped[str] = mapped_column(String(100), nullable=False)
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    description: Mapped[str] = mapped_column(Text, nullable=False, default="")
    version: Mapped[str] = mapped_column(String(64), nullable=False, doc="SHA-256 hex of the content.")
    category: Mapped[str] = mapped_column(String(20), nullable=False)
    status: Mapped[str] = mapped_column(String(20), nullable=False, default="active")
    is_builtin: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    evaluation_type: Mapped[str] = mapped_column(String(20), nullable=False, default=EvaluationType.automatic.value)
    capability_dimensions: Mapped[list[Any]] = mapped_column(JSONB, nullable=False, default=list)
    config: Mapped[dict[str, Any]] = mapped_column(
        JSONB, nullable=False, default=dict, doc="prompt (PromptSpec), metric {name, params}, language, few-shot…"
    )
    license: Mapped[str | None] = mapped_column(String(200))
    source: Mapped[str | None] = mapped_column(Text)
    sample_count: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    created_at: Mapped[datetime] = created_column()
    owner_tenant_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), doc="The uploading tenant; null for the site catalogue (built-ins)."
    )
    visibility: Mapped[str] = mapped_column(
        String(10), nullable=False, default="private", doc="private (its owner only) or shared (every tenant may read it)."
    )


class Sample(Base):
    """One benchmark item: what the prompt template sees (input) and what the scorer sees (reference)."""

    __tablename__ = "samples"
    __table_args__ = (UniqueConstraint("benchmark_id", "ordinal", name="uq_samples_benchmark_ordinal"),)
    id: Mapped[uuid.UUID] = uuid_pk()
    benchmark_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("benchmarks.id", ondelete="CASCADE"), nullable=False)
    ordinal: Mapped[int] = mapped_column(Integer, nullable=False)
    external_id: Mapped[str | None] = mapped_column(String(200))
    input: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    reference: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, nullable=False, default=dict)


class Model(Base):
    """A registered model and how to reach it."""

    __tablename__ = "models"
    __table_args__ = (
        # (name, version) is unique among site models and within each tenant's own models
        Index("uq_models_site_name_version", "name", "version", unique=True, postgresql_where="owner_tenant_id IS NULL"),
        Index(
            "uq_models_owner_name_version",
            "owner_tenant_id",
            "name",
            "version",
            unique=True,
            postgresql_where="owner_tenant_id IS NOT NULL",
        ),
        CheckConstraint(in_list("cost_unit", COST_UNITS), name="ck_models_cost_unit"),
        CheckConstraint(in_list("kind", MODEL_KINDS), name="ck_models_kind"),
        CheckConstraint(in_list("visibility", MODEL_VISIBILITIES), name="ck_models_visibility"),
    )
    id: Mapped[uuid.UUID] = uuid_pk()
    name: Mapped[str] = mapped_column(String(200), nullable=False)
    version: Mapped[str] = mapped_column(String(100), nullable=False, default="1")
    description: Mapped[str] = mapped_column(Text, nullable=False, default="")
    backend: Mapped[str] = mapped_column(String(30), nullable=False)
    endpoint: Mapped[str] = mapped_column(String(500), nullable=False)
    triton_model_name: Mapped[str | None] = mapped_column(String(200))
    triton_model_version: Mapped[str | None] = mapped_column(String(50))
    decoding_defaults: Mapped[dict[str, Any]] = mapped_column(
        JSONB, nullable=False, default=dict, doc="max_tokens, temperature, stop"
    )
    supports_logprobs: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    max_in_flight: Mapped[int | None] = mapped_column(Integer, doc="Serving capacity (requests in flight).")
    # Cost model (migration 0007; arithmetic and units in uep_common.contract.costs): prices in the site currency.
    cost_unit: Mapped[str] = mapped_column(
        String(12), nullable=False, default="none", server_default="none", doc="none | tokens | gpu_second | call"
    )
    price_per_1k_input_tokens: Mapped[Decimal] = mapped_column(Numeric(24, 10), nullable=False, default=0, server_default="0")
    price_per_1k_output_tokens: Mapped[Decimal] = mapped_column(Numeric(24, 10), nullable=False, default=0, server_default="0")
    price_per_gpu_second: Mapped[Decimal] = mapped_column(
        Numeric(24, 10), nullable=False, default=0, server_default="0", doc="GPU time = call latency (a proxy)."
    )
    price_per_call: Mapped[Decimal] = mapped_column(Numeric(24, 10), nullable=False, default=0, server_default="0")
    expected_input_tokens: Mapped[int] = mapped_column(Integer, nullable=False, default=500, server_default="500")
    expected_output_tokens: Mapped[int] = mapped_column(Integer, nullable=False, default=256, server_default="256")
    expected_latency_ms: Mapped[float] = mapped_column(Float, nullable=False, default=1000.0, server_default="1000")
    created_at: Mapped[datetime] = created_column()
    # Registry (migration 0016): what the model does, the contract it speaks, who owns it.
    kind: Mapped[str] = mapped_column(
        String(20), nullable=False, default="generation", server_default="generation", doc="ModelKind."
    )
    contract: Mapped[str] = mapped_column(
        String(40), nullable=False, default="uep", server_default="uep", doc="Tensor/API contract (docs/models.md)."
    )
    spec: Mapped[dict[str, Any]] = mapped_column(
        JSONB, nullable=False, default=dict, server_default="{}", doc="class_names, input, tensor names, dimension…"
    )
    owner_tenant_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), doc="The registering tenant; null for site models."
    )
    visibility: Mapped[str] = mapped_column(
        String(10), nullable=False, default="private", server_default="private", doc="private | shared (site: no owner)."
    )
    active: Mapped[bool] = mapped_column(
        Boolean, nullable=False, default=True, server_default="true", doc="False once deactivated: no new evaluations."
    )
    api_key_encrypted: Mapped[bytes | None] = mapped_column(
        LargeBinary, doc="The endpoint's API key, encrypted with the site key; never returned."
    )
    api_key_ref: Mapped[str | None] = mapped_column(
        String(200), doc="Or the name of the environment variable / Secret key holding it."
    )
    created_by: Mapped[str] = mapped_column(String(200), nullable=False, default="", server_default="")

    @validates("backend")
    def check_backend(self, _key: str, value: str) -> str:
        """``value`` as stored, when it names a backend of :data:`BACKENDS`; raises ValueError naming
        ``backend`` otherwise (on assignment, before anything reaches the database)."""
        if value not in BACKENDS:
            raise ValueError(f"backend {value!r} is not one of {', '.join(BACKENDS)}")
        return str(Backend(value).value)


class Evaluation(Base):
    """One evaluation of one model on one benchmark version.

    Status: pending → running → completed | failed | cancelled. ``total_items`` = samples × repeats × arms;
    ``completed_items`` counts stored results (the durable progress; Redis holds a live copy).
    """

    __tablename__ = "evaluations"
    __table_args__ = (
        CheckConstraint(in_list("status", EVALUATION_STATUSES), name="ck_evaluations_status"),
        CheckConstraint(in_list("priority", PRIORITIES), name="ck_evaluations_priority"),
        CheckConstraint("repeats >= 1", name="ck_evaluations_repeats"),
        CheckConstraint("sample_limit IS NULL OR sample_limit >= 1", name="ck_evaluations_limit"),
        Index("ix_evaluations_status", "status"),
        Index("ix_evaluations_tenant_created", "tenant_id", "created_at"),
        Index("ix_evaluations_batch_id", "batch_id", postgresql_where="batch_id IS NOT NULL"),
        Index("ix_evaluations_experiment_id", "experiment_id", postgresql_where="experiment_id IS NOT NULL"),
        Index("ix_evaluations_schedule_id", "schedule_id", postgresql_where="schedule_id IS NOT NULL"),
        Index("ix_evaluations_pinned", "model_id", postgresql_where="pinned"),
        UniqueConstraint("tenant_id", "idempotency_key", name="uq_evaluations_idempotency_key"),
    )
    id: Mapped[uuid.UUID] = uuid_pk()
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id"), nullable=False)
    benchmark_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("benchmarks.id"), nullable=False)
    model_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("models.id"), nullable=False)
    status: Mapped[str] = mapped_column(String(20), nullable=False, default="pending")
    priority: Mapped[str] = mapped_column(String(10), nullable=False, default="normal")
    sample_limit: Mapped[int | None] = mapped_column(Integer)
    repeats: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    total_items: Mapped[int] = mapped_column(Integer, nullable=False)
    dispatched_items: Mapped[int] = mapped_column(
        Integer, nullable=False, default=0, doc="Items leased so far, in item order (scheduler-owned cursor)."
    )
    completed_items: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    error_items: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    discarded_items: Mapped[int] = mapped_column(
        Integer, nullable=False, default=0, server_default="0", doc="Results that arrived after a cancel, not stored."
    )
    config: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True))
    error: Mapped[str | None] = mapped_column(Text)
    trace_context: Mapped[dict[str, Any]] = mapped_column(
        JSONB, nullable=False, default=dict, doc="W3C traceparent/tracestate of the evaluation's root span."
    )
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    resumed_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True), doc="Last POST …/retry that set it running again (0008)."
    )
    batch_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), doc="Evaluations created by one batch request (several models) share it (migration 0006)."
    )
    experiment_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), doc="A/B experiment: each arm is its own evaluation with the same experiment_id."
    )
    arm: Mapped[str] = mapped_column(String(64), nullable=False, default="main", server_default="main", doc="A/B arm name.")
    schedule_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("schedules.id", ondelete="SET NULL"), doc="The schedule (cron) that created this run."
    )
    pinned: Mapped[bool] = mapped_column(
        Boolean,
        nullable=False,
        default=False,
        server_default="false",
        doc="The pinned baseline of its (model name, benchmark slug): reports compare against it (migration 0011).",
    )
    created_at: Mapped[datetime] = created_column()
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now(), nullable=False
    )
    details_cleaned_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True), doc="When retention deleted the per-item details (the summary stays); NULL = intact."
    )
    details_compacted_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True),
        doc="When compaction last finished with the evaluation (the leases and ledger rows it no longer needs gone, "
        "uep_reporter.compaction); earlier than completed_at = ended again since (migration 0018).",
    )


class SampleLease(Base):
    """Scheduler-owned dispatch state of one item: leased to inference until ``lease_expires_at``,
    released when its ScoreComputed arrives. An expired, unreleased lease is dispatched again."""

    __tablename__ = "sample_leases"
    __table_args__ = (
        UniqueConstraint("evaluation_id", "sample_id", "repeat", "arm", name="uq_sample_leases_item"),
        CheckConstraint(in_list("state", LEASE_STATES), name="ck_sample_leases_state"),
        Index("ix_sample_leases_open", "evaluation_id", "state", "lease_expires_at"),
        Index("ix_sample_leases_leased", "evaluation_id", "lease_expires_at", postgresql_where="state = 'leased'"),
        Index("ix_sample_leases_final_deadline", "final_deadline", postgresql_where="final_deadline IS NOT NULL"),
    )
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    evaluation_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("evaluations.id", ondelete="CASCADE"), nullable=False)
    tenant_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), nullable=False, doc="Owner tenant; set from the evaluation by a trigger (row-level security)."
    )
    sample_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("samples.id"), nullable=False)
    repeat: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    arm: Mapped[str] = mapped_column(String(64), nullable=False, default="main")
    state: Mapped[str] = mapped_column(String(10), nullable=False, default="leased")
    attempt: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    leased_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    lease_expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    released_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempt_base: Mapped[int] = mapped_column(
        Integer,
        nullable=False,
        default=0,
        server_default="0",
        doc="``attempt`` when the item was last retried or redriven: attempts since = attempt - attempt_base (0008).",
    )
    final_deadline: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True),
        doc="Set on a lease's last allowed attempt: its real expiry (lease_expires_at is then year 9999, so it is "
        "not dispatched again); past it with no result, the item is recorded failed and dead-lettered (0008).",
    )


class SampleResult(Base):
    """Reporter-owned result of one item; unique on (evaluation, sample, repeat, arm).

    The first ScoreComputed for an item is stored; a redelivered or duplicate one changes nothing.
    """

    __tablename__ = "sample_results"
    __table_args__ = (
        UniqueConstraint("evaluation_id", "sample_id", "repeat", "arm", name="uq_sample_results_item"),
        Index("ix_sample_results_eval_id", "evaluation_id", "id"),
    )
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    evaluation_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("evaluations.id", ondelete="CASCADE"), nullable=False)
    tenant_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), nullable=False, doc="Owner tenant; set from the evaluation by a trigger (row-level security)."
    )
    sample_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("samples.id"), nullable=False)
    repeat: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    arm: Mapped[str] = mapped_column(String(64), nullable=False, default="main")
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
    error: Mapped[dict[str, Any] | None] = mapped_column(
        JSONB(none_as_null=True), doc="ErrorInfo {stage, type, message} or SQL NULL."
    )
    attempt: Mapped[int] = mapped_column(Integer, nullable=False, default=1)
    score_event_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    rescore_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), doc="The last rescore applied to this row (idempotency of rescoring)."
    )
    rescored_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = created_column()
    prediction: Mapped[dict[str, Any] | None] = mapped_column(
        JSONB(none_as_null=True), doc="The item's Prediction (label, probabilities, ranking, scores) or SQL NULL."
    )
    transcript: Mapped[dict[str, Any] | None] = mapped_column(
        JSONB(none_as_null=True),
        doc="A conversation item's Transcript (uep_common.contract.dialogue: messages, simulated, turns, ended) or SQL NULL.",
    )
    trajectory: Mapped[dict[str, Any] | None] = mapped_column(
        JSONB(none_as_null=True),
        doc="An agent item's run (uep_common.contract.agents.Trajectory: steps, tool calls and results, stop "
        "reason, usage) or SQL NULL.",
    )


RESCORE_STATUSES = ("pending", "completed", "failed")


class Rescore(Base):
    """A request to re-score an evaluation's stored outputs with the current metric versions, and what
    changed: items flipped (to correct / to incorrect), the summary before and after, metric versions."""

    __tablename__ = "rescores"
    __table_args__ = (CheckConstraint(in_list("status", RESCORE_STATUSES), name="ck_rescores_status"),)
    id: Mapped[uuid.UUID] = uuid_pk()
    evaluation_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("evaluations.id", ondelete="CASCADE"), nullable=False, index=True)
    tenant_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), nullable=False, doc="Owner tenant; set from the evaluation by a trigger (row-level security)."
    )
    status: Mapped[str] = mapped_column(String(20), nullable=False, default="pending")
    total_items: Mapped[int] = mapped_column(Integer, nullable=False)
    done_items: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    flipped_items: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    to_correct: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    to_incorrect: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    old_summary: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True))
    new_summary: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True))
    old_metric_versions: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    new_metric_versions: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    error: Mapped[str | None] = mapped_column(Text)
    requested_at: Mapped[datetime] = created_column()
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ScoreHistory(Base):
    """A score that a rescore replaced: kept forever, so every verdict an item ever had can be traced."""

    __tablename__ = "score_history"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    result_id: Mapped[int] = mapped_column(ForeignKey("sample_results.id", ondelete="CASCADE"), nullable=False, index=True)
    evaluation_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False, index=True)
    tenant_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), nullable=True, doc="Owner tenant; set from the evaluation by a trigger (row-level security)."
    )
    replaced_by_rescore_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("rescores.id", ondelete="CASCADE"), nullable=False)
    metric_name: Mapped[str | None] = mapped_column(String(100))
    metric_version: Mapped[str | None] = mapped_column(String(20))
    is_correct: Mapped[bool | None] = mapped_column(Boolean)
    score: Mapped[float | None] = mapped_column(Float)
    extracted: Mapped[str | None] = mapped_column(Text)
    metrics: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True))
    scored_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    replaced_at: Mapped[datetime] = created_column()


class MetricCatalogEntry(Base):
    """A metric the scorer can compute, registered by the scorer at start-up (the scorer owns the registry;
    the gateway reads this table to validate benchmark configs and to list metrics)."""

    __tablename__ = "metric_catalog"
    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    version: Mapped[str] = mapped_column(String(20), nullable=False)
    params_schema: Mapped[dict[str, Any]] = mapped_column(
        JSONB,
        nullable=False,
        default=dict,
        server_default="{}",
        doc="JSON Schema of the metric's parameters: its model's model_json_schema() (uep_common.contract.metric_params).",
    )
    source: Mapped[str] = mapped_column(Text, nullable=False, default="")
    reference_schema: Mapped[dict[str, Any]] = mapped_column(
        JSONB, nullable=False, default=dict, server_default="{}", doc="JSON Schema of the sample reference the metric reads."
    )
    registered_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now(), nullable=False
    )


class OutboxMessage(Base):
    """Transactional outbox: an event written in the same transaction as the state it announces.

    A relay publishes unpublished rows at least once (``FOR UPDATE SKIP LOCKED``, so relays in several
    replicas never publish one row concurrently) and stamps ``published_at``. A writer that publishes its
    rows itself right after its commit (the scheduler's SampleDispatched) sets ``claimed_until``: relays
    leave the row alone until then, and take it over if it is still unpublished after (migration 0013).
    """

    __tablename__ = "outbox"
    __table_args__ = (
        Index("ix_outbox_unpublished", "id", postgresql_where="published_at IS NULL"),
        Index("ix_outbox_published", "published_at", postgresql_where="published_at IS NOT NULL"),
    )
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    event_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), unique=True, nullable=False)
    event_type: Mapped[str] = mapped_column(String(100), nullable=False)
    topic: Mapped[str] = mapped_column(String(200), nullable=False)
    key: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False)
    headers: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    created_at: Mapped[datetime] = created_column()
    published_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
    claimed_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
