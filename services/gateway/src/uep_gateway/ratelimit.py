"""Rate limits at the gateway, kept in Redis by the ``limits`` library (sliding-window counters).

Each call counts against two windows: its principal's (an API key, or a signed-in user) for the route's
class — ``read``, ``write``, ``upload`` or ``auth`` (see :mod:`uep_gateway.access`) — at the rate of the
principal's role, and its tenant's, shared by every principal of the tenant. Requests whose API key or session
fails (401) count against their client address. Sign-in counts only its failures, in two windows of its own:
per account (the username) and per client address; a sign-in is refused before the password is checked when
either is spent. So a flood of bad keys, or of bad passwords for other accounts, does not deny sign-in to the
other users at that address (only more failed sign-ins than the address window allows do). Past a limit the
answer is 429 with ``Retry-After`` and the
IETF draft headers ``RateLimit-Limit``, ``RateLimit-Remaining``, ``RateLimit-Reset`` (seconds) and
``RateLimit-Policy`` (``<limit>;w=<window seconds>``); every other answer of a limited route carries
``RateLimit-Policy``, known without asking Redis. The two windows are counted concurrently, so a call
costs one Redis round trip of latency; the window's state is read only when a limit is passed.

Library choice: ``limits`` (maintained, the engine of slowapi and Flask-Limiter) gives atomic Redis-backed
sliding windows; slowapi's decorator model fits poorly with limits chosen per role and route class.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from typing import TYPE_CHECKING

from limits import RateLimitItem, parse
from limits.aio.storage import RedisStorage
from limits.aio.strategies import SlidingWindowCounterRateLimiter

from uep_gateway.errors import FieldError

if TYPE_CHECKING:
    from fastapi import Request

    from uep_gateway.access import Access
    from uep_gateway.auth import Principal
    from uep_gateway.settings import GatewaySettings

CLASSES = ("read", "write", "upload", "auth")
STATE_KEY = "rate_headers"


class RateLimiter:
    """Per-principal and per-tenant limits. ``settings.rate_limits`` maps ``<role>.<class>`` (or
    ``*.<class>``) to a ``limits`` string such as ``"600/minute"``; ``settings.tenant_rate_limits`` maps a
    class to the tenant-wide rate; ``settings.failed_auth_rate_limit`` bounds failed keys and sessions per
    client address; ``failed_signin_account_rate_limit`` and ``failed_signin_client_rate_limit`` bound failed
    sign-ins per account and per client address."""

    def __init__(self, settings: GatewaySettings) -> None:
        self.enabled = settings.rate_limits_enabled
        self.storage = RedisStorage("async+" + settings.redis_url, implementation="redispy", key_prefix="uep:ratelimit")
        self.strategy = SlidingWindowCounterRateLimiter(self.storage)
        self.by_role: dict[str, RateLimitItem] = {k: parse(v) for k, v in settings.rate_limits.items()}
        self.by_tenant: dict[str, RateLimitItem] = {k: parse(v) for k, v in settings.tenant_rate_limits.items()}
        self.failed = parse(settings.failed_auth_rate_limit)
        self.signin_account = parse(settings.failed_signin_account_rate_limit)
        self.signin_client = parse(settings.failed_signin_client_rate_limit)

    def limit_for(self, role: str, klass: str) -> RateLimitItem | None:
        """The principal limit of ``role`` for route class ``klass`` (role-specific first, then ``*``)."""
        return self.by_role.get(f"{role}.{klass}") or self.by_role.get(f"*.{klass}")

    async def _hit(self, item: RateLimitItem, *ids: str) -> None:
        if not await self.strategy.hit(item, *ids):
            await self._refuse(item, *ids)

    async def _refuse(
        self, item: RateLimitItem, *ids: str, loc: tuple[str, str] = ("header", "Authorization"), what: str | None = None
    ) -> None:
        """Raise the 429 of a passed window naming ``loc``, with ``Retry-After`` and the ``RateLimit-*`` headers
        (``what`` names the window in the message; default: its first id)."""
        stats = await self.strategy.get_window_stats(item, *ids)
        retry = max(1, math.ceil(stats.reset_time - time.time()))
        raise FieldError(
            "rate_limited",
            loc,
            f"rate limit {item.amount} per {item.get_expiry()} s exceeded ({what or ids[0]}); retry in {retry} s",
            "rate_limited",
            headers={"Retry-After": str(retry), **_headers(item, stats.remaining, retry)},
        )

    async def check(self, request: Request, principal: Principal, access: Access) -> None:
        """Count the call; raise 429 past a limit. Leaves ``RateLimit-Policy`` of the principal's window on
        ``request.state`` for the answer."""
        if not self.enabled:
            return
        klass = access.limit
        who = f"{principal.kind}:{principal.api_key_id or principal.user_id}"
        item = self.limit_for("site" if principal.site_act else principal.role, klass)
        windows = []
        if (tenant_item := self.by_tenant.get(klass)) is not None:
            windows.append((tenant_item, (f"tenant:{principal.tenant.id}", klass)))
        if item is not None:
            windows.append((item, (who, klass)))
        if not windows:
            return
        allowed = await asyncio.gather(*(self.strategy.hit(w, *ids) for w, ids in windows))
        for ok, (window, ids) in zip(allowed, windows, strict=True):
            if not ok:
                await self._refuse(window, *ids)
        if item is not None:
            setattr(request.state, STATE_KEY, {"RateLimit-Policy": f"{item.amount};w={item.get_expiry()}"})

    async def check_user(self, request: Request, user_id: object, access: Access) -> None:
        """Count a call of a signed-in user answering for itself (no tenant: its invitations) in the windows
        of the viewer role (``viewer.<class>``, else ``*.<class>``); raise 429 past one."""
        if not self.enabled:
            return
        item = self.limit_for("viewer", access.limit)
        if item is not None:
            await self._hit(item, f"user:{user_id}", access.limit)
            setattr(request.state, STATE_KEY, {"RateLimit-Policy": f"{item.amount};w={item.get_expiry()}"})

    async def failed_auth(self, request: Request) -> None:
        """Count a request whose API key or session failed; raise 429 once its client address passes
        ``failed_auth_rate_limit``. Sign-in has windows of its own (:meth:`check_signin`)."""
        if not self.enabled:
            return
        await self._hit(self.failed, f"failed-auth:{_client(request)}")

    def _signin_windows(self, request: Request, username: str) -> list[tuple[RateLimitItem, tuple[str, ...], str, str]]:
        """(window, ids, field named by its 429, what it counts) of a sign-in: failures of the account (the
        username, case-folded and hashed: no user text in Redis keys) and of the client address."""
        account = hashlib.sha256(username.casefold().encode()).hexdigest()[:32]
        return [
            (self.signin_account, ("failed-signin-account", account), "username", "failed sign-ins of this account"),
            (self.signin_client, ("failed-signin-client", _client(request)), "password", "failed sign-ins from this address"),
        ]

    async def check_signin(self, request: Request, username: str) -> None:
        """Raise 429 (naming ``body.username`` or ``body.password``) when the account's or the client address's
        window of failed sign-ins is spent; counts nothing (a sign-in that succeeds costs no window)."""
        if not self.enabled:
            return
        windows = self._signin_windows(request, username)
        allowed = await asyncio.gather(*(self.strategy.test(item, *ids) for item, ids, _loc, _what in windows))
        for ok, (item, ids, field, what) in zip(allowed, windows, strict=True):
            if not ok:
                await self._refuse(item, *ids, loc=("body", field), what=what)

    async def failed_signin(self, request: Request, username: str) -> None:
        """Count a failed sign-in against the account's and the client address's windows."""
        if not self.enabled:
            return
        await asyncio.gather(
            *(self.strategy.hit(item, *ids) for item, ids, _loc, _what in self._signin_windows(request, username))
        )


def _client(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _headers(item: RateLimitItem, remaining: int, reset_s: int) -> dict[str, str]:
    window = item.get_expiry()
    return {
        "RateLimit-Limit": str(item.amount),
        "RateLimit-Remaining": str(max(0, remaining)),
        "RateLimit-Reset": str(reset_s),
        "RateLimit-Policy": f"{item.amount};w={window}",
    }
