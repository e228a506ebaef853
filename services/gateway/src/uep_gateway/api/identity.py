"""Identity routes: sign-in and sessions, members, API keys, the audit log and tenants.

Who may call each route is in :mod:`uep_gateway.access` (sign-in is public; members, keys and the audit log
need a tenant admin; creating users (``POST /v1/members``) and ``/v1/tenants`` a site admin acting as one;
existing users join tenants by invitation, :mod:`uep_gateway.api.invitations`). The tenant-owned tables (``memberships``,
``api_keys``, ``audit_log``) are read and written through the tenant-scoped session
(:func:`uep_gateway.deps.db_session`, row-level security) and filtered on the caller's tenant as well;
``users`` and ``user_sessions`` are not tenant-owned and are reached through
:func:`uep_gateway.deps.unscoped_session`. After any change to keys, sessions, memberships or tenants the
gateway's credential cache is cleared (:func:`uep_gateway.auth.forget_all`).

Passwords are argon2id hashes (:mod:`uep_common.runtime.passwords`, verified in a worker thread); session tokens and
API keys are stored as SHA-256 digests. No answer carries a password, a hash or a session token; an API key
appears once, in the answer that creates it.
"""

from __future__ import annotations

import asyncio
import secrets
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from fastapi import APIRouter, Depends, Query, Request, Response
from sqlalchemy import func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.runtime.passwords import hash_password, needs_rehash, password_problem, verify_password
from uep_common.tables.identity import (
    ApiKey,
    AuditEntry,
    Membership,
    User,
    UserSession,
    hash_token,
    new_api_key,
    new_session_token,
)
from uep_common.tables.models import Tenant
from uep_gateway.auth import CSRF_COOKIE, SESSION_COOKIE, Principal, current_principal, forget_all
from uep_gateway.deps import db_session, unscoped_session
from uep_gateway.errors import FieldError
from uep_gateway.identity_schemas import (
    ApiKeyCreate,
    ApiKeyCreated,
    ApiKeyView,
    AuditItem,
    AuditPage,
    LoginRequest,
    LoginResult,
    MemberAdd,
    MemberUpdate,
    MemberView,
    Outcome,
    PasswordChange,
    Role,
    TenantCreate,
    TenantRef,
    TenantRole,
    TenantView,
    UserView,
    WhoAmI,
)
from uep_gateway.validation import INT64_MAX, NUL_CHECK

router = APIRouter(tags=["identity"], dependencies=NUL_CHECK)

BAD_LOGIN = "unknown username or wrong password"
"""The one answer to a failed sign-in, whether the user exists or not."""


# --------------------------------------------------------------------------------------------- helpers
def _user_view(user: User) -> UserView:
    return UserView(id=user.id, username=user.username, display_name=user.display_name, site_admin=user.site_admin)


async def _memberships(session: AsyncSession, user_id: uuid.UUID) -> list[TenantRole]:
    """Every tenant ``user_id`` belongs to, oldest membership first (read without row-level security)."""
    rows = await session.execute(
        select(Membership.role, Tenant.slug, Tenant.name)
        .join(Tenant, Tenant.id == Membership.tenant_id)
        .where(Membership.user_id == user_id)
        .order_by(Membership.created_at, Membership.id)
    )
    return [TenantRole(slug=slug, name=name, role=role) for role, slug, name in rows.all()]


def _cookie_flags(request: Request) -> dict[str, Any]:
    return {"path": "/", "secure": request.app.state.settings.session_cookie_secure, "samesite": "lax"}


def _check_password_length(request: Request, password: str, loc: tuple[str, str]) -> None:
    """422 naming ``loc`` for a password longer than ``UEP_LOGIN_MAX_PASSWORD_CHARS``."""
    most = request.app.state.settings.login_max_password_chars
    if len(password) > most:
        raise FieldError("invalid", loc, f"at most {most} characters", "string_too_long")


def _require_user(principal: Principal, action: str) -> uuid.UUID:
    """The user id of a signed-in principal; 409 naming ``Authorization`` for an API key."""
    if principal.kind != "user" or principal.user_id is None:
        raise FieldError(
            "conflict", ("header", "Authorization"), f"{action} is for a signed-in user, not an API key", "not_a_user"
        )
    return principal.user_id


# --------------------------------------------------------------------------------------------- sessions
@router.post("/v1/auth/login", response_model=LoginResult)
async def login(
    body: LoginRequest, request: Request, response: Response, session: AsyncSession = Depends(unscoped_session)
) -> LoginResult:
    """Sign in with a username and password. Success: a new session — cookie ``uep_session`` (HttpOnly,
    SameSite=Lax, Secure unless ``UEP_SESSION_COOKIE_SECURE=false``, Max-Age = ``UEP_SESSION_TTL_S``) and
    cookie ``uep_csrf`` (readable by scripts) holding the CSRF token that cookie-authenticated writes echo in
    ``X-CSRF-Token`` — and the user, its tenants, that token and the session's end. An unknown user, a wrong
    password and a disabled user all get the same 401 naming ``body.password`` (an unknown user costs the same
    verification time). Failed sign-ins are limited per account and per client address
    (``UEP_FAILED_SIGNIN_ACCOUNT_RATE_LIMIT``, ``UEP_FAILED_SIGNIN_CLIENT_RATE_LIMIT``): past either, 429 naming
    ``body.username`` or ``body.password``, before the password is checked; a sign-in that succeeds costs
    nothing. The attempt is audited as ``user:<username>``."""
    request.state.audit_name = f"user:{body.username}"
    _check_password_length(request, body.password, ("body", "password"))
    limiter = getattr(request.app.state, "rate_limiter", None)
    if limiter is not None:  # 429 before the password is checked when the account's or the address's failures are spent
        await limiter.check_signin(request, body.username)
    user: User | None = await session.scalar(select(User).where(User.username == body.username))
    ok = await asyncio.to_thread(verify_password, user.password_hash if user else None, body.password)
    if not ok or user is None or user.disabled_at is not None:
        if limiter is not None:
            await limiter.failed_signin(request, body.username)
        raise FieldError("unauthenticated", ("body", "password"), BAD_LOGIN, "bad_credentials")
    settings = request.app.state.settings
    if user.password_hash and needs_rehash(user.password_hash):
        user.password_hash = await asyncio.to_thread(hash_password, body.password)
    token = new_session_token()
    csrf = secrets.token_urlsafe(32)
    now = datetime.now(UTC)
    expires = now + timedelta(seconds=settings.session_ttl_s)
    session.add(
        UserSession(
            token_hash=hash_token(token), user_id=user.id, csrf_token=csrf, created_at=now, expires_at=expires, last_seen_at=now
        )
    )
    tenants = await _memberships(session, user.id)
    view = _user_view(user)
    await session.commit()
    flags = _cookie_flags(request)
    response.set_cookie(SESSION_COOKIE, token, max_age=settings.session_ttl_s, httponly=True, **flags)
    response.set_cookie(CSRF_COOKIE, csrf, max_age=settings.session_ttl_s, httponly=False, **flags)
    response.headers["Cache-Control"] = "no-store"
    return LoginResult(user=view, tenants=tenants, csrf_token=csrf, expires_at=expires)


@router.post("/v1/auth/logout", status_code=204)
async def logout(
    request: Request,
    principal: Principal = Depends(current_principal),
    session: AsyncSession = Depends(unscoped_session),
) -> Response:
    """End the current session (it answers 401 from then on) and clear both cookies. An API key is not a
    session: 409 naming ``Authorization`` (keys are revoked with ``DELETE /v1/api-keys/{key_id}``)."""
    if principal.kind != "user" or principal.session_id is None:
        raise FieldError(
            "conflict",
            ("header", "Authorization"),
            "an API key has no session to end; revoke it with DELETE /v1/api-keys/{key_id}",
            "not_a_session",
        )
    await session.execute(
        update(UserSession)
        .where(UserSession.id == principal.session_id, UserSession.revoked_at.is_(None))
        .values(revoked_at=datetime.now(UTC))
    )
    await session.commit()
    forget_all(request)
    out = Response(status_code=204)
    flags = _cookie_flags(request)
    out.delete_cookie(SESSION_COOKIE, httponly=True, **flags)
    out.delete_cookie(CSRF_COOKIE, httponly=False, **flags)
    return out


@router.get("/v1/auth/me", response_model=WhoAmI)
async def who_am_i(
    principal: Principal = Depends(current_principal), session: AsyncSession = Depends(unscoped_session)
) -> WhoAmI:
    """The caller of this request: kind, name, tenant and role, site-admin standing, and the tenants it may
    act for (a user's memberships, oldest first; a key's own tenant)."""
    tenant = TenantRef(slug=principal.tenant.slug, name=principal.tenant.name)
    common: dict[str, Any] = {
        "kind": principal.kind,
        "name": principal.name,
        "tenant": tenant,
        "role": principal.role,
        "site_admin": principal.site_admin,
        "site_act": principal.site_act,
    }
    if principal.kind == "key":
        row = (
            await session.execute(
                select(ApiKey.role, Tenant.slug, Tenant.name)
                .join(Tenant, Tenant.id == ApiKey.tenant_id)
                .where(ApiKey.id == principal.api_key_id)
            )
        ).first()
        own = [TenantRole(slug=row[1], name=row[2], role=row[0])] if row is not None else []
        return WhoAmI(api_key_id=principal.api_key_id, tenants=own, **common)
    user_id = _require_user(principal, "GET /v1/auth/me")
    user = await session.get(User, user_id)
    sess = await session.get(UserSession, principal.session_id) if principal.session_id else None
    return WhoAmI(
        user=_user_view(user) if user else None,
        session_expires_at=sess.expires_at if sess else None,
        tenants=await _memberships(session, user_id),
        **common,
    )


@router.post("/v1/auth/password", status_code=204)
async def change_password(
    body: PasswordChange,
    request: Request,
    principal: Principal = Depends(current_principal),
    session: AsyncSession = Depends(unscoped_session),
) -> Response:
    """Change the signed-in user's password: 401 naming ``current_password`` when it is wrong, 422 naming
    ``new_password`` when the new one breaks the policy (12 to 1024 characters, no NUL) or equals the current
    one. The user's other sessions end; this one continues. An API key: 409 naming ``Authorization``."""
    user_id = _require_user(principal, "changing a password")
    _check_password_length(request, body.current_password, ("body", "current_password"))
    user = await session.get(User, user_id)
    if user is None or not await asyncio.to_thread(verify_password, user.password_hash, body.current_password):
        raise FieldError("unauthenticated", ("body", "current_password"), "the current password is wrong", "bad_credentials")
    problem = password_problem(body.new_password)
    if problem is None and body.new_password == body.current_password:
        problem = "the new password must differ from the current one"
    if problem:
        raise FieldError("invalid", ("body", "new_password"), problem, "weak_password")
    user.password_hash = await asyncio.to_thread(hash_password, body.new_password)
    await session.execute(
        update(UserSession)
        .where(UserSession.user_id == user_id, UserSession.id != principal.session_id, UserSession.revoked_at.is_(None))
        .values(revoked_at=datetime.now(UTC))
    )
    await session.commit()
    forget_all(request)
    return Response(status_code=204)


# --------------------------------------------------------------------------------------------- members
def _member_view(m: Membership, u: User, created: bool | None = None) -> MemberView:
    return MemberView(
        user_id=u.id,
        username=u.username,
        display_name=u.display_name,
        role=cast("Role", m.role),
        created_at=m.created_at,
        user_created=created,
    )


async def _member(session: AsyncSession, principal: Principal, user_id: uuid.UUID) -> tuple[Membership, User]:
    """The membership of ``user_id`` in the caller's tenant (locked for update); 404 naming the path otherwise."""
    row = (
        await session.execute(
            select(Membership, User)
            .join(User, User.id == Membership.user_id)
            .where(Membership.user_id == user_id, Membership.tenant_id == principal.tenant.id)
            .with_for_update(of=Membership)
        )
    ).first()
    if row is None:
        raise FieldError(
            "not_found", ("path", "user_id"), f"user {user_id} is not a member of tenant {principal.tenant.slug!r}", "not_found"
        )
    return row[0], row[1]


async def _other_admins(session: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID) -> int:
    """Admins of the tenant besides ``user_id`` (their memberships locked, so two concurrent demotions cannot
    both pass)."""
    ids = await session.scalars(
        select(Membership.id)
        .where(Membership.tenant_id == tenant_id, Membership.role == "admin", Membership.user_id != user_id)
        .with_for_update()
    )
    return len(ids.all())


@router.get("/v1/members", response_model=list[MemberView])
async def list_members(
    principal: Principal = Depends(current_principal), session: AsyncSession = Depends(db_session)
) -> list[MemberView]:
    """The members of the caller's tenant (username, role, since when), oldest first."""
    rows = await session.execute(
        select(Membership, User)
        .join(User, User.id == Membership.user_id)
        .where(Membership.tenant_id == principal.tenant.id)
        .order_by(Membership.created_at, Membership.id)
    )
    return [_member_view(m, u) for m, u in rows.all()]


@router.post("/v1/members", status_code=201, response_model=MemberView)
async def add_member(
    body: MemberAdd,
    request: Request,
    principal: Principal = Depends(current_principal),
    session: AsyncSession = Depends(db_session),
) -> MemberView:
    """Create a user and make it a member of the named tenant with a role (a site admin acting as one; the
    tenant is ``X-UEP-Tenant``). ``password`` must meet the policy (422 naming it). A username that exists is
    409 naming ``username``: an existing user joins a tenant only by accepting an invitation
    (``POST /v1/invitations``), never by being attached to it."""
    problem = password_problem(body.password)
    if problem:
        raise FieldError("invalid", ("body", "password"), problem, "weak_password")
    taken = FieldError(
        "conflict", ("body", "username"), f"user {body.username!r} exists: invite it (POST /v1/invitations)", "user_exists"
    )
    if await session.scalar(select(User.id).where(User.username == body.username)) is not None:
        raise taken
    user = User(
        username=body.username,
        display_name=body.display_name,
        password_hash=await asyncio.to_thread(hash_password, body.password),
    )
    session.add(user)
    try:
        await session.flush()
    except IntegrityError as exc:
        raise taken from exc
    member = Membership(user_id=user.id, tenant_id=principal.tenant.id, role=body.role, created_at=datetime.now(UTC))
    session.add(member)
    await session.commit()
    forget_all(request)
    return _member_view(member, user, True)


@router.patch("/v1/members/{user_id}", response_model=MemberView)
async def update_member(
    user_id: uuid.UUID,
    body: MemberUpdate,
    request: Request,
    principal: Principal = Depends(current_principal),
    session: AsyncSession = Depends(db_session),
) -> MemberView:
    """Change a member's role. 404 naming ``user_id`` when the user is not a member of the caller's tenant;
    409 naming ``role`` when it would leave the tenant without an admin."""
    member, user = await _member(session, principal, user_id)
    if member.role == "admin" and body.role != "admin" and await _other_admins(session, principal.tenant.id, user_id) == 0:
        raise FieldError(
            "conflict", ("body", "role"), "this is the tenant's last admin; make another member admin first", "last_admin"
        )
    member.role = body.role
    await session.commit()
    forget_all(request)
    return _member_view(member, user)


@router.delete("/v1/members/{user_id}", status_code=204)
async def remove_member(
    user_id: uuid.UUID,
    request: Request,
    principal: Principal = Depends(current_principal),
    session: AsyncSession = Depends(db_session),
) -> Response:
    """Remove a user from the caller's tenant (the user itself remains). 404 naming ``user_id`` when it is not
    a member; 409 naming it when it is the tenant's last admin."""
    member, _user = await _member(session, principal, user_id)
    if member.role == "admin" and await _other_admins(session, principal.tenant.id, user_id) == 0:
        raise FieldError(
            "conflict", ("path", "user_id"), "this is the tenant's last admin; make another member admin first", "last_admin"
        )
    await session.delete(member)
    await session.commit()
    forget_all(request)
    return Response(status_code=204)


# --------------------------------------------------------------------------------------------- API keys
def _key_view(k: ApiKey) -> dict[str, Any]:
    return {
        "id": k.id,
        "prefix": k.key_prefix,
        "name": k.name,
        "role": k.role,
        "site_admin": k.site_admin,
        "created_by": k.created_by,
        "created_at": k.created_at,
        "expires_at": k.expires_at,
        "last_used_at": k.last_used_at,
        "revoked_at": k.revoked_at,
    }


@router.get("/v1/api-keys", response_model=list[ApiKeyView])
async def list_api_keys(
    principal: Principal = Depends(current_principal), session: AsyncSession = Depends(db_session)
) -> list[ApiKeyView]:
    """The caller's tenant's API keys, newest first, revoked ones included: prefix, label, role, creator and
    times — never the key or its digest."""
    keys = await session.scalars(
        select(ApiKey).where(ApiKey.tenant_id == principal.tenant.id).order_by(ApiKey.created_at.desc(), ApiKey.id)
    )
    return [ApiKeyView(**_key_view(k)) for k in keys]


@router.post("/v1/api-keys", status_code=201, response_model=ApiKeyCreated)
async def create_api_key(
    body: ApiKeyCreate,
    request: Request,
    response: Response,
    principal: Principal = Depends(current_principal),
    session: AsyncSession = Depends(db_session),
) -> ApiKeyCreated:
    """Create a key of the caller's tenant and return it — the only time it is shown (``key``); the table
    keeps its SHA-256 digest. ``site_admin: true`` needs a site admin acting as one (403 naming it)."""
    if body.site_admin and not principal.site_act:
        raise FieldError(
            "forbidden",
            ("body", "site_admin"),
            "only a site admin sending X-UEP-Site-Admin: true may create a site-admin key",
            "forbidden",
        )
    key = new_api_key()
    now = datetime.now(UTC)
    row = ApiKey(
        key_hash=hash_token(key),
        key_prefix=key[:12],
        tenant_id=principal.tenant.id,
        role=body.role,
        name=body.name,
        site_admin=body.site_admin,
        created_by=principal.name,
        created_at=now,
        expires_at=now + timedelta(days=body.expires_in_days) if body.expires_in_days else None,
    )
    session.add(row)
    await session.commit()
    response.headers["Cache-Control"] = "no-store"
    return ApiKeyCreated(key=key, **_key_view(row))


@router.delete("/v1/api-keys/{key_id}", status_code=204)
async def revoke_api_key(
    key_id: uuid.UUID,
    request: Request,
    principal: Principal = Depends(current_principal),
    session: AsyncSession = Depends(db_session),
) -> Response:
    """Revoke a key of the caller's tenant: it answers 401 from then on (revoking twice keeps the first
    time). Another tenant's key or an unknown id: 404 naming ``key_id``."""
    key = await session.scalar(select(ApiKey).where(ApiKey.id == key_id, ApiKey.tenant_id == principal.tenant.id))
    if key is None:
        raise FieldError("not_found", ("path", "key_id"), f"API key {key_id} not found", "not_found")
    if key.revoked_at is None:
        key.revoked_at = datetime.now(UTC)
        await session.commit()
    forget_all(request)
    return Response(status_code=204)


# --------------------------------------------------------------------------------------------- audit log
def _utc(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


@router.get("/v1/audit", response_model=AuditPage)
async def list_audit_entries(
    principal: Principal = Depends(current_principal),
    session: AsyncSession = Depends(db_session),
    action: str | None = Query(None, max_length=100, description="Only this operation id, e.g. createEvaluation."),
    principal_name: str | None = Query(None, alias="principal", max_length=200, description="Only user:<name> or key:<prefix>."),
    outcome: Outcome | None = Query(None, description="Only this outcome."),
    since: datetime | None = Query(None, description="Only rows at or after this time (ISO 8601; no zone: UTC)."),
    until: datetime | None = Query(None, description="Only rows before this time."),
    cursor: str | None = Query(None, max_length=20, description="next_cursor of the previous page."),
    limit: int = Query(100, ge=1, le=500),
) -> AuditPage:
    """The audit log of the caller's tenant, newest first, with the refused calls of other tenants' credentials
    that named this tenant (``attempted_tenant``); a site admin acting across tenants sees every tenant's rows
    and those of calls that named none, such as failed sign-ins. Keyset pages: pass
    ``next_cursor`` back as ``cursor``; a cursor that is not one is a 422 naming it."""
    since, until = _utc(since), _utc(until)
    if since is not None and until is not None and until <= since:
        raise FieldError("invalid", ("query", "until"), "until must be later than since", "bad_range")
    before: int | None = None
    if cursor is not None:
        if not cursor.isdigit() or not 0 < int(cursor) <= INT64_MAX:
            raise FieldError("invalid", ("query", "cursor"), "not a cursor of this list (use next_cursor)", "bad_cursor")
        before = int(cursor)
    q = select(AuditEntry, Tenant.slug).outerjoin(Tenant, Tenant.id == AuditEntry.tenant_id)
    if not principal.site_act:  # its own rows, and the refused claims on it of other tenants' credentials
        q = q.where(or_(AuditEntry.tenant_id == principal.tenant.id, AuditEntry.attempted_tenant_id == principal.tenant.id))
    if action is not None:
        q = q.where(AuditEntry.action == action)
    if principal_name is not None:
        q = q.where(AuditEntry.principal == principal_name)
    if outcome is not None:
        q = q.where(AuditEntry.outcome == outcome)
    if since is not None:
        q = q.where(AuditEntry.occurred_at >= since)
    if until is not None:
        q = q.where(AuditEntry.occurred_at < until)
    if before is not None:
        q = q.where(AuditEntry.id < before)
    rows = (await session.execute(q.order_by(AuditEntry.id.desc()).limit(limit + 1))).all()
    items = [
        AuditItem(
            id=e.id,
            occurred_at=e.occurred_at,
            tenant=slug,
            principal=e.principal,
            role=e.role,
            site_admin_act=e.site_admin_act,
            action=e.action,
            method=e.method,
            path=e.path,
            object_ids=e.object_ids,
            status_code=e.status_code,
            outcome=e.outcome,
            request_id=e.request_id,
            client=e.client,
            api_key_id=e.api_key_id,
            attempted_tenant=e.attempted_tenant,
            site_admin_claim=e.site_admin_claim,
        )
        for e, slug in rows[:limit]
    ]
    more = len(rows) > limit
    return AuditPage(items=items, next_cursor=str(items[-1].id) if more and items else None)


# --------------------------------------------------------------------------------------------- tenants
def _tenant_view(t: Tenant) -> TenantView:
    return TenantView(id=t.id, slug=t.slug, name=t.name, created_at=t.created_at)


@router.get("/v1/tenants", response_model=list[TenantView])
async def list_tenants(session: AsyncSession = Depends(db_session)) -> list[TenantView]:
    """Every tenant, oldest first (site admins acting as one)."""
    tenants = await session.scalars(select(Tenant).order_by(Tenant.created_at, Tenant.slug))
    return [_tenant_view(t) for t in tenants]


@router.post("/v1/tenants", status_code=201, response_model=TenantView)
async def create_tenant(body: TenantCreate, request: Request, session: AsyncSession = Depends(db_session)) -> TenantView:
    """Create a tenant (site admins acting as one). 409 naming ``slug`` when it exists. Its first admin is
    added with ``POST /v1/members`` sent with ``X-UEP-Tenant: <slug>``."""
    exists = await session.scalar(select(func.count()).select_from(Tenant).where(Tenant.slug == body.slug))
    if exists:
        raise FieldError("conflict", ("body", "slug"), f"tenant {body.slug!r} exists", "conflict")
    tenant = Tenant(slug=body.slug, name=body.name or body.slug, created_at=datetime.now(UTC))
    session.add(tenant)
    try:
        await session.commit()
    except IntegrityError as exc:
        raise FieldError("conflict", ("body", "slug"), f"tenant {body.slug!r} exists", "conflict") from exc
    forget_all(request)
    return _tenant_view(tenant)
