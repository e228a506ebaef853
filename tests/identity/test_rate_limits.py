"""Rate limits on the real stack: the test stack gives ``viewer.read`` 300 per minute (``TEST_ENV`` in
``tests/conftest.py``). A burst of a fresh viewer key passes that and is answered 429 with ``Retry-After``
and the ``RateLimit-*`` headers, while a second viewer key of the same tenant is still answered."""

from __future__ import annotations

import httpx

from .principals import bearer, new_key, new_tenant

LIMIT = 300


def test_a_burst_is_limited_per_key(gateway):
    tenant = new_tenant(gateway, "rate")
    first = new_key(gateway, tenant, "viewer")
    second = new_key(gateway, tenant, "viewer")
    statuses: list[int] = []
    limited: httpx.Response | None = None
    last_ok: httpx.Response | None = None
    with httpx.Client(base_url=gateway.base_url, timeout=30, headers=bearer(str(first["key"]))) as c:
        for _ in range(LIMIT + 60):
            r = c.get("/v1/auth/me")
            statuses.append(r.status_code)
            if r.status_code == 429:
                limited = r
                break
            assert r.status_code == 200, r.text
            last_ok = r
    assert limited is not None, f"no 429 in {len(statuses)} calls"
    # a fresh window lets the limit through; a burst that crosses into the next fixed window of the sliding
    # counter gets a little more as the previous window's weight decays
    assert LIMIT <= statuses.count(200) <= LIMIT + LIMIT // 10
    assert int(limited.headers["Retry-After"]) >= 1
    assert limited.headers["RateLimit-Limit"] == str(LIMIT)
    assert limited.headers["RateLimit-Remaining"] == "0"
    assert limited.headers["RateLimit-Policy"] == f"{LIMIT};w=60"
    assert int(limited.headers["RateLimit-Reset"]) >= 1
    assert limited.json()["detail"][0]["type"] == "rate_limited"
    # answers within the limit name the policy (known without a Redis read)
    assert last_ok is not None and last_ok.headers["RateLimit-Policy"] == f"{LIMIT};w=60"
    with httpx.Client(base_url=gateway.base_url, timeout=30, headers=bearer(str(second["key"]))) as c:
        r = c.get("/v1/auth/me")
        assert r.status_code == 200, r.text
        assert r.headers["RateLimit-Policy"] == f"{LIMIT};w=60"
