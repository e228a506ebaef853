"""count results discarded after a cancel

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 11:35:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("evaluations", sa.Column("discarded_items", sa.Integer(), server_default="0", nullable=False))


def downgrade() -> None:
    op.drop_column("evaluations", "discarded_items")
