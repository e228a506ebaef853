"""Request and response bodies of the identity routes (:mod:`uep_gateway.api.identity`).

Bodies are closed (``extra="forbid"``: an unknown field is a 422 naming it) and every string is bounded.
No response model has a field for a password, a password hash, a session token or a key digest; the only
one carrying a secret is :class:`ApiKeyCreated`, the one-time answer of ``POST /v1/api-keys``.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["admin", "builder", "viewer", "annotator"]
"""A role within one tenant (:data:`uep_common.tables.identity.ROLES`)."""

Outcome = Literal["success", "denied", "refused", "rate_limited", "error"]
"""An audit row's outcome (:func:`uep_gateway.audit._outcome`)."""

USERNAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$"
TENANT_SLUG_PATTERN = r"^[a-z0-9][a-z0-9-]{0,63}$"
PASSWORD_FIELD_MAX = 4096
"""Longest password string a body may carry; the policy (:func:`uep_common.runtime.passwords.password_problem`) and
``UEP_LOGIN_MAX_PASSWORD_CHARS`` bound it further with a message naming the field."""


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoginRequest(_Body):
    """``POST /v1/auth/login``."""

    username: str = Field(min_length=1, max_length=64)
    password: str = Field(min_length=1, max_length=PASSWORD_FIELD_MAX, repr=False)


class PasswordChange(_Body):
    """``POST /v1/auth/password``: the current password and the new one (policy: 12 to 1024 characters)."""

    current_password: str = Field(min_length=1, max_length=PASSWORD_FIELD_MAX, repr=False)
    new_password: str = Field(min_length=1, max_length=PASSWORD_FIELD_MAX, repr=False)


class UserView(BaseModel):
    """A user as the API shows it (never its password hash)."""

    id: uuid.UUID
    username: str
    display_name: str
    site_admin: bool


class TenantRole(BaseModel):
    """One tenant a principal may act for, with its role there."""

    slug: str
    name: str
    role: Role


class LoginResult(BaseModel):
    """``POST /v1/auth/login``: who signed in, their tenants, the CSRF token that cookie-authenticated writes
    echo in ``X-CSRF-Token`` (also in the ``uep_csrf`` cookie) and when the session ends at the latest. The
    session token itself is only in the ``uep_session`` cookie (HttpOnly)."""

    user: UserView
    tenants: list[TenantRole]
    csrf_token: str
    expires_at: datetime


class TenantRef(BaseModel):
    """A tenant's slug and name."""

    slug: str
    name: str


class WhoAmI(BaseModel):
    """``GET /v1/auth/me``: the caller (``kind`` key or user; ``name`` as the audit log records it), the tenant
    and role of this request, whether it is a site admin and whether this request acts across tenants, and
    every tenant it may act for (a user's memberships; a key's own tenant)."""

    kind: Literal["key", "user"]
    name: str
    tenant: TenantRef
    role: Role
    site_admin: bool
    site_act: bool
    user: UserView | None = None
    api_key_id: uuid.UUID | None = None
    session_expires_at: datetime | None = None
    tenants: list[TenantRole]


class MemberAdd(_Body):
    """``POST /v1/members`` (a site admin acting as one): create the user ``username`` with ``password`` and
    make it a member of the named tenant with ``role``. Existing users join tenants by invitation only."""

    username: str = Field(pattern=USERNAME_PATTERN, description="Letters, digits and . _ @ -, at most 64.")
    role: Role
    password: str = Field(min_length=1, max_length=PASSWORD_FIELD_MAX, repr=False)
    display_name: str = Field("", max_length=200)


class InvitationCreate(_Body):
    """``POST /v1/invitations``: invite ``username`` into the caller's tenant with ``role``."""

    username: str = Field(pattern=USERNAME_PATTERN, description="Letters, digits and . _ @ -, at most 64.")
    role: Role


class InvitationView(BaseModel):
    """A pending invitation of the caller's tenant. Nothing in it says whether a user of that name exists."""

    id: uuid.UUID
    username: str
    role: Role
    invited_by: str
    created_at: datetime
    expires_at: datetime


class MyInvitation(BaseModel):
    """A pending invitation addressed to the signed-in user: which tenant, with which role, from whom."""

    id: uuid.UUID
    tenant: TenantRef
    role: Role
    invited_by: str
    expires_at: datetime


class MemberUpdate(_Body):
    """``PATCH /v1/members/{user_id}``: the member's new role."""

    role: Role


class MemberView(BaseModel):
    """A member of the caller's tenant."""

    user_id: uuid.UUID
    username: str
    display_name: str
    role: Role
    created_at: datetime
    user_created: bool | None = Field(None, description="On POST only: whether the call created the user.")


class ApiKeyCreate(_Body):
    """``POST /v1/api-keys``: a key of the caller's tenant. ``site_admin`` (may act across tenants) only by a
    site admin acting as one (``X-UEP-Site-Admin: true``)."""

    name: str = Field("", max_length=200, description="A label shown in lists.")
    role: Role
    expires_in_days: int | None = Field(None, ge=1, le=3650, description="Days until the key stops working; none: never.")
    site_admin: bool = False


class ApiKeyView(BaseModel):
    """An API key as lists show it: its visible prefix and metadata, never the key or its digest."""

    id: uuid.UUID
    prefix: str
    name: str
    role: Role
    site_admin: bool
    created_by: str
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None


class ApiKeyCreated(ApiKeyView):
    """``POST /v1/api-keys``: the key's metadata and ``key`` itself — shown this once; only its SHA-256 digest
    is stored."""

    key: str


class AuditItem(BaseModel):
    """One audit row: who (``principal``, ``role``, ``site_admin_act``, ``api_key_id`` for a key), for which
    tenant (slug; null for a call that named none, such as a failed sign-in), what (``action`` = operation id,
    ``method``, ``path``, ``object_ids``), the answer (``status_code``, ``outcome``), ``request_id`` (the
    ``X-Request-ID`` of the answer), ``client`` address and when. A credential refused for what it claimed
    has ``attempted_tenant`` (the ``X-UEP-Tenant`` it sent, not its own) and/or ``site_admin_claim``; such a
    row is listed to the admins of its own tenant and of the tenant it tried."""

    id: int
    occurred_at: datetime
    tenant: str | None
    principal: str
    role: str
    site_admin_act: bool
    action: str
    method: str
    path: str
    object_ids: dict[str, Any]
    status_code: int
    outcome: str
    request_id: str
    client: str
    api_key_id: uuid.UUID | None = None
    attempted_tenant: str | None = None
    site_admin_claim: bool = False


class AuditPage(BaseModel):
    """A page of audit rows, newest first; ``next_cursor`` (pass it back as ``cursor``) is null on the last."""

    items: list[AuditItem]
    next_cursor: str | None


class TenantCreate(_Body):
    """``POST /v1/tenants``."""

    slug: str = Field(pattern=TENANT_SLUG_PATTERN, description="Lower-case letters, digits and -, at most 64.")
    name: str = Field("", max_length=200, description="Display name (default: the slug).")


class TenantView(BaseModel):
    """A tenant."""

    id: uuid.UUID
    slug: str
    name: str
    created_at: datetime
