"""Tables of budgets: benchmark cost profiles, caps, per-evaluation budget accounts and the spend ledger
(API keys and the other identity tables are :mod:`uep_common.tables.identity`).

Models here use :class:`uep_common.tables.base.Base`; :mod:`uep_common.tables.tables` puts them on the one metadata
Alembic sees. The cost columns of the model registry (``models.cost_unit``,
``price_*``, ``expected_*``) are on :class:`uep_common.tables.models.Model`; the arithmetic is
:mod:`uep_common.contract.costs`, the enforcement :mod:`uep_common.records.budget`.

Money columns are ``NUMERIC(24, 10)`` in the site currency (:func:`uep_common.contract.costs.currency`).
"""

from __future__ import annotations

import uuid
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Date,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    Numeric,
    String,
    Text,
    UniqueConstraint,
    func,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, Session, mapped_column

from uep_common.tables.base import Base, in_list
from uep_common.tables.models import Model

MONEY = Numeric(24, 10)
CAP_SCOPES = ("site_evaluation", "tenant_day", "benchmark", "evaluation")
SPEND_ROLES = ("inference", "judge")
SPEND_KINDS = ("reserve", "settle", "charge")


class BenchmarkCostProfile(Base):
    """Per-benchmark override of the expected size of one item (all versions of a slug), for estimates.
    A null column falls back to the model's ``expected_*``."""

    __tablename__ = "benchmark_cost_profiles"
    benchmark_slug: Mapped[str] = mapped_column(String(100), primary_key=True)
    expected_input_tokens: Mapped[int | None] = mapped_column(Integer)
    expected_output_tokens: Mapped[int | None] = mapped_column(Integer)
    expected_latency_ms: Mapped[float | None] = mapped_column(Float)
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now(), nullable=False
    )

    def as_override(self) -> dict[str, Any]:
        """``{"input_tokens", "output_tokens", "latency_ms"}`` for :meth:`uep_common.contract.costs.Expected.merged`."""
        return {
            "input_tokens": self.expected_input_tokens,
            "output_tokens": self.expected_output_tokens,
            "latency_ms": self.expected_latency_ms,
        }


class BudgetCap(Base):
    """A spending cap in the site currency.

    ``scope``: ``site_evaluation`` (default cap of every evaluation; ``target`` ''), ``benchmark`` (cap of each
    evaluation of a tenant on a benchmark slug, overriding the site default; ``target`` = tenant id + ':' +
    slug), ``evaluation`` (cap of one evaluation, overriding both; ``target`` = evaluation id) and
    ``tenant_day`` (what one tenant may spend per UTC day; ``target`` = tenant id). No row = no cap.
    """

    __tablename__ = "budget_caps"
    __table_args__ = (
        UniqueConstraint("scope", "target", name="uq_budget_caps_scope_target"),
        CheckConstraint(in_list("scope", CAP_SCOPES), name="ck_budget_caps_scope"),
        CheckConstraint("amount >= 0", name="ck_budget_caps_amount"),
    )
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    scope: Mapped[str] = mapped_column(String(20), nullable=False)
    target: Mapped[str] = mapped_column(String(200), nullable=False, default="")
    tenant_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"))
    benchmark_slug: Mapped[str | None] = mapped_column(String(100))
    evaluation_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    amount: Mapped[Decimal] = mapped_column(MONEY, nullable=False)
    updated_by: Mapped[str] = mapped_column(String(200), nullable=False, default="")
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now(), nullable=False
    )


class BudgetAccount(Base):
    """Budget state of one evaluation (one arm): its per-item estimate, fixed when it was created (so a
    reservation is released by exactly what it reserved), items reserved and settled, and the money.

    ``reserved_open`` = what is reserved for dispatched items whose score has not arrived; ``reserved_total``
    = everything ever reserved; ``settled_total`` = actual inference cost; ``judge_total`` = judge charges.
    ``exhausted_reason`` is set when a cap refused further dispatch; the evaluation then ends
    ``budget_exhausted`` once its in-flight items are in.
    """

    __tablename__ = "budget_accounts"
    evaluation_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("evaluations.id", ondelete="CASCADE"), primary_key=True
    )
    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False, index=True)
    model_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    benchmark_slug: Mapped[str] = mapped_column(String(100), nullable=False)
    cost_unit: Mapped[str] = mapped_column(String(12), nullable=False)
    per_item: Mapped[Decimal] = mapped_column(MONEY, nullable=False)
    planned_items: Mapped[int] = mapped_column(Integer, nullable=False)
    estimate: Mapped[Decimal] = mapped_column(MONEY, nullable=False)
    items_reserved: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    items_settled: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    reserved_total: Mapped[Decimal] = mapped_column(MONEY, nullable=False, default=0)
    reserved_open: Mapped[Decimal] = mapped_column(MONEY, nullable=False, default=0)
    settled_total: Mapped[Decimal] = mapped_column(MONEY, nullable=False, default=0)
    judge_total: Mapped[Decimal] = mapped_column(MONEY, nullable=False, default=0)
    exhausted_reason: Mapped[str | None] = mapped_column(Text)
    exhausted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)
    ledger_compacted_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True),
        doc="When compaction first took the evaluation's leases and ledger rows (uep_common.records.ledger_compaction); from "
        "then on a settle row of an item without a lease is dropped by a trigger (migration 0018).",
    )

    @property
    def used(self) -> Decimal:
        """What counts against the evaluation's cap: settled + judge + still reserved."""
        return Decimal(self.settled_total) + Decimal(self.judge_total) + Decimal(self.reserved_open)


class SpendEntry(Base):
    """The spend ledger (append-only while an evaluation can change; compacted after it ended, below).

    ``reserve``: ``items`` dispatched items reserved ``reserved`` (> 0) at the per-item estimate.
    ``settle``: one scored item (its ``attempt``): ``settled`` = actual cost, ``reserved`` = −(the release of
    its reservation; 0 when an earlier attempt of the item already released it). Unique per
    (evaluation, sample, repeat, arm, attempt): a redelivered score never settles twice.
    ``charge``: a judge call, ``settled`` = its cost. ``day`` is the UTC day of the entry.

    ``entries`` is NULL on a row as written. Compaction of an ended evaluation (:mod:`uep_common.records.ledger_compaction`)
    replaces rows by aggregate rows of the same ``kind``, one per (tenant, evaluation, model, role, kind, day), whose
    sums are those of the rows they replace and whose ``entries`` is how many rows that was; ``sample_id``,
    ``repeat``, ``arm`` and ``attempt`` are NULL there. Readers count entries as ``sum(coalesce(entries, 1))``.
    The trigger ``spend_ledger_late_settle`` (migration 0018) drops a settle row of an item whose lease compaction
    removed (a late duplicate score), so an aggregated item never settles twice.
    """

    __tablename__ = "spend_ledger"
    __table_args__ = (
        CheckConstraint(in_list("role", SPEND_ROLES), name="ck_spend_ledger_role"),
        CheckConstraint(in_list("kind", SPEND_KINDS), name="ck_spend_ledger_kind"),
        Index("ix_spend_ledger_tenant_day", "tenant_id", "day"),
        Index("ix_spend_ledger_evaluation", "evaluation_id"),
        Index(
            "uq_spend_ledger_settle",
            "evaluation_id",
            "sample_id",
            "repeat",
            "arm",
            "attempt",
            unique=True,
            postgresql_where=text("kind = 'settle'"),
        ),
    )
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    evaluation_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), nullable=False)
    model_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    role: Mapped[str] = mapped_column(String(20), nullable=False)
    kind: Mapped[str] = mapped_column(String(10), nullable=False)
    sample_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    repeat: Mapped[int | None] = mapped_column(Integer)
    arm: Mapped[str | None] = mapped_column(String(64))
    attempt: Mapped[int | None] = mapped_column(Integer)
    items: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    reserved: Mapped[Decimal] = mapped_column(MONEY, nullable=False, default=0)
    settled: Mapped[Decimal] = mapped_column(MONEY, nullable=False, default=0)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    latency_ms: Mapped[float | None] = mapped_column(Float)
    day: Mapped[date] = mapped_column(Date, nullable=False, server_default=text("(now() AT TIME ZONE 'utc')::date"))
    occurred_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)
    entries: Mapped[int | None] = mapped_column(
        Integer, doc="NULL: one entry as written; a number: an aggregate row standing for that many entries (0018)."
    )


def cap_target(
    scope: str, tenant_id: uuid.UUID | None = None, benchmark_slug: str | None = None, evaluation_id: uuid.UUID | None = None
) -> str:
    """The unique ``target`` of a cap row of ``scope`` (see :class:`BudgetCap`). Raises ValueError."""
    if scope == "site_evaluation":
        return ""
    if scope == "tenant_day" and tenant_id:
        return str(tenant_id)
    if scope == "benchmark" and tenant_id and benchmark_slug:
        return f"{tenant_id}:{benchmark_slug}"
    if scope == "evaluation" and evaluation_id:
        return str(evaluation_id)
    raise ValueError(f"incomplete target for cap scope {scope!r}")


LOCAL_MODEL_COSTS = {
    # name: (price per GPU-second, expected latency per item in ms). 0.0008 USD/GPU-s ≈ 2.88 USD per GPU-hour,
    # an on-demand data-centre GPU price; latencies as measured on the local CPU Triton (SmolLM2 ~3 s/answer).
    "smollm2-135m-instruct": (Decimal("0.0008"), 3000.0),
    "uep-oracle": (Decimal("0.0008"), 5.0),
    "uep-bench-echo": (Decimal("0.0008"), 5.0),
}
BENCHMARK_COST_PROFILES = {
    # slug: (expected input tokens, expected output tokens) per item, for estimates
    "mmlu": (350, 16),
    "gsm8k": (150, 256),
    "humaneval": (200, 384),
    "hellaswag": (200, 16),
    "truthfulqa-mc1": (200, 16),
    "gsm8k-judged": (150, 256),
}


def seed_costs(session: Session) -> list[str]:
    """Seed the cost model (sync ``Session``): a per-GPU-second price for the local models that have no
    cost model yet (``cost_unit`` 'none'), and the expected item sizes of the built-in benchmarks that have
    no profile. Values an admin set are never overwritten. Returns what was added."""
    added = []
    for m in session.scalars(select(Model).where(Model.name.in_(list(LOCAL_MODEL_COSTS)), Model.cost_unit == "none")):
        m.cost_unit = "gpu_second"
        m.price_per_gpu_second, m.expected_latency_ms = LOCAL_MODEL_COSTS[m.name]
        added.append(f"cost of {m.name}")
    for slug, (tin, tout) in BENCHMARK_COST_PROFILES.items():
        if session.get(BenchmarkCostProfile, slug) is None:
            session.add(BenchmarkCostProfile(benchmark_slug=slug, expected_input_tokens=tin, expected_output_tokens=tout))
            added.append(f"cost profile {slug}")
    return added
