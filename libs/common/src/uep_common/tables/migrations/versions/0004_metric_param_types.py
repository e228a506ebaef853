"""metric parameter types in the metric catalogue

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 11:30:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "metric_catalog", sa.Column("param_types", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False)
    )
    op.add_column(
        "metric_catalog",
        sa.Column("required_params", postgresql.JSONB(astext_type=sa.Text()), server_default="[]", nullable=False),
    )


def downgrade() -> None:
    op.drop_column("metric_catalog", "required_params")
    op.drop_column("metric_catalog", "param_types")
