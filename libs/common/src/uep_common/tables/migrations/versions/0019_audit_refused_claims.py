"""audit log of refused claims: a valid credential refused for naming another tenant (``X-UEP-Tenant``) or
claiming site admin (``X-UEP-Site-Admin``) is recorded as itself (``audit_log.api_key_id``) with what it
claimed (``attempted_tenant``, ``attempted_tenant_id``, ``site_admin_claim``); a policy lets the admins of the
tenant it tried read such rows too (``uep_gateway.audit``)

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-08 12:00:00
"""

import sqlalchemy as sa
from alembic import op

from uep_common.tables.rls import SCOPED_ROLE

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("audit_log", sa.Column("api_key_id", sa.UUID(), sa.ForeignKey("api_keys.id", ondelete="SET NULL")))
    op.add_column("audit_log", sa.Column("attempted_tenant", sa.String(64)))
    op.add_column("audit_log", sa.Column("attempted_tenant_id", sa.UUID(), sa.ForeignKey("tenants.id", ondelete="SET NULL")))
    op.add_column("audit_log", sa.Column("site_admin_claim", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.create_index(
        "ix_audit_log_attempted_tenant_id",
        "audit_log",
        ["attempted_tenant_id", "id"],
        postgresql_where=sa.text("attempted_tenant_id IS NOT NULL"),
    )
    op.execute(
        f"CREATE POLICY attempted_tenant_read ON audit_log FOR SELECT TO {SCOPED_ROLE} "
        "USING (attempted_tenant_id = uep_current_tenant())"
    )


def downgrade() -> None:
    op.execute("DROP POLICY IF EXISTS attempted_tenant_read ON audit_log")
    op.drop_index("ix_audit_log_attempted_tenant_id", table_name="audit_log")
    op.drop_column("audit_log", "site_admin_claim")
    op.drop_column("audit_log", "attempted_tenant_id")
    op.drop_column("audit_log", "attempted_tenant")
    op.drop_column("audit_log", "api_key_id")
