"""outbox claims: a writer that publishes its rows itself right after commit claims them (scheduler)

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-30 19:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("outbox", sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("outbox", "claimed_until")
