"""Credentials on the real stack: API keys (revoked, expired, malformed, wrong scheme, unknown, another
tenant's), the site-admin header, sign-in with its cookies and CSRF token, logout, session expiry, password
changes — and that passwords, keys and session tokens appear in no answer but the one that creates them, nor
in the gateway's log, nor in the audit log."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable

import httpx
import pytest
from sqlalchemy import text

from .principals import SECRETS, SITE, Session, bearer, loc, new_key, new_tenant, new_user, set_cookies

ME = "/v1/auth/me"


AUTH_CACHE_TTL_S = 2.0  # UEP_AUTH_CACHE_TTL_S of the test stack (the default)


def eventually(check: Callable[[], httpx.Response], status: int, timeout_s: float = 10.0) -> httpx.Response:
    """Repeat ``check`` until it answers ``status``. Between tries it waits longer than the gateway's
    credential cache keeps an entry, so a change made in the database behind the gateway's back is seen."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = check()
        if r.status_code == status or time.monotonic() > deadline:
            return r
        time.sleep(AUTH_CACHE_TTL_S + 0.5)


@pytest.fixture(scope="module")
def tenant(gateway) -> str:
    return new_tenant(gateway, "keys")


@pytest.fixture(scope="module")
def client(stack):
    """An httpx client without credentials."""
    with httpx.Client(base_url=stack.gateway_url, timeout=30) as c:
        yield c


@pytest.fixture(scope="module")
def admin_user(gateway, tenant) -> tuple[str, str, str]:
    return new_user(gateway, tenant, "admin", "kadmin")


# --------------------------------------------------------------------------------------------- API keys
def test_valid_key_is_its_tenant_and_role(client, gateway, tenant):
    key = new_key(gateway, tenant, "builder")
    r = client.get(ME, headers=bearer(str(key["key"])))
    assert r.status_code == 200, r.text
    me = r.json()
    assert me["kind"] == "key" and me["name"] == f"key:{key['prefix']}"
    assert me["tenant"]["slug"] == tenant and me["role"] == "builder"
    assert me["site_admin"] is False and me["site_act"] is False
    assert me["tenants"] == [{"slug": tenant, "name": f"Tenant {tenant}", "role": "builder"}]
    assert str(key["key"]) not in r.text


@pytest.mark.parametrize(
    "authorization",
    [
        "Basic dXNlcjpwYXNz",
        "Bearer",
        "Bearer a b",
        "Token uep_abc",
        "Bearer " + "x" * 300,
        "Bearer uep_" + "A" * 43,
    ],
    ids=["basic", "bearer-empty", "bearer-two-words", "other-scheme", "too-long", "unknown"],
)
def test_bad_authorization_is_401_naming_the_header(client, authorization):
    r = client.get(ME, headers={"Authorization": authorization})
    assert r.status_code == 401, r.text
    assert loc(r) == ["header", "Authorization"]
    assert r.headers["WWW-Authenticate"].startswith("Bearer")


def test_no_credentials_is_401(client):
    r = client.get(ME)
    assert r.status_code == 401
    assert loc(r) == ["header", "Authorization"]


def test_revoked_key_is_401(client, gateway, tenant):
    key = new_key(gateway, tenant, "viewer")
    auth = bearer(str(key["key"]))
    assert client.get(ME, headers=auth).status_code == 200
    r = gateway.delete(f"/v1/api-keys/{key['id']}", headers={"X-UEP-Tenant": tenant})
    assert r.status_code == 204, r.text
    r = eventually(lambda: client.get(ME, headers=auth), 401)
    assert r.status_code == 401 and loc(r) == ["header", "Authorization"]
    assert "revoked" in r.json()["detail"][0]["msg"]
    listed = {k["id"]: k for k in gateway.get("/v1/api-keys", headers={"X-UEP-Tenant": tenant}).json()}
    assert listed[key["id"]]["revoked_at"] is not None
    # revoking again keeps the first time
    first = listed[key["id"]]["revoked_at"]
    assert gateway.delete(f"/v1/api-keys/{key['id']}", headers={"X-UEP-Tenant": tenant}).status_code == 204
    listed = {k["id"]: k for k in gateway.get("/v1/api-keys", headers={"X-UEP-Tenant": tenant}).json()}
    assert listed[key["id"]]["revoked_at"] == first


def test_expired_key_is_401(client, gateway, db, tenant):
    key = new_key(gateway, tenant, "viewer", expires_in_days=1)
    auth = bearer(str(key["key"]))
    assert key["expires_at"] is not None
    assert client.get(ME, headers=auth).status_code == 200
    with db.begin() as c:
        c.execute(text("UPDATE api_keys SET expires_at = now() - interval '1 minute' WHERE id = :i"), {"i": key["id"]})
    r = eventually(lambda: client.get(ME, headers=auth), 401)
    assert r.status_code == 401 and loc(r) == ["header", "Authorization"]
    assert "expired" in r.json()["detail"][0]["msg"]


def test_another_tenants_key_cannot_name_this_tenant(client, gateway, tenant):
    other = new_tenant(gateway, "other")
    key = new_key(gateway, other, "admin")
    r = client.get("/v1/api-keys", headers=bearer(str(key["key"]), **{"X-UEP-Tenant": tenant}))
    assert r.status_code == 403, r.text
    assert loc(r) == ["header", "X-UEP-Tenant"]
    # its own tenant named explicitly is fine
    r = client.get(ME, headers=bearer(str(key["key"]), **{"X-UEP-Tenant": other}))
    assert r.status_code == 200 and r.json()["tenant"]["slug"] == other


def test_site_admin_header_from_a_non_site_admin_is_403(client, gateway, tenant, admin_user):
    key = new_key(gateway, tenant, "admin")
    r = client.get(ME, headers=bearer(str(key["key"]), **SITE))
    assert r.status_code == 403, r.text
    assert loc(r) == ["header", "X-UEP-Site-Admin"]
    s = Session(client.base_url, admin_user[0], admin_user[1])
    r = s.client.get(ME, headers=s.headers(csrf=False, **SITE))
    assert r.status_code == 403 and loc(r) == ["header", "X-UEP-Site-Admin"]
    s.close()


def test_the_site_admin_key_acts_across_tenants_only_when_it_says_so(gateway, tenant):
    r = gateway.get(ME)
    assert r.status_code == 200 and r.json()["site_admin"] is True and r.json()["site_act"] is False
    assert gateway.get("/v1/tenants").status_code == 403
    r = gateway.get("/v1/tenants", headers=SITE)
    assert r.status_code == 200 and tenant in {t["slug"] for t in r.json()}
    r = gateway.get(ME, headers={"X-UEP-Tenant": tenant})
    assert r.status_code == 200 and r.json()["tenant"]["slug"] == tenant and r.json()["role"] == "admin"
    r = gateway.get(ME, headers={"X-UEP-Tenant": "no-such-tenant-xyz"})
    assert r.status_code == 404 and loc(r) == ["header", "X-UEP-Tenant"]


@pytest.mark.parametrize("value", ["yes", "1", "True", "TRUE", "on", "", "truee"])
def test_the_site_admin_header_takes_only_true_or_false(gateway, tenant, client, value):
    r = gateway.get("/v1/tenants", headers={"X-UEP-Site-Admin": value})
    assert r.status_code == 422, r.text
    assert loc(r) == ["header", "X-UEP-Site-Admin"] and r.json()["detail"][0]["type"] == "invalid_header"
    assert "'true' or 'false'" in r.json()["detail"][0]["msg"]
    key = new_key(gateway, tenant, "admin")  # the same for a caller who is no site admin
    r = client.get(ME, headers=bearer(str(key["key"]), **{"X-UEP-Site-Admin": value}))
    assert r.status_code == 422 and loc(r) == ["header", "X-UEP-Site-Admin"], r.text


def test_the_site_admin_header_false_is_the_same_as_none(gateway, tenant, client):
    r = gateway.get(ME, headers={"X-UEP-Site-Admin": "false"})
    assert r.status_code == 200 and r.json()["site_admin"] is True and r.json()["site_act"] is False
    r = gateway.get("/v1/tenants", headers={"X-UEP-Site-Admin": "false"})
    assert r.status_code == 403 and loc(r) == ["header", "X-UEP-Site-Admin"]
    assert gateway.get("/v1/tenants", headers={"X-UEP-Site-Admin": "true"}).status_code == 200
    key = new_key(gateway, tenant, "viewer")
    r = client.get(ME, headers=bearer(str(key["key"]), **{"X-UEP-Site-Admin": "false"}))
    assert r.status_code == 200 and r.json()["site_act"] is False and r.json()["tenant"]["slug"] == tenant


def test_a_site_admin_key_only_by_a_site_admin_acting(gateway, tenant, client):
    key = new_key(gateway, tenant, "admin")
    r = client.post("/v1/api-keys", json={"role": "viewer", "site_admin": True}, headers=bearer(str(key["key"])))
    assert r.status_code == 403 and loc(r) == ["body", "site_admin"]
    r = gateway.post("/v1/api-keys", json={"role": "viewer", "site_admin": True}, headers={"X-UEP-Tenant": tenant})
    assert r.status_code == 403 and loc(r) == ["body", "site_admin"]
    r = gateway.post("/v1/api-keys", json={"role": "viewer", "site_admin": True}, headers={"X-UEP-Tenant": tenant, **SITE})
    assert r.status_code == 201, r.text
    SECRETS.add(r.json()["key"])
    assert r.json()["site_admin"] is True


def test_key_list_shows_metadata_only(gateway, tenant, db):
    key = new_key(gateway, tenant, "viewer", name="listed key", expires_in_days=30)
    r = gateway.get("/v1/api-keys", headers={"X-UEP-Tenant": tenant})
    assert r.status_code == 200
    row = next(k for k in r.json() if k["id"] == key["id"])
    assert set(row) == {
        "id",
        "prefix",
        "name",
        "role",
        "site_admin",
        "created_by",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    }
    assert row["prefix"] == key["prefix"] and row["name"] == "listed key" and row["role"] == "viewer"
    assert row["created_by"].startswith("key:uep_")
    with db.connect() as c:
        digest = c.execute(text("SELECT key_hash FROM api_keys WHERE id = :i"), {"i": key["id"]}).scalar_one()
    assert str(key["key"]) not in r.text and digest not in r.text


def test_another_tenants_key_id_is_404(gateway, tenant):
    other = new_tenant(gateway, "keyowner")
    key = new_key(gateway, other, "viewer")
    r = gateway.delete(f"/v1/api-keys/{key['id']}", headers={"X-UEP-Tenant": tenant})
    assert r.status_code == 404 and loc(r) == ["path", "key_id"]
    r = gateway.delete(f"/v1/api-keys/{uuid.uuid4()}", headers={"X-UEP-Tenant": tenant})
    assert r.status_code == 404
    r = gateway.delete("/v1/api-keys/not-a-uuid", headers={"X-UEP-Tenant": tenant})
    assert r.status_code == 422 and loc(r) == ["path", "key_id"]


def test_key_bodies_are_checked(gateway, tenant):
    h = {"X-UEP-Tenant": tenant}
    assert loc(gateway.post("/v1/api-keys", json={"role": "owner"}, headers=h)) == ["body", "role"]
    assert loc(gateway.post("/v1/api-keys", json={"role": "viewer", "expires_in_days": 0}, headers=h)) == [
        "body",
        "expires_in_days",
    ]
    assert loc(gateway.post("/v1/api-keys", json={"role": "viewer", "name": "x" * 201}, headers=h)) == ["body", "name"]
    assert loc(gateway.post("/v1/api-keys", json={"role": "viewer", "extra": 1}, headers=h)) == ["body", "extra"]


# --------------------------------------------------------------------------------------------- sessions
def test_login_sets_both_cookies_with_their_flags(client, admin_user, tenant):
    username, password, _ = admin_user
    r = client.post("/v1/auth/login", json={"username": username, "password": password})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["user"]["username"] == username and body["user"]["site_admin"] is False
    assert body["tenants"] == [{"slug": tenant, "name": f"Tenant {tenant}", "role": "admin"}]
    assert len(body["csrf_token"]) >= 32 and body["expires_at"]
    cookies = set_cookies(r)
    session = cookies["uep_session"]["uep_session"]
    csrf = cookies["uep_csrf"]["uep_csrf"]
    assert session.value.startswith("uepsess_") and csrf.value == body["csrf_token"]
    SECRETS.add(session.value)
    for morsel in (session, csrf):
        assert morsel["samesite"].lower() == "lax"
        assert morsel["secure"] is True  # the test stack keeps UEP_SESSION_COOKIE_SECURE at its default
        assert morsel["path"] == "/"
        assert int(morsel["max-age"]) == 8 * 3600
    assert session["httponly"] is True
    assert not csrf["httponly"]
    assert password not in r.text and session.value not in r.text
    assert r.headers["Cache-Control"] == "no-store"


def test_wrong_password_and_unknown_user_get_one_answer(client, admin_user):
    username, _, _ = admin_user
    wrong = client.post("/v1/auth/login", json={"username": username, "password": "not-the-password-123"})
    unknown = client.post("/v1/auth/login", json={"username": "nobody-" + uuid.uuid4().hex, "password": "whatever-123456"})
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.json() == unknown.json()
    assert loc(wrong) == ["body", "password"]
    assert "set-cookie" not in wrong.headers and "set-cookie" not in unknown.headers


def test_login_bodies_are_checked(client):
    assert loc(client.post("/v1/auth/login", json={"username": "", "password": "x"})) == ["body", "username"]
    assert loc(client.post("/v1/auth/login", json={"username": "x" * 65, "password": "x"})) == ["body", "username"]
    assert loc(client.post("/v1/auth/login", json={"username": "a", "password": "x" * 5000})) == ["body", "password"]
    r = client.post("/v1/auth/login", json={"username": "a", "password": "x" * 2000})
    assert r.status_code == 422 and loc(r) == ["body", "password"]
    assert loc(client.post("/v1/auth/login", json={"username": "a"})) == ["body", "password"]


def test_cookie_get_works_and_writes_need_the_csrf_token(client, admin_user, tenant):
    s = Session(client.base_url, admin_user[0], admin_user[1])
    r = s.get(ME)
    assert r.status_code == 200, r.text
    me = r.json()
    assert me["kind"] == "user" and me["name"] == f"user:{admin_user[0]}" and me["role"] == "admin"
    assert me["tenant"]["slug"] == tenant and me["user"]["username"] == admin_user[0]
    assert me["tenants"] == [{"slug": tenant, "name": f"Tenant {tenant}", "role": "admin"}]
    create = {"role": "viewer", "name": "by cookie"}
    r = s.client.post("/v1/api-keys", json=create, headers=s.headers(csrf=False))
    assert r.status_code == 403 and loc(r) == ["header", "X-CSRF-Token"]
    r = s.client.post("/v1/api-keys", json=create, headers={**s.headers(), "X-CSRF-Token": "wrong"})
    assert r.status_code == 403 and loc(r) == ["header", "X-CSRF-Token"]
    r = s.client.post("/v1/api-keys", json=create, headers=s.headers())
    assert r.status_code == 201, r.text
    SECRETS.add(r.json()["key"])
    assert r.json()["created_by"] == f"user:{admin_user[0]}"
    s.close()


def test_logout_ends_the_session(client, admin_user):
    s = Session(client.base_url, admin_user[0], admin_user[1])
    assert s.get(ME).status_code == 200
    r = s.client.post("/v1/auth/logout", headers=s.headers(csrf=False))
    assert r.status_code == 403 and loc(r) == ["header", "X-CSRF-Token"]
    r = s.client.post("/v1/auth/logout", headers=s.headers())
    assert r.status_code == 204
    cleared = set_cookies(r)
    assert cleared["uep_session"]["uep_session"].value == "" and int(cleared["uep_session"]["uep_session"]["max-age"]) == 0
    r = s.get(ME)
    assert r.status_code == 401 and loc(r) == ["cookie", "uep_session"]
    s.close()


def test_logout_with_a_key_is_409(client, gateway, tenant):
    key = new_key(gateway, tenant, "viewer")
    r = client.post("/v1/auth/logout", headers=bearer(str(key["key"])))
    assert r.status_code == 409 and loc(r) == ["header", "Authorization"]
    assert client.get(ME, headers=bearer(str(key["key"]))).status_code == 200


def test_an_expired_session_is_401(client, admin_user, db):
    s = Session(client.base_url, admin_user[0], admin_user[1])
    assert s.get(ME).status_code == 200
    with db.begin() as c:
        n = c.execute(
            text("UPDATE user_sessions SET expires_at = now() - interval '1 second' WHERE csrf_token = :c"), {"c": s.csrf}
        ).rowcount
    assert n == 1
    r = eventually(lambda: s.get(ME), 401)
    assert r.status_code == 401 and loc(r) == ["cookie", "uep_session"]
    s.close()


def test_an_unknown_session_cookie_is_401(client):
    r = client.get(ME, headers={"Cookie": "uep_session=uepsess_nothing"})
    assert r.status_code == 401 and loc(r) == ["cookie", "uep_session"]


def test_password_change(client, gateway, tenant):
    username, password, _ = new_user(gateway, tenant, "viewer", "pwchange")
    first = Session(client.base_url, username, password)
    second = Session(client.base_url, username, password)
    change = "/v1/auth/password"
    r = second.client.post(
        change, json={"current_password": "wrong-password-1", "new_password": "x" * 20}, headers=second.headers()
    )
    assert r.status_code == 401 and loc(r) == ["body", "current_password"]
    r = second.client.post(change, json={"current_password": password, "new_password": "short"}, headers=second.headers())
    assert r.status_code == 422 and loc(r) == ["body", "new_password"]
    r = second.client.post(change, json={"current_password": password, "new_password": password}, headers=second.headers())
    assert r.status_code == 422 and loc(r) == ["body", "new_password"]
    new = "new-" + password
    SECRETS.add(new)
    r = second.client.post(change, json={"current_password": password, "new_password": new}, headers=second.headers())
    assert r.status_code == 204, r.text
    assert second.get(ME).status_code == 200  # this session continues
    r = eventually(lambda: first.get(ME), 401)  # the other one ended
    assert r.status_code == 401
    assert client.post("/v1/auth/login", json={"username": username, "password": password}).status_code == 401
    third = Session(client.base_url, username, new)
    assert third.get(ME).status_code == 200
    for s in (first, second, third):
        s.close()


def test_a_key_cannot_change_a_password(client, gateway, tenant):
    key = new_key(gateway, tenant, "admin")
    r = client.post(
        "/v1/auth/password", json={"current_password": "x" * 12, "new_password": "y" * 12}, headers=bearer(str(key["key"]))
    )
    assert r.status_code == 409 and loc(r) == ["header", "Authorization"]


def test_a_member_of_two_tenants_picks_one_by_header(client, gateway, tenant):
    other = new_tenant(gateway, "second")
    username, password, _ = new_user(gateway, tenant, "viewer", "multi")
    r = gateway.post("/v1/invitations", json={"username": username, "role": "builder"}, headers={"X-UEP-Tenant": other})
    assert r.status_code == 202, r.text
    s = Session(client.base_url, username, password)
    assert s.post(f"/v1/auth/invitations/{r.json()['id']}/accept").json()["slug"] == other
    s.close()
    s = Session(client.base_url, username, password)
    assert [t["slug"] for t in s.login.json()["tenants"]] == [tenant, other]
    assert s.get(ME).json()["tenant"]["slug"] == tenant  # the oldest membership
    r = s.client.get(ME, headers=s.headers(csrf=False, **{"X-UEP-Tenant": other}))
    assert r.json()["tenant"]["slug"] == other and r.json()["role"] == "builder"
    r = s.client.get(ME, headers=s.headers(csrf=False, **{"X-UEP-Tenant": "default"}))
    assert r.status_code == 403 and loc(r) == ["header", "X-UEP-Tenant"]
    s.close()


# --------------------------------------------------------------------------------------------- secrets
def test_zz_secrets_appear_nowhere(gateway, stack, db, tenant):
    """Runs last in this module: every secret the identity tests made so far is absent from the list
    answers, the gateway's log and trace files, and every audit row."""
    assert len(SECRETS) >= 10
    h = {"X-UEP-Tenant": tenant}
    for url, headers in (
        ("/v1/api-keys", h),
        ("/v1/members", h),
        ("/v1/audit?limit=500", h),
        ("/v1/audit?limit=500", SITE),
        (ME, h),
        ("/v1/tenants", SITE),
    ):
        r = gateway.get(url, headers=headers)
        assert r.status_code == 200, (url, r.text)
        leaked = [s for s in SECRETS if s in r.text]
        assert not leaked, f"{url} shows a secret"
    files = [stack.run_dir / "logs" / "gateway.log", stack.run_dir / "traces" / "gateway.jsonl"]
    assert files[0].exists()
    for path in files:
        if path.exists():
            content = path.read_text(errors="replace")
            leaked = [s for s in SECRETS if s in content]
            assert not leaked, f"{path.name} holds {len(leaked)} secret(s)"
    with db.connect() as c:
        rows = [json.dumps(r) for r in c.execute(text("SELECT row_to_json(a) FROM audit_log a")).scalars()]
        hashes = set(c.execute(text("SELECT key_hash FROM api_keys UNION ALL SELECT token_hash FROM user_sessions")).scalars())
        password_hashes = {h for h in c.execute(text("SELECT password_hash FROM users")).scalars() if h}
    assert rows
    blob = "\n".join(rows)
    assert not [s for s in SECRETS | hashes | password_hashes if s in blob]
