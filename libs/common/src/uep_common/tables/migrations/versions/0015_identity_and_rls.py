"""identity and row-level security: users, memberships, sessions, audit log; API keys with expiry, last use
and the annotator role; benchmark owners and visibility; annotators per tenant; ``tenant_id`` on every
tenant-owned child table (filled by triggers) and row-level security policies keyed on ``uep.tenant_id``

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03 10:00:00
"""

import sqlalchemy as sa
from alembic import op

from uep_common.tables.rls import (
    CROSS_TENANT_ROLE,
    DIRECT_TABLES,
    FROM_EVALUATION,
    FROM_SCHEDULE,
    FROM_TASK,
    INVITATION_TABLES,
    LATER_DIRECT_TABLES,
    REGISTRY_TABLES,
    SCOPED_ROLE,
    TENANT_OWNED,
    TENANT_SETTING,
)

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

ROLES_CHECK = "role IN ('admin', 'builder', 'viewer', 'annotator')"
NOT_NULL_CHILDREN = {
    "sample_leases",
    "sample_results",
    "rescores",
    "artifact_refs",
    "reports",
    "judge_verdicts",
    "judge_items",
    "hybrid_routes",
    "leaderboard_scores",
    "annotation_items",
    "annotation_assignments",
    "annotations",
    "schedule_runs",
}
PARENTS = {"evaluation_id": "evaluations", "task_id": "annotation_tasks", "schedule_id": "schedules"}


def _create_role(name: str, options: str) -> None:
    op.execute(
        f"""DO $$ BEGIN
            IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{name}') THEN CREATE ROLE {name} {options}; END IF;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"""
    )


def _identity_tables() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.UUID(), primary_key=True),
        sa.Column("username", sa.String(64), nullable=False, unique=True),
        sa.Column("display_name", sa.String(200), nullable=False, server_default=""),
        sa.Column("password_hash", sa.String(200)),
        sa.Column("site_admin", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("external_issuer", sa.String(500)),
        sa.Column("external_subject", sa.String(500)),
        sa.Column("disabled_at", sa.DateTime(timezone=True)),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
    )
    op.create_table(
        "memberships",
        sa.Column("id", sa.UUID(), primary_key=True),
        sa.Column("user_id", sa.UUID(), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("tenant_id", sa.UUID(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False),
        sa.Column("role", sa.String(10), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.UniqueConstraint("user_id", "tenant_id", name="uq_memberships_user_tenant"),
        sa.CheckConstraint(ROLES_CHECK, name="ck_memberships_role"),
    )
    op.create_table(
        "user_sessions",
        sa.Column("id", sa.UUID(), primary_key=True),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("user_id", sa.UUID(), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("csrf_token", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True)),
    )
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column("occurred_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("tenant_id", sa.UUID(), sa.ForeignKey("tenants.id", ondelete="CASCADE")),
        sa.Column("principal", sa.String(200), nullable=False),
        sa.Column("role", sa.String(20), nullable=False, server_default=""),
        sa.Column("site_admin_act", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("action", sa.String(100), nullable=False),
        sa.Column("method", sa.String(10), nullable=False),
        sa.Column("path", sa.String(500), nullable=False),
        sa.Column("object_ids", sa.dialects.postgresql.JSONB(), nullable=False, server_default="{}"),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("request_id", sa.String(64), nullable=False),
        sa.Column("client", sa.String(100), nullable=False, server_default=""),
    )
    op.create_index("ix_audit_log_tenant_id_desc", "audit_log", ["tenant_id", "id"])
    op.drop_constraint("ck_api_keys_role", "api_keys", type_="check")
    op.create_check_constraint("ck_api_keys_role", "api_keys", ROLES_CHECK)
    op.add_column("api_keys", sa.Column("site_admin", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column("api_keys", sa.Column("created_by", sa.String(200), nullable=False, server_default=""))
    op.add_column("api_keys", sa.Column("expires_at", sa.DateTime(timezone=True)))
    op.add_column("api_keys", sa.Column("last_used_at", sa.DateTime(timezone=True)))


def _ownership_columns() -> None:
    op.add_column("benchmarks", sa.Column("owner_tenant_id", sa.UUID(), sa.ForeignKey("tenants.id", ondelete="CASCADE")))
    op.add_column("benchmarks", sa.Column("visibility", sa.String(10), nullable=False, server_default="private"))
    op.create_check_constraint("ck_benchmarks_visibility", "benchmarks", "visibility IN ('private', 'shared')")
    op.add_column("annotators", sa.Column("tenant_id", sa.UUID(), sa.ForeignKey("tenants.id", ondelete="CASCADE")))
    op.add_column("annotators", sa.Column("user_id", sa.UUID(), sa.ForeignKey("users.id", ondelete="SET NULL")))
    # Annotators so far were site-wide names: each goes to the tenant of the tasks it was assigned, else 'default'.
    op.execute(
        """UPDATE annotators a SET tenant_id = COALESCE(
               (SELECT t.tenant_id FROM annotation_assignments s JOIN annotation_tasks t ON t.id = s.task_id
                 WHERE s.annotator_id = a.id LIMIT 1),
               (SELECT id FROM tenants WHERE slug = 'default'))"""
    )
    op.execute("DELETE FROM annotators WHERE tenant_id IS NULL")
    op.alter_column("annotators", "tenant_id", nullable=False)
    op.drop_constraint("annotators_name_key", "annotators", type_="unique")
    op.create_unique_constraint("uq_annotators_tenant_name", "annotators", ["tenant_id", "name"])
    for key, tables in (("evaluation_id", FROM_EVALUATION), ("task_id", FROM_TASK), ("schedule_id", FROM_SCHEDULE)):
        parent = PARENTS[key]
        fn = f"uep_tenant_from_{parent}"
        op.execute(
            f"""CREATE OR REPLACE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                  IF NEW.tenant_id IS NULL AND NEW.{key} IS NOT NULL THEN
                    SELECT p.tenant_id INTO NEW.tenant_id FROM {parent} p WHERE p.id = NEW.{key};
                  END IF;
                  RETURN NEW;
                END $$"""
        )
        for table in tables:
            op.add_column(table, sa.Column("tenant_id", sa.UUID()))
            op.execute(f"UPDATE {table} c SET tenant_id = p.tenant_id FROM {parent} p WHERE p.id = c.{key}")
            if table in NOT_NULL_CHILDREN:
                op.execute(f"DELETE FROM {table} WHERE tenant_id IS NULL")
                op.alter_column(table, "tenant_id", nullable=False)
            op.execute(
                f"CREATE TRIGGER {table}_tenant BEFORE INSERT OR UPDATE OF {key} ON {table} FOR EACH ROW EXECUTE FUNCTION {fn}()"
            )
    # Evaluation caps carried only their evaluation id: give them its tenant, and keep doing so.
    op.execute(
        "UPDATE budget_caps c SET tenant_id = e.tenant_id FROM evaluations e "
        "WHERE c.scope = 'evaluation' AND c.tenant_id IS NULL AND e.id = c.evaluation_id"
    )
    op.execute(
        "CREATE TRIGGER budget_caps_tenant BEFORE INSERT OR UPDATE OF evaluation_id ON budget_caps "
        "FOR EACH ROW EXECUTE FUNCTION uep_tenant_from_evaluations()"
    )


def _policies() -> None:
    _create_role(SCOPED_ROLE, "NOLOGIN NOBYPASSRLS")
    _create_role(CROSS_TENANT_ROLE, "NOLOGIN BYPASSRLS")
    op.execute(
        f"""CREATE OR REPLACE FUNCTION uep_current_tenant() RETURNS uuid LANGUAGE sql STABLE AS
            $$ SELECT NULLIF(current_setting('{TENANT_SETTING}', true), '')::uuid $$"""
    )
    for role in (SCOPED_ROLE, CROSS_TENANT_ROLE):
        op.execute(f"GRANT USAGE ON SCHEMA public TO {role}")
        op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}")
        op.execute(f"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO {role}")
        op.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {role}")
        op.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO {role}")
    own = "tenant_id = uep_current_tenant()"
    for table in DIRECT_TABLES + FROM_EVALUATION + FROM_TASK + FROM_SCHEDULE:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(f"CREATE POLICY tenant_isolation ON {table} TO {SCOPED_ROLE} USING ({own}) WITH CHECK ({own})")
    op.execute("ALTER TABLE budget_caps ENABLE ROW LEVEL SECURITY")
    op.execute(f"CREATE POLICY site_caps_read ON budget_caps FOR SELECT TO {SCOPED_ROLE} USING (scope = 'site_evaluation')")
    op.execute(f"CREATE POLICY tenant_isolation ON budget_caps TO {SCOPED_ROLE} USING ({own}) WITH CHECK ({own})")
    visible = "owner_tenant_id IS NULL OR visibility = 'shared' OR owner_tenant_id = uep_current_tenant()"
    op.execute("ALTER TABLE benchmarks ENABLE ROW LEVEL SECURITY")
    op.execute(f"CREATE POLICY catalogue_read ON benchmarks FOR SELECT TO {SCOPED_ROLE} USING ({visible})")
    op.execute(
        f"CREATE POLICY owner_write ON benchmarks TO {SCOPED_ROLE} "
        "USING (owner_tenant_id = uep_current_tenant()) WITH CHECK (owner_tenant_id = uep_current_tenant())"
    )
    op.execute("ALTER TABLE samples ENABLE ROW LEVEL SECURITY")
    op.execute(
        f"CREATE POLICY catalogue_read ON samples FOR SELECT TO {SCOPED_ROLE} "
        "USING (EXISTS (SELECT 1 FROM benchmarks b WHERE b.id = benchmark_id))"
    )
    owned = "EXISTS (SELECT 1 FROM benchmarks b WHERE b.id = benchmark_id AND b.owner_tenant_id = uep_current_tenant())"
    op.execute(f"CREATE POLICY owner_write ON samples TO {SCOPED_ROLE} USING ({owned}) WITH CHECK ({owned})")
    later = set(REGISTRY_TABLES) | set(INVITATION_TABLES) | set(LATER_DIRECT_TABLES)  # policies of migrations 0016, 0020, 0022
    assert set(TENANT_OWNED) - later == set(DIRECT_TABLES + FROM_EVALUATION + FROM_TASK + FROM_SCHEDULE) | {
        "budget_caps",
        "benchmarks",
        "samples",
    }


def upgrade() -> None:
    _identity_tables()
    _ownership_columns()
    _policies()


def downgrade() -> None:
    for table in (t for t in TENANT_OWNED if t not in INVITATION_TABLES + LATER_DIRECT_TABLES):  # 0020 and 0022 drop theirs
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
        for policy in ("tenant_isolation", "site_caps_read", "catalogue_read", "owner_write"):
            op.execute(f"DROP POLICY IF EXISTS {policy} ON {table}")
    op.execute("DROP TRIGGER IF EXISTS budget_caps_tenant ON budget_caps")
    for tables in (FROM_EVALUATION, FROM_TASK, FROM_SCHEDULE):
        for table in tables:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_tenant ON {table}")
            op.drop_column(table, "tenant_id")
    for parent in PARENTS.values():
        op.execute(f"DROP FUNCTION IF EXISTS uep_tenant_from_{parent}()")
    op.execute("DROP FUNCTION IF EXISTS uep_current_tenant()")
    op.drop_constraint("uq_annotators_tenant_name", "annotators", type_="unique")
    op.create_unique_constraint("annotators_name_key", "annotators", ["name"])
    op.drop_column("annotators", "user_id")
    op.drop_column("annotators", "tenant_id")
    op.drop_constraint("ck_benchmarks_visibility", "benchmarks", type_="check")
    op.drop_column("benchmarks", "visibility")
    op.drop_column("benchmarks", "owner_tenant_id")
    for column in ("last_used_at", "expires_at", "created_by", "site_admin"):
        op.drop_column("api_keys", column)
    op.drop_constraint("ck_api_keys_role", "api_keys", type_="check")
    op.create_check_constraint("ck_api_keys_role", "api_keys", "role IN ('admin', 'builder', 'viewer')")
    for table in ("audit_log", "user_sessions", "memberships", "users"):
        op.drop_table(table)
