"""Principals: who is calling, for which tenant, with which role.

Two modes, per request:

- **API key**: ``Authorization: Bearer <key>``. The key's SHA-256 digest is looked up in ``api_keys``
  (created by ``uep-admin create-api-key --tenant T --role R``, which prints the key once); the caller is
  that key's tenant with its role — ``admin`` (may raise caps, set prices, see every tenant's spend),
  ``builder`` (may lower its tenant's caps) or ``viewer`` (read only). An unknown or revoked key is 401.
  An ``admin`` key may act for another tenant by naming it in ``X-UEP-Tenant``; any other key naming a
  tenant other than its own is 403.
- **Pre-auth mode** (no ``Authorization`` header): the caller is the ``builder`` of the tenant named by
  ``X-UEP-Tenant`` (default ``default``), as every endpoint has behaved so far. This mode stays until real
  identities replace it; nothing here trusts the header for more than a
  builder's rights.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from fastapi import Depends, Header
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.db.budgets import ApiKey, hash_api_key
from uep_common.db.models import Tenant
from uep_gateway.deps import db_session
from uep_gateway.errors import FieldError

TENANT_HEADER = "X-UEP-Tenant"
RANK = {"viewer": 0, "builder": 1, "admin": 2}


@dataclass(frozen=True)
class Principal:
    """The caller: ``tenant`` it acts for, ``role`` (admin/builder/viewer), ``api_key_id`` (None in pre-auth
    mode) and ``name`` (how changes it makes are attributed: ``key:<prefix>`` or ``pre-auth:<tenant>``)."""

    tenant: Tenant
    role: str
    api_key_id: uuid.UUID | None
    name: str

    def at_least(self, role: str) -> bool:
        """True when this principal's role is ``role`` or above (viewer < builder < admin)."""
        return RANK[self.role] >= RANK[role]

    def require(self, role: str, action: str) -> None:
        """Raise 403 naming the ``Authorization`` header unless the role is at least ``role``."""
        if not self.at_least(role):
            raise FieldError(
                403, ("header", "Authorization"), f"{action} needs the {role} role; the caller is {self.role}", "forbidden"
            )


async def _tenant(session: AsyncSession, slug: str) -> Tenant:
    tenant = await session.scalar(select(Tenant).where(Tenant.slug == slug))
    if tenant is None:
        raise FieldError(404, ("header", TENANT_HEADER), f"unknown tenant {slug!r}", "unknown_tenant")
    return tenant


async def current_principal(
    session: AsyncSession = Depends(db_session),
    authorization: str | None = Header(None, alias="Authorization", max_length=500),
    tenant_slug: str | None = Header(None, alias=TENANT_HEADER, max_length=64),
) -> Principal:
    """FastAPI dependency: the :class:`Principal` of the request (see the module docstring). 401 for a
    malformed, unknown or revoked key; 403 when a non-admin key names another tenant; 404 for an unknown
    tenant."""
    if not authorization:
        tenant = await _tenant(session, tenant_slug or "default")
        return Principal(tenant=tenant, role="builder", api_key_id=None, name=f"pre-auth:{tenant.slug}")
    scheme, _, key = authorization.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise FieldError(401, ("header", "Authorization"), "expected 'Bearer <api key>'", "bad_credentials")
    row = await session.scalar(select(ApiKey).where(ApiKey.key_hash == hash_api_key(key.strip())))
    if row is None or row.revoked_at is not None:
        raise FieldError(401, ("header", "Authorization"), "unknown or revoked API key", "bad_credentials")
    key_tenant = await session.get(Tenant, row.tenant_id)
    assert key_tenant is not None  # api_keys.tenant_id: a NOT NULL foreign key, ON DELETE CASCADE
    tenant = key_tenant
    if tenant_slug and tenant_slug != tenant.slug:
        if row.role != "admin":
            raise FieldError(
                403,
                ("header", TENANT_HEADER),
                f"this key belongs to tenant {tenant.slug!r}; only an admin key may act for {tenant_slug!r}",
                "forbidden",
            )
        tenant = await _tenant(session, tenant_slug)
    return Principal(tenant=tenant, role=row.role, api_key_id=row.id, name=f"key:{row.key_prefix}")
