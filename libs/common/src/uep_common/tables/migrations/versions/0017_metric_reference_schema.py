"""metric catalogue: the JSON Schema of the reference each metric reads (``metric_catalog.reference_schema``),
published by the scorer and checked against every row of an upload by the gateway

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-05 10:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("metric_catalog", sa.Column("reference_schema", JSONB(), nullable=False, server_default="{}"))


def downgrade() -> None:
    op.drop_column("metric_catalog", "reference_schema")
