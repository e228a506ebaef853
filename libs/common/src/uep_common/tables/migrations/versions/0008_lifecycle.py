"""interrupted/retry/stop, dead-letter records (scheduler: lifecycle and faults)

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30 12:00:00
"""

from collections.abc import Iterable

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# Every status after 0007 (budget_exhausted) and this revision (interrupted, stopped).
STATUSES = ("pending", "running", "completed", "failed", "cancelled", "budget_exhausted", "interrupted", "stopped")
BEFORE = ("pending", "running", "completed", "failed", "cancelled", "budget_exhausted")


def _status_check(values: Iterable[str]) -> str:
    return "status IN (" + ", ".join(f"'{v}'" for v in values) + ")"


def upgrade() -> None:
    op.execute("ALTER TABLE evaluations DROP CONSTRAINT IF EXISTS ck_evaluations_status")
    op.execute(f"ALTER TABLE evaluations ADD CONSTRAINT ck_evaluations_status CHECK ({_status_check(STATUSES)})")
    op.add_column("evaluations", sa.Column("resumed_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("sample_leases", sa.Column("attempt_base", sa.Integer(), server_default="0", nullable=False))
    op.add_column("sample_leases", sa.Column("final_deadline", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "ix_sample_leases_final_deadline",
        "sample_leases",
        ["final_deadline"],
        postgresql_where=sa.text("final_deadline IS NOT NULL"),
    )

    op.create_table(
        "retired_results",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column("result_id", sa.BigInteger(), nullable=False),
        sa.Column("evaluation_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("sample_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("repeat", sa.Integer(), nullable=False),
        sa.Column("arm", sa.String(64), nullable=False),
        sa.Column("output", sa.Text()),
        sa.Column("extracted", sa.Text()),
        sa.Column("is_correct", sa.Boolean()),
        sa.Column("score", sa.Float()),
        sa.Column("metric_name", sa.String(100)),
        sa.Column("metric_version", sa.String(20)),
        sa.Column("metrics", postgresql.JSONB(), nullable=False, server_default="{}"),
        sa.Column("latency_ms", sa.Float()),
        sa.Column("prompt_tokens", sa.Integer()),
        sa.Column("completion_tokens", sa.Integer()),
        sa.Column("error", postgresql.JSONB()),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("score_event_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("scored_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.String(20), nullable=False),
        sa.Column("retry_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("retired_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    )
    op.create_index("ix_retired_results_evaluation_id", "retired_results", ["evaluation_id"])
    op.create_index("ix_retired_results_retry_id", "retired_results", ["retry_id"])

    op.create_table(
        "dead_letters",
        sa.Column("id", postgresql.UUID(as_uuid=True), primary_key=True),
        sa.Column("dedupe_key", sa.String(64), nullable=False, unique=True),
        sa.Column("source_topic", sa.String(200), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("event_type", sa.String(100)),
        sa.Column("evaluation_id", postgresql.UUID(as_uuid=True)),
        sa.Column("item_key", sa.String(200)),
        sa.Column("key", sa.LargeBinary()),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("headers", postgresql.JSONB(), nullable=False, server_default="{}"),
        sa.Column("first_seen_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("redrive_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_redriven_at", sa.DateTime(timezone=True)),
    )
    op.create_index("ix_dead_letters_evaluation_id", "dead_letters", ["evaluation_id"])
    op.create_index("ix_dead_letters_first_seen", "dead_letters", ["first_seen_at", "id"])

    op.create_table(
        "scheduler_instances",
        sa.Column("id", postgresql.UUID(as_uuid=True), primary_key=True),
        sa.Column("lock_key", sa.Integer(), sa.Identity(always=False), nullable=False, unique=True),
        sa.Column("hostname", sa.String(200), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("scheduler_instances")
    op.drop_table("dead_letters")
    op.drop_table("retired_results")
    op.drop_index("ix_sample_leases_final_deadline", table_name="sample_leases")
    op.drop_column("sample_leases", "final_deadline")
    op.drop_column("sample_leases", "attempt_base")
    op.drop_column("evaluations", "resumed_at")
    op.execute("UPDATE evaluations SET status = 'failed' WHERE status IN ('interrupted', 'stopped')")
    op.execute("ALTER TABLE evaluations DROP CONSTRAINT IF EXISTS ck_evaluations_status")
    op.execute(f"ALTER TABLE evaluations ADD CONSTRAINT ck_evaluations_status CHECK ({_status_check(BEFORE)})")
