"""Helpers of the identity tests: fresh tenants, keys and users made through the API itself, and sign-in.

Every secret made here (passwords, API keys, session tokens) is remembered in :data:`SECRETS`, so a test can
check that none of them shows up where it must not (response bodies, the gateway's log, the audit log).
"""

from __future__ import annotations

import secrets
import uuid
from http.cookies import SimpleCookie

import httpx

SITE = {"X-UEP-Site-Admin": "true"}
SECRETS: set[str] = set()
"""Every password, API key and session token the identity tests made."""


def fresh_slug(prefix: str) -> str:
    """A tenant slug no other test run uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def new_tenant(gateway: httpx.Client, prefix: str = "t") -> str:
    """Create a tenant through ``POST /v1/tenants`` (as the site admin); returns its slug."""
    slug = fresh_slug(prefix)
    r = gateway.post("/v1/tenants", json={"slug": slug, "name": f"Tenant {slug}"}, headers=SITE)
    assert r.status_code == 201, r.text
    assert r.json()["slug"] == slug
    return slug


def new_key(gateway: httpx.Client, tenant: str, role: str, **extra: object) -> dict[str, object]:
    """Create an API key of ``tenant`` with ``role`` (the site admin's key naming the tenant); returns the
    one-time creation answer (``key``, ``id``, ``prefix`` …)."""
    r = gateway.post("/v1/api-keys", json={"role": role, "name": f"{role} key", **extra}, headers={"X-UEP-Tenant": tenant})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["key"].startswith("uep_") and body["prefix"] == body["key"][:12] and body["role"] == role
    SECRETS.add(body["key"])
    return body


def new_password() -> str:
    """A password that meets the policy."""
    password = "pw-" + secrets.token_urlsafe(18)
    SECRETS.add(password)
    return password


def new_user(gateway: httpx.Client, tenant: str, role: str, prefix: str = "u") -> tuple[str, str, str]:
    """Create a user and make it a member of ``tenant`` with ``role`` (``POST /v1/members``, the site admin
    acting as one); returns (username, password, user id)."""
    username = f"{prefix}-{uuid.uuid4().hex[:10]}"
    password = new_password()
    r = gateway.post(
        "/v1/members",
        json={"username": username, "role": role, "password": password},
        headers={"X-UEP-Tenant": tenant, **SITE},
    )
    assert r.status_code == 201, r.text
    assert r.json()["user_created"] is True and r.json()["role"] == role
    return username, password, r.json()["user_id"]


def set_cookies(response: httpx.Response) -> dict[str, SimpleCookie]:
    """The ``Set-Cookie`` headers of ``response``, by cookie name (each parsed with its attributes)."""
    out: dict[str, SimpleCookie] = {}
    for header in response.headers.get_list("set-cookie"):
        cookie: SimpleCookie = SimpleCookie()
        cookie.load(header)
        for name in cookie:
            out[name] = cookie
    return out


class Session:
    """A signed-in user: its session token and CSRF token, and an httpx client that sends the cookie itself
    (httpx keeps Secure cookies away from plain http, so the ``Cookie`` header is written by hand)."""

    def __init__(self, base_url: str, username: str, password: str) -> None:
        self.client = httpx.Client(base_url=base_url, timeout=30)
        self.login = self.client.post("/v1/auth/login", json={"username": username, "password": password})
        assert self.login.status_code == 200, self.login.text
        cookies = set_cookies(self.login)
        self.token = cookies["uep_session"]["uep_session"].value
        self.csrf = self.login.json()["csrf_token"]
        SECRETS.add(self.token)
        assert cookies["uep_csrf"]["uep_csrf"].value == self.csrf

    def headers(self, csrf: bool = True, **extra: str) -> dict[str, str]:
        """The cookie header (and, by default, the CSRF header) of a request of this session."""
        out = {"Cookie": f"uep_session={self.token}", **extra}
        if csrf:
            out["X-CSRF-Token"] = self.csrf
        return out

    def post(self, url: str, **kw: object) -> httpx.Response:
        """A POST with the session cookie and the CSRF token."""
        return self.client.post(url, headers=self.headers(), **kw)  # type: ignore[arg-type]

    def get(self, url: str, **kw: object) -> httpx.Response:
        """A GET with the session cookie."""
        return self.client.get(url, headers=self.headers(csrf=False), **kw)  # type: ignore[arg-type]

    def close(self) -> None:
        """Close the client (the session stays valid)."""
        self.client.close()


def bearer(key: str, **extra: str) -> dict[str, str]:
    """Headers of a request authenticated with ``key``."""
    return {"Authorization": f"Bearer {key}", **extra}


def loc(response: httpx.Response) -> list[object]:
    """The ``loc`` of the first problem of an error answer."""
    detail = response.json()["detail"]
    assert isinstance(detail, list) and detail, response.text
    return list(detail[0]["loc"])
