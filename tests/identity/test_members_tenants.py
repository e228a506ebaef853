"""Members and tenants on the real stack: a tenant admin adds, re-roles and removes members (creating new
users with a policy-checked password, never changing an existing user's), never loses the last admin, and
sees no other tenant's members; only a site admin acting as one lists and creates tenants."""

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


def test_add_list_update_remove(admin, tenant):
    username = f"m-{uuid.uuid4().hex[:8]}"
    r = admin.post("/v1/members", json={"username": username, "role": "builder"})
    assert r.status_code == 422 and loc(r) == ["body", "password"]
    r = admin.post("/v1/members", json={"username": username, "role": "builder", "password": "short"})
    assert r.status_code == 422 and loc(r) == ["body", "password"]
    password = new_password()
    r = admin.post("/v1/members", json={"username": username, "role": "builder", "password": password, "display_name": "M"})
    assert r.status_code == 201, r.text
    member = r.json()
    assert member["username"] == username and member["role"] == "builder" and member["user_created"] is True
    assert member["display_name"] == "M" and password not in r.text
    again = admin.post("/v1/members", json={"username": username, "role": "viewer"})
    assert again.status_code == 409 and loc(again) == ["body", "username"]
    listed = admin.get("/v1/members")
    assert listed.status_code == 200
    rows = {m["username"]: m for m in listed.json()}
    assert rows[username]["role"] == "builder" and rows[username]["user_id"] == member["user_id"]
    assert "password" not in listed.text and password not in listed.text
    r = admin.patch(f"/v1/members/{member['user_id']}", json={"role": "viewer"})
    assert r.status_code == 200 and r.json()["role"] == "viewer"
    s = Session(admin.base_url, username, password)
    assert s.get("/v1/auth/me").json()["role"] == "viewer"
    r = admin.delete(f"/v1/members/{member['user_id']}")
    assert r.status_code == 204
    assert username not in {m["username"] for m in admin.get("/v1/members").json()}
    # the user remains; its session now has no tenant
    r = s.get("/v1/auth/me")
    assert r.status_code == 403
    r = admin.delete(f"/v1/members/{member['user_id']}")
    assert r.status_code == 404 and loc(r) == ["path", "user_id"]
    s.close()


def test_adding_an_existing_user_keeps_its_password(gateway, admin, tenant):
    other = new_tenant(gateway, "home")
    username, password, user_id = new_user(gateway, other, "viewer", "existing")
    r = admin.post("/v1/members", json={"username": username, "role": "viewer", "password": new_password()})
    assert r.status_code == 422 and loc(r) == ["body", "password"]
    r = admin.post("/v1/members", json={"username": username, "role": "viewer"})
    assert r.status_code == 201 and r.json()["user_created"] is False and r.json()["user_id"] == user_id
    s = Session(admin.base_url, username, password)  # the old password still works
    assert {t["slug"] for t in s.login.json()["tenants"]} == {other, tenant}
    s.close()


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
    assert loc(admin.post("/v1/members", json={"username": "bad name", "role": "viewer"})) == ["body", "username"]
    assert loc(admin.post("/v1/members", json={"username": "ok", "role": "owner"})) == ["body", "role"]
    assert loc(admin.patch(f"/v1/members/{uuid.uuid4()}", json={"role": "root"})) == ["body", "role"]
    assert loc(admin.patch("/v1/members/nope", json={"role": "viewer"})) == ["path", "user_id"]


def test_members_and_keys_need_the_admin_role(gateway, tenant):
    viewer = new_key(gateway, tenant, "viewer")
    for method, url in (("GET", "/v1/members"), ("GET", "/v1/api-keys"), ("GET", "/v1/audit"), ("POST", "/v1/api-keys")):
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
