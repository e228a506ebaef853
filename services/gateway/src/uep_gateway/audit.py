"""The audit log: one ``audit_log`` row for every state-changing call (success or refusal).

:class:`AuditMiddleware` wraps the app as plain ASGI. After a route marked ``audited`` in
:mod:`uep_gateway.access` has answered, it records who (the principal's name, or ``anonymous`` when
credentials failed), the tenant, the action (operation id), the path's ids, the HTTP status and outcome,
the request id (``X-Request-ID`` as sent, else a new UUID, echoed in the response) and the time. A valid
credential refused for what it claimed (another tenant, site admin) is recorded as itself — name, key id,
its own tenant and role — with the claim (:class:`uep_gateway.auth.RefusedCaller`); the tried tenant's admins
see that row too. It also adds the rate-limit headers left by :mod:`uep_gateway.ratelimit`. Secrets never
reach the log: neither bodies nor headers are recorded (a key's id and prefix are not secrets).
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import MutableMapping
from typing import Any

from sqlalchemy import select
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from uep_common.tables.identity import AuditEntry
from uep_common.tables.models import Tenant
from uep_gateway.auth import RefusedCaller
from uep_gateway.ratelimit import STATE_KEY as RATE_HEADERS_KEY

log = logging.getLogger(__name__)
REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def _outcome(status: int) -> str:
    if status < 400:
        return "success"
    if status in (401, 403):
        return "denied"
    if status == 429:
        return "rate_limited"
    return "error" if status >= 500 else "refused"


class AuditMiddleware:
    """ASGI middleware: request ids, rate-limit headers and the audit log (``sessionmaker`` is read from the
    app's state when the first request comes)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve an HTTP request with ``X-Request-Id`` (the caller's when well-formed, else a new one) and the
        rate-limit headers on its response, then write the audit entry of an audited operation (a 500 when the
        app raised); other scopes pass through."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent_id = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        request_id = sent_id if REQUEST_ID.match(sent_id) else uuid.uuid4().hex
        state: MutableMapping[str, Any] = scope.setdefault("state", {})
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                for k, v in (state.get(RATE_HEADERS_KEY) or {}).items():
                    headers.append((k.lower().encode(), v.encode()))
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            access = state.get("access")
            if access is not None and access.audited:
                await self._record(scope, state, access, status, request_id)

    async def _record(self, scope: Scope, state: MutableMapping[str, Any], access: Any, status: int, request_id: str) -> None:
        principal = state.get("principal")
        refused: RefusedCaller | None = None if principal else state.get("refused_caller")
        app = scope["app"]
        client = scope.get("client")
        if principal is not None:
            who: dict[str, Any] = {
                "tenant_id": principal.tenant.id,
                "principal": principal.name,
                "role": principal.role,
                "api_key_id": principal.api_key_id,
            }
        elif refused is not None:
            who = {
                "tenant_id": refused.tenant.id if refused.tenant else None,
                "principal": refused.name,
                "role": refused.role,
                "api_key_id": refused.api_key_id,
                "attempted_tenant": refused.attempted_tenant,
                "site_admin_claim": refused.site_admin_claim,
            }
        else:
            who = {"tenant_id": None, "principal": str(state.get("audit_name") or "anonymous")[:200], "role": ""}
        entry = AuditEntry(
            **who,
            site_admin_act=bool(principal and principal.site_act),
            action=access.op,
            method=scope["method"],
            path=scope["path"][:500],
            object_ids={k: str(v)[:200] for k, v in (scope.get("path_params") or {}).items()},
            status_code=status,
            outcome=_outcome(status),
            request_id=request_id,
            client=(client[0] if client else "")[:100],
        )
        try:
            async with app.state.sessionmaker() as s, s.begin():
                if entry.attempted_tenant:  # the tried tenant's admins see the row too (when it exists)
                    entry.attempted_tenant_id = await s.scalar(select(Tenant.id).where(Tenant.slug == entry.attempted_tenant))
                s.add(entry)
        except Exception:
            log.exception("audit row for %s %s not written", scope["method"], scope["path"])
