"""model registry: model kind (generation, classification, ranking, embedding), the contract it speaks and its
kind-specific spec, owner tenant and visibility, deactivation, the endpoint's API key (encrypted or by
reference); (name, version) unique among site models and within each tenant; row-level security on models;
``sample_results.prediction`` (a classifier's or ranker's structured answer); an index of published outbox rows by
publication time (outbox retention)

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04 10:00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from uep_common.tables.rls import SCOPED_ROLE

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

KINDS = "kind IN ('generation', 'classification', 'ranking', 'embedding')"


def upgrade() -> None:
    op.add_column("models", sa.Column("kind", sa.String(20), nullable=False, server_default="generation"))
    op.add_column("models", sa.Column("contract", sa.String(40), nullable=False, server_default="uep"))
    op.add_column("models", sa.Column("spec", JSONB(), nullable=False, server_default="{}"))
    op.add_column("models", sa.Column("owner_tenant_id", sa.UUID(), sa.ForeignKey("tenants.id", ondelete="CASCADE")))
    op.add_column("models", sa.Column("visibility", sa.String(10), nullable=False, server_default="private"))
    op.add_column("models", sa.Column("active", sa.Boolean(), nullable=False, server_default=sa.true()))
    op.add_column("models", sa.Column("api_key_encrypted", sa.LargeBinary()))
    op.add_column("models", sa.Column("api_key_ref", sa.String(200)))
    op.add_column("models", sa.Column("created_by", sa.String(200), nullable=False, server_default=""))
    op.create_check_constraint("ck_models_kind", "models", KINDS)
    op.create_check_constraint("ck_models_visibility", "models", "visibility IN ('private', 'shared')")
    op.drop_constraint("uq_models_name_version", "models", type_="unique")
    op.create_index(
        "uq_models_site_name_version",
        "models",
        ["name", "version"],
        unique=True,
        postgresql_where=sa.text("owner_tenant_id IS NULL"),
    )
    op.create_index(
        "uq_models_owner_name_version",
        "models",
        ["owner_tenant_id", "name", "version"],
        unique=True,
        postgresql_where=sa.text("owner_tenant_id IS NOT NULL"),
    )
    visible = "owner_tenant_id IS NULL OR visibility = 'shared' OR owner_tenant_id = uep_current_tenant()"
    op.execute("ALTER TABLE models ENABLE ROW LEVEL SECURITY")
    op.execute(f"CREATE POLICY catalogue_read ON models FOR SELECT TO {SCOPED_ROLE} USING ({visible})")
    op.execute(
        f"CREATE POLICY owner_write ON models TO {SCOPED_ROLE} "
        "USING (owner_tenant_id = uep_current_tenant()) WITH CHECK (owner_tenant_id = uep_current_tenant())"
    )
    op.add_column("sample_results", sa.Column("prediction", JSONB()))
    op.create_index("ix_outbox_published", "outbox", ["published_at"], postgresql_where=sa.text("published_at IS NOT NULL"))


def downgrade() -> None:
    op.drop_index("ix_outbox_published", "outbox")
    op.drop_column("sample_results", "prediction")
    op.execute("DROP POLICY IF EXISTS owner_write ON models")
    op.execute("DROP POLICY IF EXISTS catalogue_read ON models")
    op.execute("ALTER TABLE models DISABLE ROW LEVEL SECURITY")
    op.drop_index("uq_models_owner_name_version", "models")
    op.drop_index("uq_models_site_name_version", "models")
    op.create_unique_constraint("uq_models_name_version", "models", ["name", "version"])
    op.drop_constraint("ck_models_visibility", "models", type_="check")
    op.drop_constraint("ck_models_kind", "models", type_="check")
    for column in (
        "created_by",
        "api_key_ref",
        "api_key_encrypted",
        "active",
        "visibility",
        "owner_tenant_id",
        "spec",
        "contract",
        "kind",
    ):
        op.drop_column("models", column)
