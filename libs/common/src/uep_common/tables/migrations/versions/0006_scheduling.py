"""priority classes, fair queuing, arms, schedules (scheduler)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30 12:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "schedules",
        sa.Column("id", postgresql.UUID(as_uuid=True), primary_key=True),
        sa.Column("tenant_id", postgresql.UUID(as_uuid=True), sa.ForeignKey("tenants.id"), nullable=False),
        sa.Column("name", sa.String(200), nullable=False, server_default=""),
        sa.Column("cron", sa.String(200), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("benchmark", sa.String(100), nullable=False),
        sa.Column("options", postgresql.JSONB(), nullable=False, server_default="{}"),
        sa.Column("active", sa.Boolean(), nullable=False, server_default=sa.true()),
        sa.Column("next_run_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True)),
    )
    op.create_index("ix_schedules_tenant_id", "schedules", ["tenant_id"])
    op.create_index("ix_schedules_due", "schedules", ["next_run_at"], postgresql_where=sa.text("active AND deleted_at IS NULL"))

    op.add_column("evaluations", sa.Column("batch_id", postgresql.UUID(as_uuid=True), nullable=True))
    op.add_column("evaluations", sa.Column("experiment_id", postgresql.UUID(as_uuid=True), nullable=True))
    op.add_column("evaluations", sa.Column("arm", sa.String(64), nullable=False, server_default="main"))
    op.add_column(
        "evaluations",
        sa.Column(
            "schedule_id", postgresql.UUID(as_uuid=True), sa.ForeignKey("schedules.id", ondelete="SET NULL"), nullable=True
        ),
    )
    op.create_index("ix_evaluations_batch_id", "evaluations", ["batch_id"], postgresql_where=sa.text("batch_id IS NOT NULL"))
    op.create_index(
        "ix_evaluations_experiment_id", "evaluations", ["experiment_id"], postgresql_where=sa.text("experiment_id IS NOT NULL")
    )
    op.create_index(
        "ix_evaluations_schedule_id", "evaluations", ["schedule_id"], postgresql_where=sa.text("schedule_id IS NOT NULL")
    )

    op.create_table(
        "schedule_runs",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column(
            "schedule_id", postgresql.UUID(as_uuid=True), sa.ForeignKey("schedules.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("scheduled_for", sa.DateTime(timezone=True), nullable=False),
        sa.Column("evaluation_id", postgresql.UUID(as_uuid=True), sa.ForeignKey("evaluations.id", ondelete="SET NULL")),
        sa.Column("error", sa.Text()),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.UniqueConstraint("schedule_id", "scheduled_for", name="uq_schedule_runs_due"),
    )

    op.create_table(
        "sched_clock",
        sa.Column("id", sa.SmallInteger(), primary_key=True),
        sa.Column("vtime", sa.Float(), nullable=False, server_default="0"),
    )
    op.execute("INSERT INTO sched_clock (id, vtime) VALUES (1, 0)")
    op.create_table(
        "sched_tenants",
        sa.Column("tenant_id", postgresql.UUID(as_uuid=True), sa.ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("weight", sa.Float(), nullable=False, server_default="1"),
        sa.Column("vfinish", sa.Float(), nullable=False, server_default="0"),
        sa.Column("vtime", sa.Float(), nullable=False, server_default="0"),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.CheckConstraint("weight > 0", name="ck_sched_tenants_weight"),
    )
    op.create_table(
        "sched_flows",
        sa.Column("flow_id", postgresql.UUID(as_uuid=True), primary_key=True),
        sa.Column("tenant_id", postgresql.UUID(as_uuid=True), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False),
        sa.Column("vfinish", sa.Float(), nullable=False, server_default="0"),
        sa.Column("last_dispatch_at", sa.DateTime(timezone=True)),
        sa.Column("dispatched", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    )
    op.create_table(
        "sched_models",
        sa.Column("model_id", postgresql.UUID(as_uuid=True), sa.ForeignKey("models.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("limit", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    )
    # open leases, counted by every allocation pass (per evaluation, per model, globally)
    op.create_index(
        "ix_sample_leases_leased",
        "sample_leases",
        ["evaluation_id", "lease_expires_at"],
        postgresql_where=sa.text("state = 'leased'"),
    )


def downgrade() -> None:
    op.drop_index("ix_sample_leases_leased", table_name="sample_leases")
    op.drop_table("sched_models")
    op.drop_table("sched_flows")
    op.drop_table("sched_tenants")
    op.drop_table("sched_clock")
    op.drop_table("schedule_runs")
    op.drop_index("ix_evaluations_schedule_id", table_name="evaluations")
    op.drop_index("ix_evaluations_experiment_id", table_name="evaluations")
    op.drop_index("ix_evaluations_batch_id", table_name="evaluations")
    op.drop_column("evaluations", "schedule_id")
    op.drop_column("evaluations", "arm")
    op.drop_column("evaluations", "experiment_id")
    op.drop_column("evaluations", "batch_id")
    op.drop_index("ix_schedules_due", table_name="schedules")
    op.drop_index("ix_schedules_tenant_id", table_name="schedules")
    op.drop_table("schedules")
