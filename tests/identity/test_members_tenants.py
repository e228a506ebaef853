"""Members and tenants on the real stack: a site admin creates accounts; a tenant admin invites users (one
answer for known and unknown names, nothing attached until the user accepts), re-roles and removes members,
never loses the last admin, and sees no other tenant's members or invitations; only a site admin acting as
one lists and creates tenants."""

from __future__ import annotations

import uuid

import httpx
import pytest

from .principals import SITE, Session, bearer, loc, new_key, new_password, new_tenant, new_user


@pytest.fixture(scope="module")
def tenant(gateway) -> str:
    return new_tenant(gateway, "members")


@pytest.fixture(scope="module")
def admin(gateway, tenant) -> httpx.Client:
    """A client with an admin key of ``tenant`` (not a site admin)."""
    key = new_key(gateway, tenant, "admin")
    with httpx.Client(base_url=gateway.base_url, timeout=30, headers=bearer(str(key["key"]))) as c:
        yield c


def test_a_site_admin_creates_accounts_and_tenant_admins_cannot(gateway, admin, tenant):
    username = f"m-{uuid.uuid4().hex[:8]}"
    body = {"username": username, "role": "builder", "password": new_password()}
    r = admin.post("/v1/members", json=body)
    assert r.status_code == 403 and loc(r) == ["header", "X-UEP-Site-Admin"]
    h = {"X-UEP-Tenant": tenant, **SITE}
    r = gateway.post("/v1/members", json={**body, "password": "short"}, headers=h)
    assert r.status_code == 422 and loc(r) == ["body", "password"]
    assert loc(gateway.post("/v1/members", json={"username": username, "role": "builder"}, headers=h)) == ["body", "password"]
    r = gateway.post("/v1/members", json={**body, "display_name": "M"}, headers=h)
    assert r.status_code == 201, r.text
    assert r.json()["user_created"] is True and r.json()["display_name"] == "M" and body["password"] not in r.text
    again = gateway.post("/v1/members", json={**body, "password": new_password()}, headers={"X-UEP-Tenant": "default", **SITE})
    assert again.status_code == 409 and loc(again) == ["body", "username"]
    assert username not in {m["username"] for m in gateway.get("/v1/members").json()}  # not attached to default


def test_invite_accept_update_remove(gateway, admin, tenant):
    home = new_tenant(gateway, "home")
    username, password, user_id = new_user(gateway, home, "viewer", "invited")
    r = admin.post("/v1/invitations", json={"username": username, "role": "builder"})
    assert r.status_code == 202, r.text
    invitation = r.json()
    assert invitation["username"] == username and invitation["role"] == "builder" and invitation["invited_by"].startswith("key:")
    assert user_id not in {m["user_id"] for m in admin.get("/v1/members").json()}  # nothing attached yet
    assert [i["id"] for i in admin.get("/v1/invitations").json()] == [invitation["id"]]
    s = Session(admin.base_url, username, password)
    mine = s.get("/v1/auth/invitations").json()
    assert [(i["id"], i["tenant"]["slug"], i["role"]) for i in mine] == [(invitation["id"], tenant, "builder")]
    r = s.post(f"/v1/auth/invitations/{invitation['id']}/accept")
    assert r.status_code == 200 and r.json() == {"slug": tenant, "name": f"Tenant {tenant}", "role": "builder"}
    assert s.post(f"/v1/auth/invitations/{invitation['id']}/accept").status_code == 404  # answered once
    assert admin.get("/v1/invitations").json() == []
    rows = {m["username"]: m for m in admin.get("/v1/members").json()}
    assert rows[username]["role"] == "builder" and rows[username]["user_id"] == user_id
    again = admin.post("/v1/invitations", json={"username": username, "role": "viewer"})
    assert again.status_code == 409 and loc(again) == ["body", "username"]
    r = admin.patch(f"/v1/members/{user_id}", json={"role": "viewer"})
    assert r.status_code == 200 and r.json()["role"] == "viewer"
    assert s.client.get("/v1/auth/me", headers=s.headers(csrf=False, **{"X-UEP-Tenant": tenant})).json()["role"] == "viewer"
    assert admin.delete(f"/v1/members/{user_id}").status_code == 204
    assert username not in {m["username"] for m in admin.get("/v1/members").json()}
    r = admin.delete(f"/v1/members/{user_id}")
    assert r.status_code == 404 and loc(r) == ["path", "user_id"]
    audit = admin.get("/v1/audit", params={"action": "acceptInvitation"}).json()["items"]
    assert [(a["principal"], a["tenant"], a["status_code"]) for a in audit][:1] == [(f"user:{username}", tenant, 200)]
    s.close()


def test_inviting_answers_alike_for_known_and_unknown_names(stack, gateway, admin):
    """A tenant admin learns nothing of which usernames exist, and attaches no account, the site admin's
    included: inviting a known and an unknown name gives answers that differ only in the name and times."""
    site_admin = stack.admin_credentials()["username"]
    known, _, known_id = new_user(gateway, new_tenant(gateway, "known"), "viewer", "known")
    unknown = f"nobody-{uuid.uuid4().hex[:10]}"
    answers = {}
    for name in (known, unknown, site_admin):
        r = admin.post("/v1/invitations", json={"username": name, "role": "admin"})
        assert r.status_code == 202, r.text
        answers[name] = {k: v for k, v in r.json().items() if k not in ("id", "username", "created_at", "expires_at")}
        answers[name]["keys"] = sorted(r.json())
    assert answers[known] == answers[unknown] == answers[site_admin]
    members = {m["username"] for m in admin.get("/v1/members").json()}
    assert known not in members and site_admin not in members
    # the old way in is closed: a tenant admin cannot attach an existing user (or learn it exists)
    for body in ({"username": known, "role": "admin"}, {"username": unknown, "role": "admin"}):
        r = admin.post("/v1/members", json=body)
        assert r.status_code == 403 and loc(r) == ["header", "X-UEP-Site-Admin"], r.text


def test_invitations_are_answered_only_by_the_invited_user(gateway, admin, tenant):
    a_name, a_password, _ = new_user(gateway, new_tenant(gateway, "inv-a"), "viewer", "inv-a")
    b_name, b_password, _ = new_user(gateway, new_tenant(gateway, "inv-b"), "viewer", "inv-b")
    to_a = admin.post("/v1/invitations", json={"username": a_name, "role": "viewer"}).json()
    a, b = Session(admin.base_url, a_name, a_password), Session(admin.base_url, b_name, b_password)
    assert b.get("/v1/auth/invitations").json() == []
    for action in ("accept", "decline"):  # another user's invitation is a 404, as an unknown one
        r = b.post(f"/v1/auth/invitations/{to_a['id']}/{action}")
        assert r.status_code == 404 and loc(r) == ["path", "invitation_id"]
        r = b.post(f"/v1/auth/invitations/{uuid.uuid4()}/{action}")
        assert r.status_code == 404 and loc(r) == ["path", "invitation_id"]
    r = a.client.post(f"/v1/auth/invitations/{to_a['id']}/accept", headers=a.headers(csrf=False))
    assert r.status_code == 403 and loc(r) == ["header", "X-CSRF-Token"]
    key = new_key(gateway, tenant, "admin")  # a key is a tenant's, not the invited person
    r = httpx.get(f"{admin.base_url}/v1/auth/invitations", headers=bearer(str(key["key"])))
    assert r.status_code == 403 and loc(r) == ["header", "Authorization"]
    assert httpx.get(f"{admin.base_url}/v1/auth/invitations").status_code == 401
    # another tenant's admin neither sees nor withdraws it
    other_admin = bearer(str(new_key(gateway, new_tenant(gateway, "inv-o"), "admin")["key"]))
    assert to_a["id"] not in httpx.get(f"{admin.base_url}/v1/invitations", headers=other_admin).text
    r = httpx.delete(f"{admin.base_url}/v1/invitations/{to_a['id']}", headers=other_admin)
    assert r.status_code == 404 and loc(r) == ["path", "invitation_id"]
    assert a.post(f"/v1/auth/invitations/{to_a['id']}/decline").status_code == 204
    assert a_name not in {m["username"] for m in admin.get("/v1/members").json()}
    assert to_a["id"] not in {i["id"] for i in admin.get("/v1/invitations").json()}
    to_b = admin.post("/v1/invitations", json={"username": b_name, "role": "viewer"}).json()
    assert admin.delete(f"/v1/invitations/{to_b['id']}").status_code == 204
    assert b.get("/v1/auth/invitations").json() == []
    a.close()
    b.close()


def test_a_user_of_no_tenant_sees_and_accepts_its_invitation(gateway, admin, tenant):
    home = new_tenant(gateway, "lonely")
    username, password, user_id = new_user(gateway, home, "viewer", "lonely")
    assert gateway.delete(f"/v1/members/{user_id}", headers={"X-UEP-Tenant": home}).status_code == 204
    s = Session(admin.base_url, username, password)
    assert s.get("/v1/auth/me").status_code == 403  # no tenant
    inv = admin.post("/v1/invitations", json={"username": username, "role": "viewer"}).json()
    assert [i["id"] for i in s.get("/v1/auth/invitations").json()] == [inv["id"]]
    assert s.post(f"/v1/auth/invitations/{inv['id']}/accept").status_code == 200
    s2 = Session(admin.base_url, username, password)
    assert s2.get("/v1/auth/me").json()["tenant"]["slug"] == tenant
    s.close()
    s2.close()


def test_another_tenants_member_is_404(gateway, admin):
    other = new_tenant(gateway, "foreign")
    _, _, user_id = new_user(gateway, other, "admin", "foreign")
    r = admin.patch(f"/v1/members/{user_id}", json={"role": "viewer"})
    assert r.status_code == 404 and loc(r) == ["path", "user_id"]
    r = admin.delete(f"/v1/members/{user_id}")
    assert r.status_code == 404 and loc(r) == ["path", "user_id"]
    assert user_id not in {m["user_id"] for m in admin.get("/v1/members").json()}
    r = gateway.get("/v1/members", headers={"X-UEP-Tenant": other})
    assert [m["user_id"] for m in r.json()] == [user_id]


def test_the_last_admin_stays(gateway):
    slug = new_tenant(gateway, "lastadmin")
    h = {"X-UEP-Tenant": slug}
    _, _, first = new_user(gateway, slug, "admin", "first")
    r = gateway.patch(f"/v1/members/{first}", json={"role": "builder"}, headers=h)
    assert r.status_code == 409 and loc(r) == ["body", "role"]
    r = gateway.delete(f"/v1/members/{first}", headers=h)
    assert r.status_code == 409 and loc(r) == ["path", "user_id"]
    _, _, second = new_user(gateway, slug, "admin", "second")
    assert gateway.patch(f"/v1/members/{first}", json={"role": "builder"}, headers=h).status_code == 200
    r = gateway.delete(f"/v1/members/{second}", headers=h)
    assert r.status_code == 409
    assert gateway.delete(f"/v1/members/{first}", headers=h).status_code == 204


def test_member_bodies_are_checked(admin):
    assert loc(admin.post("/v1/invitations", json={"username": "bad name", "role": "viewer"})) == ["body", "username"]
    assert loc(admin.post("/v1/invitations", json={"username": "ok", "role": "owner"})) == ["body", "role"]
    assert loc(admin.post("/v1/invitations", json={"username": "ok", "role": "viewer", "password": "x" * 20})) == [
        "body",
        "password",
    ]
    assert loc(admin.patch(f"/v1/members/{uuid.uuid4()}", json={"role": "root"})) == ["body", "role"]
    assert loc(admin.patch("/v1/members/nope", json={"role": "viewer"})) == ["path", "user_id"]


def test_members_and_keys_need_the_admin_role(gateway, tenant):
    viewer = new_key(gateway, tenant, "viewer")
    for method, url in (
        ("GET", "/v1/members"),
        ("GET", "/v1/api-keys"),
        ("GET", "/v1/audit"),
        ("POST", "/v1/api-keys"),
        ("GET", "/v1/invitations"),
        ("POST", "/v1/invitations"),
    ):
        r = httpx.request(method, f"{gateway.base_url}{url}", json={"role": "viewer"}, headers=bearer(str(viewer["key"])))
        assert r.status_code == 403 and loc(r) == ["header", "Authorization"], (method, url)


def test_tenants_need_a_site_admin_acting(gateway, admin):
    assert admin.get("/v1/tenants").status_code == 403
    r = gateway.post("/v1/tenants", json={"slug": "never-" + uuid.uuid4().hex[:6]})
    assert r.status_code == 403 and loc(r) == ["header", "X-UEP-Site-Admin"]
    slug = "site-" + uuid.uuid4().hex[:8]
    r = gateway.post("/v1/tenants", json={"slug": slug}, headers=SITE)
    assert r.status_code == 201 and r.json()["slug"] == slug and r.json()["name"] == slug
    r = gateway.post("/v1/tenants", json={"slug": slug, "name": "again"}, headers=SITE)
    assert r.status_code == 409 and loc(r) == ["body", "slug"]
    for bad in ("Upper", "-lead", "a" * 65, "sp ace", ""):
        r = gateway.post("/v1/tenants", json={"slug": bad}, headers=SITE)
        assert r.status_code == 422 and loc(r) == ["body", "slug"], bad
    listed = gateway.get("/v1/tenants", headers=SITE).json()
    assert slug in {t["slug"] for t in listed} and "default" in {t["slug"] for t in listed}
