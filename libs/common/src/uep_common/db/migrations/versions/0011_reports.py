"""reports, baselines, fingerprints (reporter issue)

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-30 12:00:00
"""
from alembic import op  # noqa: F401
import sqlalchemy as sa  # noqa: F401

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
