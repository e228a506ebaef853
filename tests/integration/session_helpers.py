"""Signed-in users for tests, made directly in the database (no sign-in route needed): a user, its
membership of a tenant and a live session whose cookie and CSRF token the test sends."""

from __future__ import annotations

import secrets
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import text

from uep_common.tables.identity import hash_token, new_session_token


def signed_in(db, tenant: str, role: str, username: str | None = None) -> dict:
    """A new user ``username`` (default: a fresh one) with ``role`` in tenant ``tenant`` and a session of it.
    Returns ``{username, user_id, cookies: {uep_session, uep_csrf}, csrf}``."""
    username = username or f"u-{uuid.uuid4().hex[:10]}"
    user_id, token, csrf = uuid.uuid4(), new_session_token(), secrets.token_urlsafe(24)
    with db.begin() as c:
        tenant_id = c.execute(text("SELECT id FROM tenants WHERE slug = :t"), {"t": tenant}).scalar_one()
        c.execute(
            text("INSERT INTO users (id, username, display_name, site_admin) VALUES (:id, :u, :u, false)"),
            {"id": user_id, "u": username},
        )
        c.execute(
            text("INSERT INTO memberships (id, user_id, tenant_id, role) VALUES (:id, :u, :t, :r)"),
            {"id": uuid.uuid4(), "u": user_id, "t": tenant_id, "r": role},
        )
        c.execute(
            text("INSERT INTO user_sessions (id, token_hash, user_id, csrf_token, expires_at) VALUES (:id, :h, :u, :c, :x)"),
            {
                "id": uuid.uuid4(),
                "h": hash_token(token),
                "u": user_id,
                "c": csrf,
                "x": datetime.now(UTC) + timedelta(hours=2),
            },
        )
    return {"username": username, "user_id": user_id, "cookies": {"uep_session": token, "uep_csrf": csrf}, "csrf": csrf}
