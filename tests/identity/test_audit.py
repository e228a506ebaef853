"""The audit log on the real stack: state-changing calls of tenant A — a create, a refused (403) create and
a 404 cancel — appear in A's ``GET /v1/audit`` with principal, action, outcome and the request id of the
answer's ``X-Request-ID``; tenant B's admin sees none of A's rows; failed sign-ins are audited without a
tenant (seen by a site admin acting as one); pages follow ``next_cursor``; a valid key refused for naming
another tenant or claiming site admin is recorded as itself (key id, tenant, claim), seen by both tenants'
admins where the claim names the other one."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest

from .principals import SITE, bearer, loc, new_key, new_tenant


def find(client: httpx.Client, request_id: str, headers: dict[str, str] | None = None, timeout_s: float = 10.0) -> dict:
    """The audit row of ``request_id`` (rows are written just after the answer)."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = client.get("/v1/audit", params={"limit": 500}, headers=headers or {})
        assert r.status_code == 200, r.text
        rows = [i for i in r.json()["items"] if i["request_id"] == request_id]
        if rows:
            assert len(rows) == 1
            return rows[0]
        assert time.monotonic() < deadline, f"no audit row for {request_id}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def tenants(gateway):
    a, b = new_tenant(gateway, "audit-a"), new_tenant(gateway, "audit-b")
    keys = {
        "a_admin": new_key(gateway, a, "admin"),
        "a_viewer": new_key(gateway, a, "viewer"),
        "b_admin": new_key(gateway, b, "admin"),
    }
    clients = {
        name: httpx.Client(base_url=gateway.base_url, timeout=30, headers=bearer(str(k["key"]))) for name, k in keys.items()
    }
    yield a, b, keys, clients
    for c in clients.values():
        c.close()


def test_state_changes_are_audited_per_tenant(tenants):
    a, b, keys, c = tenants
    created = c["a_admin"].post("/v1/api-keys", json={"role": "viewer", "name": "audited"})
    assert created.status_code == 201
    refused = c["a_viewer"].post("/v1/api-keys", json={"role": "viewer"})
    assert refused.status_code == 403
    sent_id = "audit-test-" + uuid.uuid4().hex
    missing = c["a_admin"].post(f"/v1/evaluations/{uuid.uuid4()}/cancel", headers={"X-Request-ID": sent_id})
    assert missing.status_code == 404
    assert missing.headers["X-Request-ID"] == sent_id
    admin_name = f"key:{keys['a_admin']['prefix']}"
    viewer_name = f"key:{keys['a_viewer']['prefix']}"

    row = find(c["a_admin"], created.headers["X-Request-ID"])
    assert (row["principal"], row["role"], row["action"], row["outcome"], row["status_code"]) == (
        admin_name,
        "admin",
        "createApiKey",
        "success",
        201,
    )
    assert row["tenant"] == a and row["method"] == "POST" and row["path"] == "/v1/api-keys"
    assert created.json()["key"] not in str(row)

    row = find(c["a_admin"], refused.headers["X-Request-ID"])
    assert (row["principal"], row["role"], row["action"], row["outcome"], row["status_code"]) == (
        viewer_name,
        "viewer",
        "createApiKey",
        "denied",
        403,
    )

    row = find(c["a_admin"], sent_id)
    assert (row["principal"], row["action"], row["outcome"], row["status_code"]) == (
        admin_name,
        "cancelEvaluation",
        "refused",
        404,
    )
    assert set(row["object_ids"]) == {"evaluation_id"}

    # reads are not audited
    read = c["a_admin"].get("/v1/members")
    time.sleep(0.5)
    ids = {i["request_id"] for i in c["a_admin"].get("/v1/audit", params={"limit": 500}).json()["items"]}
    assert read.headers["X-Request-ID"] not in ids

    # tenant B sees none of it
    items = c["b_admin"].get("/v1/audit", params={"limit": 500}).json()["items"]
    a_ids = {created.headers["X-Request-ID"], refused.headers["X-Request-ID"], sent_id}
    assert not a_ids & {i["request_id"] for i in items}
    assert all(i["tenant"] == b for i in items)
    # ... and not through the filters either
    r = c["b_admin"].get("/v1/audit", params={"principal": admin_name})
    assert r.status_code == 200 and r.json()["items"] == []


def test_filters_and_pages(tenants):
    a, _, keys, c = tenants
    for i in range(5):
        assert c["a_admin"].post("/v1/api-keys", json={"role": "viewer", "name": f"page {i}"}).status_code == 201
    time.sleep(0.5)
    r = c["a_admin"].get("/v1/audit", params={"action": "createApiKey", "outcome": "success", "limit": 2})
    assert r.status_code == 200
    page = r.json()
    seen = [i["id"] for i in page["items"]]
    assert len(seen) == 2 and page["next_cursor"] is not None
    while page["next_cursor"] is not None:
        page = (
            c["a_admin"]
            .get("/v1/audit", params={"action": "createApiKey", "outcome": "success", "limit": 2, "cursor": page["next_cursor"]})
            .json()
        )
        seen += [i["id"] for i in page["items"]]
    assert seen == sorted(seen, reverse=True) and len(seen) == len(set(seen)) >= 6
    everything = c["a_admin"].get("/v1/audit", params={"action": "createApiKey", "outcome": "success", "limit": 500}).json()
    assert [i["id"] for i in everything["items"]] == seen and everything["next_cursor"] is None
    r = c["a_admin"].get("/v1/audit", params={"since": "2999-01-01T00:00:00Z"})
    assert r.status_code == 200 and r.json()["items"] == []
    r = c["a_admin"].get("/v1/audit", params={"until": "2000-01-01T00:00:00"})
    assert r.status_code == 200 and r.json()["items"] == []
    for params, field in (
        ({"cursor": "abc"}, "cursor"),
        ({"limit": 0}, "limit"),
        ({"limit": 501}, "limit"),
        ({"outcome": "maybe"}, "outcome"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2024-01-02T00:00:00Z", "until": "2024-01-01T00:00:00Z"}, "until"),
    ):
        r = c["a_admin"].get("/v1/audit", params=params)
        assert r.status_code == 422 and loc(r) == ["query", field], params


def test_failed_sign_in_is_audited_without_a_tenant(gateway, tenants):
    _, _, _, c = tenants
    name = "ghost-" + uuid.uuid4().hex[:8]
    r = httpx.post(f"{gateway.base_url}/v1/auth/login", json={"username": name, "password": "wrong-password-1"})
    assert r.status_code == 401
    row = find(gateway, r.headers["X-Request-ID"], headers=SITE)
    assert row["principal"] == f"user:{name}" and row["tenant"] is None
    assert (row["action"], row["outcome"], row["status_code"]) == ("login", "denied", 401)
    # a tenant admin does not see rows without a tenant
    ids = {i["request_id"] for i in c["a_admin"].get("/v1/audit", params={"limit": 500}).json()["items"]}
    assert r.headers["X-Request-ID"] not in ids


def _request_ids(client: httpx.Client) -> set[str]:
    r = client.get("/v1/audit", params={"limit": 500})
    assert r.status_code == 200, r.text
    return {i["request_id"] for i in r.json()["items"]}


def test_a_valid_key_refused_for_its_claims_is_recorded_as_itself(gateway, tenants):
    a, b, keys, c = tenants
    other = new_tenant(gateway, "audit-c")
    with httpx.Client(
        base_url=gateway.base_url, timeout=30, headers=bearer(str(new_key(gateway, other, "admin")["key"]))
    ) as c_admin:
        tried = c["a_admin"].post("/v1/api-keys", json={"role": "viewer"}, headers={"X-UEP-Tenant": b})
        assert tried.status_code == 403 and loc(tried) == ["header", "X-UEP-Tenant"], tried.text
        claimed = c["a_viewer"].post("/v1/api-keys", json={"role": "viewer"}, headers=SITE)
        assert claimed.status_code == 403 and loc(claimed) == ["header", "X-UEP-Site-Admin"], claimed.text

        row = find(c["a_admin"], tried.headers["X-Request-ID"])
        assert {k: row[k] for k in ("principal", "api_key_id", "tenant", "role", "attempted_tenant", "site_admin_claim")} == {
            "principal": f"key:{keys['a_admin']['prefix']}",
            "api_key_id": keys["a_admin"]["id"],
            "tenant": a,
            "role": "admin",
            "attempted_tenant": b,
            "site_admin_claim": False,
        }
        assert (row["action"], row["outcome"], row["status_code"], row["site_admin_act"]) == (
            "createApiKey",
            "denied",
            403,
            False,
        )
        assert str(keys["a_admin"]["key"]) not in str(row)
        # the tenant it tried sees the same row; a third tenant does not
        assert find(c["b_admin"], tried.headers["X-Request-ID"]) == row
        assert tried.headers["X-Request-ID"] not in _request_ids(c_admin)

        row = find(c["a_admin"], claimed.headers["X-Request-ID"])
        assert {k: row[k] for k in ("principal", "api_key_id", "tenant", "role", "attempted_tenant", "site_admin_claim")} == {
            "principal": f"key:{keys['a_viewer']['prefix']}",
            "api_key_id": keys["a_viewer"]["id"],
            "tenant": a,
            "role": "viewer",
            "attempted_tenant": None,
            "site_admin_claim": True,
        }
        # a claim of site admin concerns its own tenant only
        assert claimed.headers["X-Request-ID"] not in _request_ids(c["b_admin"]) | _request_ids(c_admin)
