"""Principals: who is calling, for which tenant, with which role.

A request names its caller in one of two ways:

- **API key** — ``Authorization: Bearer uep_…``. Only the key's SHA-256 digest is stored
  (``api_keys``); the caller is the key's tenant with the key's role. Unknown, revoked and expired keys and
  any other scheme are 401 naming ``Authorization``.
- **Session** — the ``uep_session`` cookie that ``POST /v1/auth/login`` sets (HttpOnly, SameSite=Lax,
  Secure unless ``UEP_SESSION_COOKIE_SECURE=false``). Cookie-authenticated writes must echo the session's
  CSRF token in ``X-CSRF-Token`` (403 otherwise). Sessions end at logout, after
  ``UEP_SESSION_TTL_S`` and after ``UEP_SESSION_IDLE_S`` without a request.

``X-UEP-Tenant: <slug>`` picks the tenant: a user gets the role of its membership there (a user without
the header acts in its oldest membership); a key may name only its own tenant. A **site admin** (a user or
key marked so) may name any tenant (acting as its admin) and, to act across tenants, must say so on each
request with ``X-UEP-Site-Admin: true``; anyone else sending ``true`` is refused (403). ``false`` is the same as
leaving the header out; any other value is a 422 naming it.

Lookups are cached per process for ``UEP_AUTH_CACHE_TTL_S`` seconds (default 2); this gateway's own
revocations, logouts and membership changes clear the cache at once (:func:`forget_all`), other replicas
see them within the TTL.
"""

from __future__ import annotations

import asyncio
import hmac
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import Request
from sqlalchemy import select, update

from uep_common.tables.identity import ApiKey, Membership, User, UserSession, hash_token
from uep_common.tables.models import Tenant
from uep_gateway.errors import FieldError

TENANT_HEADER = "X-UEP-Tenant"
SITE_ADMIN_HEADER = "X-UEP-Site-Admin"
CSRF_HEADER = "X-CSRF-Token"
SESSION_COOKIE = "uep_session"
CSRF_COOKIE = "uep_csrf"
RANK = {"annotator": -1, "viewer": 0, "builder": 1, "admin": 2}
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LAST_USED_EVERY_S = 60.0


@dataclass(frozen=True)
class Principal:
    """The caller of one request.

    ``tenant`` (the tenant it acts for, a detached row), ``role`` (admin/builder/viewer/annotator),
    ``kind`` (``key`` or ``user``), ``name`` (how its changes are attributed: ``key:<prefix>`` or
    ``user:<username>``), ``site_admin`` (may act across tenants) and ``site_act`` (this request does, having
    sent ``X-UEP-Site-Admin: true``). ``user_id``/``api_key_id``/``session_id`` identify the credential."""

    tenant: Tenant
    role: str
    kind: str
    name: str
    site_admin: bool = False
    site_act: bool = False
    user_id: uuid.UUID | None = None
    api_key_id: uuid.UUID | None = None
    session_id: uuid.UUID | None = None
    csrf_token: str | None = field(default=None, repr=False)

    def at_least(self, role: str) -> bool:
        """True when this principal's role is ``role`` or above (viewer < builder < admin; a site admin acting
        across tenants counts as admin)."""
        return self.site_act or RANK[self.role] >= RANK[role]

    def require(self, role: str, action: str) -> None:
        """Raise 403 naming the ``Authorization`` header unless the role is at least ``role``."""
        if not self.at_least(role):
            raise FieldError(
                "forbidden",
                ("header", "Authorization"),
                f"{action} needs the {role} role; the caller is {self.role}",
                "forbidden",
            )


@dataclass
class _Credential:
    """What a cached lookup of one key or session gives (before the tenant is chosen)."""

    kind: str
    name: str
    site_admin: bool
    expires_at: datetime | None
    key: ApiKey | None = None
    key_tenant: Tenant | None = None
    user: User | None = None
    session: UserSession | None = None
    memberships: list[tuple[Membership, Tenant]] = field(default_factory=list)


@dataclass(frozen=True)
class RefusedCaller:
    """A valid credential whose request was refused after it was recognised (another tenant named, site admin
    claimed, CSRF token missing …), kept on ``request.state.refused_caller`` so that the audit log records the
    caller as itself rather than as ``anonymous``.

    ``name`` (``key:<prefix>`` / ``user:<username>``), ``api_key_id`` (a key's id, never its secret),
    ``tenant`` (the tenant it acts for without the headers: a key's own, a user's oldest membership; None for a
    user of no tenant) and ``role`` there, ``attempted_tenant`` (the ``X-UEP-Tenant`` slug as sent, at most 64
    characters, when it is not that tenant's) and ``site_admin_claim`` (``X-UEP-Site-Admin`` sent with any
    value but ``false``)."""

    name: str
    api_key_id: uuid.UUID | None
    tenant: Tenant | None
    role: str
    attempted_tenant: str | None
    site_admin_claim: bool


def unauthorized(loc: tuple[str, str], msg: str) -> FieldError:
    """A 401 naming the credential's header or cookie, with ``WWW-Authenticate: Bearer``."""
    return FieldError("unauthenticated", loc, msg, "bad_credentials", headers={"WWW-Authenticate": 'Bearer realm="uep"'})


class AuthCache:
    """Per-process cache of credential lookups: token digest → (monotonic expiry, :class:`_Credential`)."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self._entries: dict[str, tuple[float, _Credential]] = {}
        self._last_used: dict[uuid.UUID, float] = {}

    def get(self, digest: str) -> _Credential | None:
        """The cached credential of ``digest``, or None when absent or older than the TTL."""
        hit = self._entries.get(digest)
        if hit is None or hit[0] < time.monotonic():
            return None
        return hit[1]

    def put(self, digest: str, cred: _Credential) -> None:
        """Remember ``cred`` for the TTL (the cache is cleared when it passes 10,000 entries)."""
        if len(self._entries) > 10_000:
            self._entries.clear()
        self._entries[digest] = (time.monotonic() + self.ttl_s, cred)

    def clear(self) -> None:
        """Forget every entry (after a revocation, logout or membership change)."""
        self._entries.clear()

    def due_last_used(self, key_id: uuid.UUID) -> bool:
        """True at most once a minute per key: time to write its ``last_used_at``."""
        now = time.monotonic()
        if now - self._last_used.get(key_id, -1e9) < LAST_USED_EVERY_S:
            return False
        self._last_used[key_id] = now
        return True


def forget_all(request: Request) -> None:
    """Clear this gateway's credential cache (call after changing keys, sessions, memberships or a tenant)."""
    cache: AuthCache | None = getattr(request.app.state, "auth_cache", None)
    if cache is not None:
        cache.clear()


async def _load_key(request: Request, digest: str) -> _Credential | None:
    async with request.app.state.sessionmaker() as s:
        row = (
            await s.execute(select(ApiKey, Tenant).join(Tenant, Tenant.id == ApiKey.tenant_id).where(ApiKey.key_hash == digest))
        ).first()
    if row is None:
        return None
    key, tenant = row
    return _Credential("key", f"key:{key.key_prefix}", key.site_admin, key.expires_at, key=key, key_tenant=tenant)


async def _load_session(request: Request, digest: str) -> _Credential | None:
    async with request.app.state.sessionmaker() as s:
        row = (
            await s.execute(
                select(UserSession, User).join(User, User.id == UserSession.user_id).where(UserSession.token_hash == digest)
            )
        ).first()
        if row is None:
            return None
        sess, user = row
        members = (
            await s.execute(
                select(Membership, Tenant)
                .join(Tenant, Tenant.id == Membership.tenant_id)
                .where(Membership.user_id == user.id)
                .order_by(Membership.created_at, Membership.id)
            )
        ).all()
    return _Credential(
        "user",
        f"user:{user.username}",
        user.site_admin,
        sess.expires_at,
        user=user,
        session=sess,
        memberships=[tuple(m) for m in members],
    )


async def _tenant_by_slug(request: Request, slug: str) -> Tenant:
    async with request.app.state.sessionmaker() as s:
        tenant: Tenant | None = await s.scalar(select(Tenant).where(Tenant.slug == slug))
    if tenant is None:
        raise FieldError("not_found", ("header", TENANT_HEADER), f"unknown tenant {slug!r}", "unknown_tenant")
    return tenant


async def _touch(request: Request, cred: _Credential) -> None:
    """Write ``api_keys.last_used_at`` / ``user_sessions.last_seen_at`` (at most once a minute per credential)."""
    maker = request.app.state.sessionmaker
    now = datetime.now(UTC)
    async with maker() as s, s.begin():
        if cred.key is not None:
            await s.execute(update(ApiKey).where(ApiKey.id == cred.key.id).values(last_used_at=now))
        elif cred.session is not None:
            await s.execute(update(UserSession).where(UserSession.id == cred.session.id).values(last_seen_at=now))


def _background(request: Request, coro: Any) -> None:
    tasks: set[asyncio.Task[None]] = request.app.state.auth_tasks
    task = asyncio.get_running_loop().create_task(coro)
    tasks.add(task)
    task.add_done_callback(tasks.discard)


async def _credential(request: Request) -> tuple[_Credential, tuple[str, str]]:
    """Find and check the request's credential; raises 401."""
    settings = request.app.state.settings
    cache: AuthCache = request.app.state.auth_cache
    authorization = request.headers.get("authorization")
    cookie = request.cookies.get(SESSION_COOKIE)
    if authorization is not None:
        loc = ("header", "Authorization")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token or len(token) > 200 or " " in token:
            raise unauthorized(loc, "expected 'Authorization: Bearer <api key>'")
        digest = hash_token(token)
        cred = cache.get(digest)
        if cred is None:
            cred = await _load_key(request, digest)
            if cred is None:
                raise unauthorized(loc, "unknown API key")
            cache.put(digest, cred)
    elif cookie:
        loc = ("cookie", SESSION_COOKIE)
        digest = hash_token(cookie[:200])
        cred = cache.get(digest)
        if cred is None:
            cred = await _load_session(request, digest)
            if cred is None:
                raise unauthorized(loc, "unknown or ended session: sign in again")
            cache.put(digest, cred)
    else:
        raise unauthorized(("header", "Authorization"), "no credentials: send 'Authorization: Bearer <api key>' or sign in")
    now = datetime.now(UTC)
    if cred.key is not None:
        if cred.key.revoked_at is not None:
            raise unauthorized(loc, "this API key was revoked")
        if cred.expires_at is not None and cred.expires_at <= now:
            raise unauthorized(loc, "this API key has expired")
        if cache.due_last_used(cred.key.id):
            _background(request, _touch(request, cred))
    else:
        assert cred.session is not None and cred.user is not None
        idle_limit = cred.session.last_seen_at + timedelta(seconds=settings.session_idle_s)
        if cred.session.revoked_at is not None or cred.expires_at is None or cred.expires_at <= now or idle_limit <= now:
            raise unauthorized(loc, "this session has ended: sign in again")
        if cred.user.disabled_at is not None:
            raise unauthorized(loc, "this user is disabled")
        if cache.due_last_used(cred.session.id):
            _background(request, _touch(request, cred))
    return cred, loc


def _refused_caller(request: Request, cred: _Credential) -> RefusedCaller:
    """What the audit log records of ``cred`` when its request is refused after the credential was checked."""
    slug = request.headers.get(TENANT_HEADER)
    site_flag = request.headers.get(SITE_ADMIN_HEADER)
    if cred.key is not None:
        tenant, role, own = cred.key_tenant, cred.key.role, {cred.key_tenant.slug} if cred.key_tenant else set()
    else:
        first = cred.memberships[0] if cred.memberships else None
        tenant, role = (first[1], first[0].role) if first else (None, "")
        own = {t.slug for _m, t in cred.memberships}
    return RefusedCaller(
        name=cred.name,
        api_key_id=cred.key.id if cred.key is not None else None,
        tenant=tenant,
        role=role,
        attempted_tenant=slug[:64] if slug and slug not in own else None,
        site_admin_claim=site_flag is not None and site_flag.strip() != "false",
    )


async def _resolve(request: Request) -> Principal:
    cred, loc = await _credential(request)
    try:
        return await _choose(request, cred, loc)
    except FieldError:
        request.state.refused_caller = _refused_caller(request, cred)
        raise


async def _choose(request: Request, cred: _Credential, loc: tuple[str, str]) -> Principal:
    """The principal of a checked credential: its tenant and role under the request's tenant and site-admin
    headers. Raises 422 (a header's value), 403 (a tenant or site-admin claim refused, CSRF) or 404 (an unknown
    tenant named by a site admin)."""
    slug = request.headers.get(TENANT_HEADER)
    site_flag = request.headers.get(SITE_ADMIN_HEADER)
    site_act = False
    if site_flag is not None and site_flag.strip() not in ("true", "false"):
        raise FieldError("invalid", ("header", SITE_ADMIN_HEADER), f"'true' or 'false', not {site_flag[:20]!r}", "invalid_header")
    if site_flag is not None and site_flag.strip() == "true":
        if not cred.site_admin:
            raise FieldError("forbidden", ("header", SITE_ADMIN_HEADER), "only a site admin may act across tenants", "forbidden")
        site_act = True
    if slug is not None and (not slug or len(slug) > 64):
        raise FieldError("invalid", ("header", TENANT_HEADER), "a tenant slug of 1 to 64 characters", "invalid_header")
    common: dict[str, Any] = {"kind": cred.kind, "name": cred.name, "site_admin": cred.site_admin, "site_act": site_act}
    if cred.key is not None:
        assert cred.key_tenant is not None
        tenant, role = cred.key_tenant, cred.key.role
        if slug and slug != tenant.slug:
            if not cred.site_admin:
                raise FieldError(
                    "forbidden",
                    ("header", TENANT_HEADER),
                    f"this key belongs to tenant {tenant.slug!r}; it cannot act for {slug!r}",
                    "forbidden",
                )
            tenant, role = await _tenant_by_slug(request, slug), "admin"
        return Principal(tenant=tenant, role=role, api_key_id=cred.key.id, **common)
    assert cred.session is not None and cred.user is not None
    if request.method not in SAFE_METHODS:
        sent = request.headers.get(CSRF_HEADER, "")
        if not hmac.compare_digest(sent.encode(), cred.session.csrf_token.encode()):
            raise FieldError("forbidden", ("header", CSRF_HEADER), "a signed-in write must echo the session's CSRF token", "csrf")
    ids: dict[str, Any] = {"user_id": cred.user.id, "session_id": cred.session.id, "csrf_token": cred.session.csrf_token}
    chosen = next((m for m in cred.memberships if slug is None or m[1].slug == slug), None)
    if chosen is not None:
        return Principal(tenant=chosen[1], role=chosen[0].role, **ids, **common)
    if cred.site_admin:
        return Principal(tenant=await _tenant_by_slug(request, slug or "default"), role="admin", **ids, **common)
    if slug is not None:
        raise FieldError("forbidden", ("header", TENANT_HEADER), f"you are not a member of tenant {slug!r}", "forbidden")
    raise FieldError("forbidden", loc, "this user belongs to no tenant yet; ask a tenant admin to add you", "forbidden")


async def principal_of(request: Request) -> Principal:
    """The :class:`Principal` of the request (resolved once, then kept on ``request.state``). Raises 401
    (no, malformed, unknown, revoked or expired credential), 403 (CSRF, tenant or site-admin header refused)
    or 404 (unknown tenant named by a site admin)."""
    cached: Principal | None = getattr(request.state, "principal", None)
    if cached is not None:
        return cached
    try:
        principal = await _resolve(request)
    except FieldError as exc:
        if exc.kind == "unauthenticated":
            limiter = getattr(request.app.state, "rate_limiter", None)
            if limiter is not None:
                await limiter.failed_auth(request)
        raise
    request.state.principal = principal
    return principal


@dataclass(frozen=True)
class SignedInUser:
    """A signed-in user as itself, whatever tenants it belongs to (none included): the caller of the routes a
    user answers for itself, such as its invitations. ``name`` is ``user:<username>``."""

    user_id: uuid.UUID
    username: str
    session_id: uuid.UUID
    name: str


async def signed_in_user(request: Request) -> SignedInUser:
    """The signed-in user of the request, without choosing a tenant (kept on ``request.state``). Raises 401 (no,
    unknown or ended credential), 403 naming ``Authorization`` for an API key (a key is a tenant's, not a
    person's) and 403 naming ``X-CSRF-Token`` for a write that does not echo the session's token."""
    cached: SignedInUser | None = getattr(request.state, "signed_in_user", None)
    if cached is not None:
        return cached
    try:
        cred, _loc = await _credential(request)
    except FieldError:
        limiter = getattr(request.app.state, "rate_limiter", None)
        if limiter is not None:
            await limiter.failed_auth(request)
        raise
    request.state.audit_name = cred.name
    if cred.user is None or cred.session is None:
        raise FieldError(
            "forbidden", ("header", "Authorization"), "this is answered by a signed-in user, not an API key", "not_a_user"
        )
    if request.method not in SAFE_METHODS:
        sent = request.headers.get(CSRF_HEADER, "")
        if not hmac.compare_digest(sent.encode(), cred.session.csrf_token.encode()):
            raise FieldError("forbidden", ("header", CSRF_HEADER), "a signed-in write must echo the session's CSRF token", "csrf")
    user = SignedInUser(user_id=cred.user.id, username=cred.user.username, session_id=cred.session.id, name=cred.name)
    request.state.signed_in_user = user
    return user


async def current_principal(request: Request) -> Principal:
    """FastAPI dependency: :func:`principal_of`."""
    return await principal_of(request)
