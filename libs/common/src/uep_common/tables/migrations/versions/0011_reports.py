"""reports, baselines, fingerprints (reporter)

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-30 12:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql as pg

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("evaluations", sa.Column("pinned", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_index("ix_evaluations_pinned", "evaluations", ["model_id"], postgresql_where=sa.text("pinned"))
    op.create_table(
        "artifacts",
        sa.Column("id", pg.UUID(as_uuid=True), primary_key=True),
        sa.Column("sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("media_type", sa.String(100), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
    )
    op.create_table(
        "artifact_refs",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column("artifact_id", pg.UUID(as_uuid=True), sa.ForeignKey("artifacts.id", ondelete="CASCADE"), nullable=False),
        sa.Column("evaluation_id", pg.UUID(as_uuid=True), sa.ForeignKey("evaluations.id", ondelete="CASCADE"), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.UniqueConstraint("artifact_id", "evaluation_id", "kind", name="uq_artifact_refs"),
    )
    op.create_index("ix_artifact_refs_evaluation", "artifact_refs", ["evaluation_id"])
    op.create_table(
        "reports",
        sa.Column("id", pg.UUID(as_uuid=True), primary_key=True),
        sa.Column("evaluation_id", pg.UUID(as_uuid=True), sa.ForeignKey("evaluations.id", ondelete="CASCADE"), nullable=False),
        sa.Column("status", sa.String(10), nullable=False),
        sa.Column("trigger", sa.String(20), nullable=False),
        sa.Column("baseline_evaluation_id", pg.UUID(as_uuid=True)),
        sa.Column("schema_version", sa.String(20)),
        sa.Column("html_artifact_id", pg.UUID(as_uuid=True), sa.ForeignKey("artifacts.id", ondelete="SET NULL")),
        sa.Column("json_artifact_id", pg.UUID(as_uuid=True), sa.ForeignKey("artifacts.id", ondelete="SET NULL")),
        sa.Column("pdf_artifact_id", pg.UUID(as_uuid=True), sa.ForeignKey("artifacts.id", ondelete="SET NULL")),
        sa.Column("pdf_error", sa.Text()),
        sa.Column("build_ms", pg.JSONB(), nullable=False, server_default="{}"),
        sa.Column("error", sa.Text()),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("completed_at", sa.DateTime(timezone=True)),
        sa.CheckConstraint("status IN ('pending', 'ready', 'failed')", name="ck_reports_status"),
    )
    op.create_index("ix_reports_evaluation_created", "reports", ["evaluation_id", "created_at"])


def downgrade() -> None:
    op.drop_table("reports")
    op.drop_table("artifact_refs")
    op.drop_table("artifacts")
    op.drop_index("ix_evaluations_pinned", table_name="evaluations")
    op.drop_column("evaluations", "pinned")
