"""member invitations: a tenant admin invites a username with a role; the membership is made only when the
user signed in under that name accepts (``uep_gateway.api.invitations``). Tenant-owned under row-level
security like ``memberships``.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-09 12:00:00
"""

import sqlalchemy as sa
from alembic import op

from uep_common.tables.rls import SCOPED_ROLE

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "member_invitations",
        sa.Column("id", sa.UUID(), primary_key=True),
        sa.Column("tenant_id", sa.UUID(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False),
        sa.Column("username", sa.String(64), nullable=False),
        sa.Column("role", sa.String(10), nullable=False),
        sa.Column("invited_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("tenant_id", "username", name="uq_member_invitations_tenant_username"),
        sa.CheckConstraint("role IN ('admin', 'builder', 'viewer', 'annotator')", name="ck_member_invitations_role"),
    )
    op.create_index("ix_member_invitations_username", "member_invitations", ["username"])
    own = "tenant_id = uep_current_tenant()"
    op.execute("ALTER TABLE member_invitations ENABLE ROW LEVEL SECURITY")
    op.execute(f"CREATE POLICY tenant_isolation ON member_invitations TO {SCOPED_ROLE} USING ({own}) WITH CHECK ({own})")


def downgrade() -> None:
    op.drop_table("member_invitations")
