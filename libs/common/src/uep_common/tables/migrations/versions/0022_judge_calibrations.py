"""judge calibrations: a judge's agreement with people on the questions of an annotation task, kept over time
(``judge_calibrations``, tenant-owned under row-level security like the other direct tables)

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-10 12:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from uep_common.tables.rls import SCOPED_ROLE

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "judge_calibrations",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("task_id", sa.UUID(), nullable=False),
        sa.Column("evaluation_id", sa.UUID(), nullable=False),
        sa.Column("judge_model_name", sa.String(length=200), nullable=False),
        sa.Column("template", sa.String(length=100), nullable=False),
        sa.Column("template_version", sa.String(length=40), nullable=False),
        sa.Column("question", sa.String(length=100), nullable=False),
        sa.Column("question_type", sa.String(length=20), nullable=False),
        sa.Column("items", sa.Integer(), nullable=False),
        sa.Column("agreement", sa.Float(), nullable=True),
        sa.Column("alpha", sa.Float(), nullable=True),
        sa.Column("statistics", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["task_id"], ["annotation_tasks.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["evaluation_id"], ["evaluations.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_judge_calibrations_judge", "judge_calibrations", ["tenant_id", "judge_model_name", "computed_at"])
    op.create_index("ix_judge_calibrations_task", "judge_calibrations", ["task_id"])
    own = "tenant_id = uep_current_tenant()"
    op.execute("ALTER TABLE judge_calibrations ENABLE ROW LEVEL SECURITY")
    op.execute(f"CREATE POLICY tenant_isolation ON judge_calibrations TO {SCOPED_ROLE} USING ({own}) WITH CHECK ({own})")


def downgrade() -> None:
    op.drop_table("judge_calibrations")
