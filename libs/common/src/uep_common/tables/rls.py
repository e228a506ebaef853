"""Row-level security: the second wall between tenants (the first is the gateway's tenant-scoped access path).

Every tenant-owned table carries ``tenant_id`` (child tables get it from their evaluation, annotation task or
schedule by a ``BEFORE INSERT`` trigger) and a policy that lets through only the rows of the tenant named by
the per-transaction setting :data:`TENANT_SETTING`. The policies bind the role :data:`SCOPED_ROLE`, which the
gateway's request transactions switch to (:func:`scope_statement`); :data:`CROSS_TENANT_ROLE` has
``BYPASSRLS`` and is what a site admin's explicit cross-tenant request switches to. The services (scheduler,
inference, scorer, judge, reporter) legitimately work across tenants and connect as the tables' owner, which
row-level security does not restrict.

Migration 0015 creates the roles, the ``uep_current_tenant()`` function, the triggers and the policies from
the tables listed here, so this module is the one list of what is tenant-owned.
"""

from __future__ import annotations

import uuid

TENANT_SETTING = "uep.tenant_id"
"""Custom setting (``SET LOCAL``) holding the acting tenant's id; unset or empty = no tenant's rows."""

SCOPED_ROLE = "uep_tenant_scoped"
"""NOLOGIN role the gateway's tenant-scoped transactions run as; every policy below binds it."""

CROSS_TENANT_ROLE = "uep_cross_tenant"
"""NOLOGIN role with BYPASSRLS: a site admin's explicit cross-tenant request."""

DIRECT_TABLES = (
    "evaluations",
    "annotation_tasks",
    "annotators",
    "budget_accounts",
    "spend_ledger",
    "schedules",
    "memberships",
    "api_keys",
    "audit_log",
)
"""Tables whose ``tenant_id`` the writer sets; policy: ``tenant_id = uep_current_tenant()``."""

FROM_EVALUATION = (
    "sample_leases",
    "sample_results",
    "rescores",
    "score_history",
    "artifact_refs",
    "reports",
    "judge_verdicts",
    "judge_items",
    "hybrid_routes",
    "leaderboard_scores",
    "leaderboard_snapshots",
    "retired_results",
    "dead_letters",
)
"""Tables whose ``tenant_id`` a trigger copies from ``evaluations`` by ``evaluation_id``."""

FROM_TASK = ("annotation_items", "annotation_assignments", "annotations")
"""Tables whose ``tenant_id`` a trigger copies from ``annotation_tasks`` by ``task_id``."""

FROM_SCHEDULE = ("schedule_runs",)
"""Tables whose ``tenant_id`` a trigger copies from ``schedules`` by ``schedule_id``."""

LATER_DIRECT_TABLES = ("judge_calibrations",)
"""Direct tables created after migration 0015, each with the same policy as :data:`DIRECT_TABLES` created by
its own migration (0022)."""

SPECIAL_TABLES = ("budget_caps", "benchmarks", "samples")
"""Own policies: site caps readable by all; the site catalogue and shared benchmarks (and their samples)
readable by all, writable by the owner only."""

REGISTRY_TABLES = ("models",)
"""Migration 0016's policies: site models and shared ones readable by all, a tenant's own writable by it only."""

INVITATION_TABLES = ("member_invitations",)
"""Migration 0020's policy: ``tenant_id = uep_current_tenant()``, as :data:`DIRECT_TABLES` (the invited user
reads its own invitations through the unscoped session, by username)."""

TENANT_OWNED = (
    DIRECT_TABLES
    + LATER_DIRECT_TABLES
    + FROM_EVALUATION
    + FROM_TASK
    + FROM_SCHEDULE
    + SPECIAL_TABLES
    + REGISTRY_TABLES
    + INVITATION_TABLES
)
"""Every table under row-level security."""


def scope_statement(tenant_id: uuid.UUID | None, cross_tenant: bool = False) -> str:
    """The SQL one transaction runs first to take its scope: the role (:data:`SCOPED_ROLE`, or
    :data:`CROSS_TENANT_ROLE` when ``cross_tenant``) and :data:`TENANT_SETTING`, both transaction-local.
    ``tenant_id`` is a UUID (rendered by ``str``), so the statement carries no caller text."""
    role = CROSS_TENANT_ROLE if cross_tenant else SCOPED_ROLE
    tenant = str(uuid.UUID(str(tenant_id))) if tenant_id else ""
    return f"SELECT set_config('role', '{role}', true), set_config('{TENANT_SETTING}', '{tenant}', true)"
