"""models.backend checked in code: drop ck_models_backend, so a backend is added by registering it in the
event contract's ``Backend`` (validated by ``uep_common.tables.models.Model`` and the registry's
``ModelCreate``), without a migration

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-08 18:00:00
"""

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_constraint("ck_models_backend", "models", type_="check")


def downgrade() -> None:
    op.create_check_constraint("ck_models_backend", "models", "backend IN ('triton', 'openai_compatible')")
