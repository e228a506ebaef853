"""metric parameters as one JSON Schema in the metric catalogue

The catalogue's three descriptions of a metric's parameters (``params``: name → description, ``param_types``:
name → a type word, ``required_params``) become ``params_schema``, the JSON Schema of the metric's typed
parameter model (``uep_common.contract.metric_params``). The scorer upserts every row of the catalogue at
start-up, so the rows get their schema when it next starts; until then ``params_schema`` is ``{}`` (the gateway
validates parameters with the model itself, not with this column).

Revision ID: 0027
Revises: 0025
Create Date: 2026-12-07 22:40:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0027"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "metric_catalog",
        sa.Column("params_schema", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False),
    )
    op.drop_column("metric_catalog", "required_params")
    op.drop_column("metric_catalog", "param_types")
    op.drop_column("metric_catalog", "params")


def downgrade() -> None:
    op.add_column(
        "metric_catalog", sa.Column("params", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False)
    )
    op.add_column(
        "metric_catalog", sa.Column("param_types", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False)
    )
    op.add_column(
        "metric_catalog",
        sa.Column("required_params", postgresql.JSONB(astext_type=sa.Text()), server_default="[]", nullable=False),
    )
    op.drop_column("metric_catalog", "params_schema")
