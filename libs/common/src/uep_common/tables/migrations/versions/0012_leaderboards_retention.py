"""leaderboard snapshots, retention marks, artifacts (reporter)

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-30 12:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("evaluations", sa.Column("details_cleaned_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "leaderboard_scores",
        sa.Column(
            "evaluation_id", postgresql.UUID(as_uuid=True), sa.ForeignKey("evaluations.id", ondelete="CASCADE"), primary_key=True
        ),
        sa.Column("benchmark_slug", sa.String(100), nullable=False),
        sa.Column("benchmark_version", sa.String(64), nullable=False),
        sa.Column("score_type", sa.String(100), nullable=False),
        sa.Column("model_name", sa.String(200), nullable=False),
        sa.Column("model_version", sa.String(100), nullable=False),
        sa.Column("score", sa.Float()),
        sa.Column("ci_low", sa.Float()),
        sa.Column("ci_high", sa.Float()),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("method", sa.String(40), nullable=False),
        sa.Column("method_detail", sa.Text(), nullable=False, server_default=""),
        sa.Column("evaluated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.CheckConstraint("method IN ('wilson', 'bootstrap', 'none')", name="ck_leaderboard_scores_method"),
    )
    op.create_index(
        "ix_leaderboard_scores_board",
        "leaderboard_scores",
        ["benchmark_slug", "score_type", "model_name", "model_version", "evaluated_at"],
    )
    op.create_table(
        "leaderboard_snapshots",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column("benchmark_slug", sa.String(100), nullable=False),
        sa.Column("score_type", sa.String(100), nullable=False),
        sa.Column("evaluation_id", postgresql.UUID(as_uuid=True)),
        sa.Column("entries", postgresql.JSONB(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    )
    op.create_index("ix_leaderboard_snapshots_board", "leaderboard_snapshots", ["benchmark_slug", "score_type", "id"])
    op.create_table(
        "retention_runs",
        sa.Column("id", postgresql.UUID(as_uuid=True), primary_key=True),
        sa.Column("trigger", sa.String(20), nullable=False),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("keep_last", sa.Integer()),
        sa.Column("scope", postgresql.JSONB(), nullable=False, server_default="{}"),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("result", postgresql.JSONB()),
        sa.Column("error", sa.Text()),
        sa.Column("requested_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True)),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.CheckConstraint(
            "status IN ('requested', 'running', 'completed', 'failed', 'skipped')", name="ck_retention_runs_status"
        ),
    )
    op.create_index(
        "ix_retention_runs_requested", "retention_runs", ["requested_at"], postgresql_where=sa.text("status = 'requested'")
    )


def downgrade() -> None:
    op.drop_index("ix_retention_runs_requested", table_name="retention_runs")
    op.drop_table("retention_runs")
    op.drop_index("ix_leaderboard_snapshots_board", table_name="leaderboard_snapshots")
    op.drop_table("leaderboard_snapshots")
    op.drop_index("ix_leaderboard_scores_board", table_name="leaderboard_scores")
    op.drop_table("leaderboard_scores")
    op.drop_column("evaluations", "details_cleaned_at")
