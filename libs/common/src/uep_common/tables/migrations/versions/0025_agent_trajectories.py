"""agent trajectories: ``sample_results.trajectory``, an agent item's steps, tool calls and results, stop reason
and usage (``uep_common.contract.agents.Trajectory``; SQL NULL for other items)

Revision ID: 0025
Revises: 0023
Create Date: 2026-12-07 22:30:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0025"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("sample_results", sa.Column("trajectory", JSONB()))


def downgrade() -> None:
    op.drop_column("sample_results", "trajectory")
