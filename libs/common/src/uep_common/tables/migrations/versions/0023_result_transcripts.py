"""result transcripts: a conversation item's transcript (the history given or simulated and the model's replies)
stored with its result (``sample_results.transcript``, JSONB, NULL for single-prompt items)

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-07 22:45:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("sample_results", sa.Column("transcript", postgresql.JSONB(none_as_null=True), nullable=True))


def downgrade() -> None:
    op.drop_column("sample_results", "transcript")
