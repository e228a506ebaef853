"""cost model, caps, reservations, spend, API keys and roles (budgets)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30 12:00:00
"""

from collections.abc import Iterable

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

MONEY = sa.Numeric(24, 10)
STATUSES_BEFORE = ("pending", "running", "completed", "failed", "cancelled")


def _status_check(statuses: Iterable[str]) -> str:
    return "status IN (" + ", ".join(f"'{s}'" for s in statuses) + ")"


def upgrade() -> None:
    # evaluations may end budget_exhausted: extend whatever the status check allows at this point
    bind = op.get_bind()
    current = bind.execute(
        sa.text("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'ck_evaluations_status'")
    ).scalar()
    if current is None or "budget_exhausted" not in current:
        import re

        statuses = re.findall(r"'([a-z_]+)'", current or "") or list(STATUSES_BEFORE)
        op.drop_constraint("ck_evaluations_status", "evaluations", type_="check")
        op.create_check_constraint("ck_evaluations_status", "evaluations", _status_check([*statuses, "budget_exhausted"]))

    # cost model in the model registry
    op.add_column("models", sa.Column("cost_unit", sa.String(12), nullable=False, server_default="none"))
    for col in ("price_per_1k_input_tokens", "price_per_1k_output_tokens", "price_per_gpu_second", "price_per_call"):
        op.add_column("models", sa.Column(col, MONEY, nullable=False, server_default="0"))
    op.add_column("models", sa.Column("expected_input_tokens", sa.Integer(), nullable=False, server_default="500"))
    op.add_column("models", sa.Column("expected_output_tokens", sa.Integer(), nullable=False, server_default="256"))
    op.add_column("models", sa.Column("expected_latency_ms", sa.Float(), nullable=False, server_default="1000"))
    op.create_check_constraint("ck_models_cost_unit", "models", "cost_unit IN ('none', 'tokens', 'gpu_second', 'call')")

    op.create_table(
        "benchmark_cost_profiles",
        sa.Column("benchmark_slug", sa.String(100), primary_key=True),
        sa.Column("expected_input_tokens", sa.Integer()),
        sa.Column("expected_output_tokens", sa.Integer()),
        sa.Column("expected_latency_ms", sa.Float()),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    )
    op.create_table(
        "budget_caps",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column("scope", sa.String(20), nullable=False),
        sa.Column("target", sa.String(200), nullable=False, server_default=""),
        sa.Column("tenant_id", postgresql.UUID(as_uuid=True), sa.ForeignKey("tenants.id", ondelete="CASCADE")),
        sa.Column("benchmark_slug", sa.String(100)),
        sa.Column("evaluation_id", postgresql.UUID(as_uuid=True)),
        sa.Column("amount", MONEY, nullable=False),
        sa.Column("updated_by", sa.String(200), nullable=False, server_default=""),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.UniqueConstraint("scope", "target", name="uq_budget_caps_scope_target"),
        sa.CheckConstraint("scope IN ('site_evaluation', 'tenant_day', 'benchmark', 'evaluation')", name="ck_budget_caps_scope"),
        sa.CheckConstraint("amount >= 0", name="ck_budget_caps_amount"),
    )
    op.create_table(
        "budget_accounts",
        sa.Column(
            "evaluation_id", postgresql.UUID(as_uuid=True), sa.ForeignKey("evaluations.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("tenant_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("model_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("benchmark_slug", sa.String(100), nullable=False),
        sa.Column("cost_unit", sa.String(12), nullable=False),
        sa.Column("per_item", MONEY, nullable=False),
        sa.Column("planned_items", sa.Integer(), nullable=False),
        sa.Column("estimate", MONEY, nullable=False),
        sa.Column("items_reserved", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("items_settled", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("reserved_total", MONEY, nullable=False, server_default="0"),
        sa.Column("reserved_open", MONEY, nullable=False, server_default="0"),
        sa.Column("settled_total", MONEY, nullable=False, server_default="0"),
        sa.Column("judge_total", MONEY, nullable=False, server_default="0"),
        sa.Column("exhausted_reason", sa.Text()),
        sa.Column("exhausted_at", sa.DateTime(timezone=True)),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    )
    op.create_index("ix_budget_accounts_tenant_id", "budget_accounts", ["tenant_id"])
    op.create_table(
        "spend_ledger",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column("tenant_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("evaluation_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("model_id", postgresql.UUID(as_uuid=True)),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("sample_id", postgresql.UUID(as_uuid=True)),
        sa.Column("repeat", sa.Integer()),
        sa.Column("arm", sa.String(64)),
        sa.Column("attempt", sa.Integer()),
        sa.Column("items", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("reserved", MONEY, nullable=False, server_default="0"),
        sa.Column("settled", MONEY, nullable=False, server_default="0"),
        sa.Column("prompt_tokens", sa.Integer()),
        sa.Column("completion_tokens", sa.Integer()),
        sa.Column("latency_ms", sa.Float()),
        sa.Column("day", sa.Date(), nullable=False, server_default=sa.text("(now() AT TIME ZONE 'utc')::date")),
        sa.Column("occurred_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.CheckConstraint("role IN ('inference', 'judge')", name="ck_spend_ledger_role"),
        sa.CheckConstraint("kind IN ('reserve', 'settle', 'charge')", name="ck_spend_ledger_kind"),
    )
    op.create_index("ix_spend_ledger_tenant_day", "spend_ledger", ["tenant_id", "day"])
    op.create_index("ix_spend_ledger_evaluation", "spend_ledger", ["evaluation_id"])
    op.create_index(
        "uq_spend_ledger_settle",
        "spend_ledger",
        ["evaluation_id", "sample_id", "repeat", "arm", "attempt"],
        unique=True,
        postgresql_where=sa.text("kind = 'settle'"),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", postgresql.UUID(as_uuid=True), primary_key=True),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("key_prefix", sa.String(12), nullable=False),
        sa.Column("tenant_id", postgresql.UUID(as_uuid=True), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False),
        sa.Column("role", sa.String(10), nullable=False),
        sa.Column("name", sa.String(200), nullable=False, server_default=""),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True)),
        sa.CheckConstraint("role IN ('admin', 'builder', 'viewer')", name="ck_api_keys_role"),
    )


def downgrade() -> None:
    op.drop_table("api_keys")
    op.drop_index("uq_spend_ledger_settle", table_name="spend_ledger")
    op.drop_index("ix_spend_ledger_evaluation", table_name="spend_ledger")
    op.drop_index("ix_spend_ledger_tenant_day", table_name="spend_ledger")
    op.drop_table("spend_ledger")
    op.drop_index("ix_budget_accounts_tenant_id", table_name="budget_accounts")
    op.drop_table("budget_accounts")
    op.drop_table("budget_caps")
    op.drop_table("benchmark_cost_profiles")
    op.drop_constraint("ck_models_cost_unit", "models", type_="check")
    for col in (
        "expected_latency_ms",
        "expected_output_tokens",
        "expected_input_tokens",
        "price_per_call",
        "price_per_gpu_second",
        "price_per_1k_output_tokens",
        "price_per_1k_input_tokens",
        "cost_unit",
    ):
        op.drop_column("models", col)
    op.execute("UPDATE evaluations SET status = 'failed' WHERE status = 'budget_exhausted'")
    current = (
        op.get_bind()
        .execute(sa.text("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'ck_evaluations_status'"))
        .scalar()
        or ""
    )
    import re

    statuses = [s for s in re.findall(r"'([a-z_]+)'", current) if s != "budget_exhausted"] or list(STATUSES_BEFORE)
    op.drop_constraint("ck_evaluations_status", "evaluations", type_="check")
    op.create_check_constraint("ck_evaluations_status", "evaluations", _status_check(statuses))
