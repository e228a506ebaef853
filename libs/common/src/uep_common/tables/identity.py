"""Tables of identity: users, their memberships in tenants, login sessions, API keys and the audit log.

Who may do what is decided in the gateway (``uep_gateway.auth`` and ``uep_gateway.access``); these are its
records. Secrets are never stored: a password is an argon2id hash (:mod:`uep_common.runtime.passwords`), a session
token and an API key are SHA-256 digests (:func:`hash_token`) — both are 256-bit random strings, for which
a fast hash is enough (no dictionary to guess from).

Row-level security (migration 0015, :mod:`uep_common.tables.rls`) covers ``memberships``, ``api_keys`` and
``audit_log``, and (migration 0020) ``member_invitations``; ``users`` and ``user_sessions`` are read only by
the authentication path.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, CheckConstraint, DateTime, ForeignKey, Index, Integer, String, UniqueConstraint, func
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from uep_common.tables.base import Base, in_list

ROLES = ("admin", "builder", "viewer", "annotator")
"""Roles within one tenant: ``admin`` (members, keys, caps, limits), ``builder`` (create and run),
``viewer`` (read only), ``annotator`` (only the annotation tasks of its tenant)."""

KEY_PREFIX = "uep_"
SESSION_PREFIX = "uepsess_"


def hash_token(token: str) -> str:
    """SHA-256 hex digest (64 characters) of an API key or session token — what the tables store."""
    return hashlib.sha256(token.encode()).hexdigest()


hash_api_key = hash_token


def new_api_key() -> str:
    """A fresh random key: ``uep_`` + 43 URL-safe characters (256 bits from :func:`secrets.token_urlsafe`)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def new_session_token() -> str:
    """A fresh session token: ``uepsess_`` + 43 URL-safe characters (256 bits)."""
    return SESSION_PREFIX + secrets.token_urlsafe(32)


class User(Base):
    """A person. ``password_hash`` is an argon2id PHC string; ``site_admin`` may act across tenants (and must
    say so per request). ``external_subject`` is reserved for an identity provider's subject (OIDC ``sub``)."""

    __tablename__ = "users"
    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)
    username: Mapped[str] = mapped_column(String(64), unique=True, nullable=False)
    display_name: Mapped[str] = mapped_column(String(200), nullable=False, default="")
    password_hash: Mapped[str | None] = mapped_column(String(200))
    site_admin: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    external_issuer: Mapped[str | None] = mapped_column(String(500))
    external_subject: Mapped[str | None] = mapped_column(String(500))
    disabled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)


class Membership(Base):
    """A user's role in one tenant (one role per tenant; a user may belong to several tenants)."""

    __tablename__ = "memberships"
    __table_args__ = (
        UniqueConstraint("user_id", "tenant_id", name="uq_memberships_user_tenant"),
        CheckConstraint(in_list("role", ROLES), name="ck_memberships_role"),
    )
    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)
    user_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), ForeignKey("users.id", ondelete="CASCADE"), nullable=False)
    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False)
    role: Mapped[str] = mapped_column(String(10), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)


class MemberInvitation(Base):
    """A pending invitation of ``username`` into a tenant with ``role``: the membership exists only once the
    user signed in under that name accepts it (``uep_gateway.api.invitations``). Stored whether or not such a
    user exists, so that inviting answers alike for known and unknown names. One per (tenant, username); it
    lapses at ``expires_at``; accepting, declining or withdrawing it deletes the row."""

    __tablename__ = "member_invitations"
    __table_args__ = (
        UniqueConstraint("tenant_id", "username", name="uq_member_invitations_tenant_username"),
        CheckConstraint(in_list("role", ROLES), name="ck_member_invitations_role"),
        Index("ix_member_invitations_username", "username"),
    )
    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False)
    username: Mapped[str] = mapped_column(String(64), nullable=False)
    role: Mapped[str] = mapped_column(String(10), nullable=False)
    invited_by: Mapped[str] = mapped_column(String(200), nullable=False, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)


class UserSession(Base):
    """A login session: the SHA-256 of the cookie's token, the CSRF token that cookie-authenticated writes
    must echo in ``X-CSRF-Token``, and its absolute and idle expiry."""

    __tablename__ = "user_sessions"
    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True, nullable=False)
    user_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("users.id", ondelete="CASCADE"), nullable=False, index=True
    )
    csrf_token: Mapped[str] = mapped_column(String(64), nullable=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), nullable=False)
    last_seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class ApiKey(Base):
    """An API key: only the SHA-256 hex digest of the key is stored, with its tenant and role (:data:`ROLES`).
    ``key_prefix`` (the first 12 characters) identifies it in lists; ``site_admin`` keys (made by
    ``uep-admin`` or a site admin) may act across tenants when the request says so."""

    __tablename__ = "api_keys"
    __table_args__ = (CheckConstraint(in_list("role", ROLES), name="ck_api_keys_role"),)
    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True, nullable=False)
    key_prefix: Mapped[str] = mapped_column(String(12), nullable=False)
    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False)
    role: Mapped[str] = mapped_column(String(10), nullable=False)
    name: Mapped[str] = mapped_column(String(200), nullable=False, default="")
    site_admin: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    created_by: Mapped[str] = mapped_column(String(200), nullable=False, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class AuditEntry(Base):
    """One state-changing call: who (``principal``: ``user:<name>`` or ``key:<prefix>``; ``api_key_id`` for a
    key), for which tenant (null for calls that named none, e.g. a failed login), the action (the operation
    id), the object (the path's ids), the outcome (HTTP status), the request id and when.

    A valid credential refused for what it claimed is recorded as itself, in its own tenant, with what it
    claimed: ``attempted_tenant`` (the ``X-UEP-Tenant`` slug as sent, when it is not the caller's own) and its
    id when such a tenant exists (``attempted_tenant_id``: that tenant's admins see the row too, migration
    0019's policy), ``site_admin_claim`` (it sent ``X-UEP-Site-Admin: true``)."""

    __tablename__ = "audit_log"
    __table_args__ = (
        Index("ix_audit_log_tenant_id_desc", "tenant_id", "id"),
        Index(
            "ix_audit_log_attempted_tenant_id", "attempted_tenant_id", "id", postgresql_where="attempted_tenant_id IS NOT NULL"
        ),
    )
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    occurred_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)
    tenant_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"))
    principal: Mapped[str] = mapped_column(String(200), nullable=False)
    role: Mapped[str] = mapped_column(String(20), nullable=False, default="")
    site_admin_act: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    action: Mapped[str] = mapped_column(String(100), nullable=False)
    method: Mapped[str] = mapped_column(String(10), nullable=False)
    path: Mapped[str] = mapped_column(String(500), nullable=False)
    object_ids: Mapped[dict[str, Any]] = mapped_column(JSONB, nullable=False, default=dict)
    status_code: Mapped[int] = mapped_column(Integer, nullable=False)
    outcome: Mapped[str] = mapped_column(String(20), nullable=False)
    request_id: Mapped[str] = mapped_column(String(64), nullable=False)
    client: Mapped[str] = mapped_column(String(100), nullable=False, default="")
    api_key_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True), ForeignKey("api_keys.id", ondelete="SET NULL"))
    attempted_tenant: Mapped[str | None] = mapped_column(String(64))
    attempted_tenant_id: Mapped[uuid.UUID | None] = mapped_column(
        UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="SET NULL")
    )
    site_admin_claim: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
