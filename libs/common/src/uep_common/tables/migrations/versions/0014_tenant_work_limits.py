"""tenant work limits: per-tenant overrides of the site's work limits (items per evaluation, items queued,
evaluations created per minute, minimum schedule interval); null = the site default (uep_common.records.creation)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02 10:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

COLUMNS = ("max_items_per_evaluation", "max_queued_items", "max_evaluations_per_minute", "min_schedule_interval_s")


def upgrade() -> None:
    for name in COLUMNS:
        op.add_column("tenants", sa.Column(name, sa.Integer(), nullable=True))
        op.create_check_constraint(f"ck_tenants_{name}", "tenants", f"{name} IS NULL OR {name} >= 1")


def downgrade() -> None:
    for name in COLUMNS:
        op.drop_constraint(f"ck_tenants_{name}", "tenants", type_="check")
        op.drop_column("tenants", name)
