"""cost model, caps, reservations, spend, API keys and roles (scheduler issue: budgets)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30 12:00:00
"""
from alembic import op  # noqa: F401
import sqlalchemy as sa  # noqa: F401

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
