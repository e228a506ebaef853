"""Sign-in limits on a gateway of the test's own (the test stack's gateway runs with limits raised for the other
tests): the app is built in-process on the stack's database and Redis with the site's default rate limits, and
each client address is made up per test, so that windows of earlier runs do not count.

A flood of bad passwords for other accounts (more than the old 20 sign-ins a minute per address) or of bad API
keys from one address leaves a real user there able to sign in; failures of one account lock that account's
sign-in only, whatever addresses they came from; failures from one address past its own window lock that
address's sign-ins."""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from .principals import new_tenant, new_user

ACCOUNT_LIMIT = 5
CLIENT_LIMIT = 25


@pytest.fixture(scope="module")
async def app(stack) -> AsyncIterator[object]:
    from uep_common.runtime.session import make_async_engine, make_sessionmaker
    from uep_gateway.app import create_app
    from uep_gateway.auth import AuthCache
    from uep_gateway.ratelimit import RateLimiter
    from uep_gateway.settings import GatewaySettings

    defaults = GatewaySettings.model_fields["rate_limits"].default_factory()  # type: ignore[call-arg,misc]
    settings = GatewaySettings(
        database_url=stack.database_url,
        redis_url=stack.redis_url,
        otel_exporter="none",
        rate_limits=defaults,
        failed_auth_rate_limit="60/minute",
        failed_signin_account_rate_limit=f"{ACCOUNT_LIMIT}/minute",
        failed_signin_client_rate_limit=f"{CLIENT_LIMIT}/minute",
    )
    app = create_app(settings)
    engine = make_async_engine(settings.database_url)
    # what the lifespan would set up for these routes (no broker or relay: sign-in and /v1/auth/me need none)
    app.state.settings = settings
    app.state.engine = engine
    app.state.sessionmaker = make_sessionmaker(engine)
    app.state.auth_cache = AuthCache(settings.auth_cache_ttl_s)
    app.state.auth_tasks = set()
    app.state.rate_limiter = RateLimiter(settings)
    yield app
    await engine.dispose()


@pytest.fixture(scope="module")
def users(gateway) -> list[tuple[str, str]]:
    tenant = new_tenant(gateway, "signin")
    return [new_user(gateway, tenant, "viewer", prefix="signin")[:2] for _ in range(3)]


def _address() -> str:
    return f"10.{random.randrange(256)}.{random.randrange(256)}.{random.randrange(1, 255)}"


def _client(app: object, address: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=(address, 40000)), base_url="http://gw")  # type: ignore[arg-type]


async def _sign_in(app: object, address: str, username: str, password: str) -> httpx.Response:
    async with _client(app, address) as c:
        return await c.post("/v1/auth/login", json={"username": username, "password": password})


async def test_bad_passwords_for_other_accounts_leave_the_address_able_to_sign_in(app, users):
    address = _address()
    for _ in range(21):  # the old limit counted every sign-in of an address: 20 a minute
        r = await _sign_in(app, address, f"nobody-{uuid.uuid4().hex[:8]}", "wrong-password-1")
        assert r.status_code == 401, r.text
    username, password = users[0]
    r = await _sign_in(app, address, username, password)
    assert r.status_code == 200, r.text
    assert r.json()["user"]["username"] == username


async def test_bad_keys_do_not_touch_sign_in(app, users):
    address = _address()
    statuses = []
    async with _client(app, address) as c:
        for _ in range(61):
            statuses.append((await c.get("/v1/auth/me", headers={"Authorization": f"Bearer uep_{uuid.uuid4().hex}"})).status_code)
    assert statuses[:60] == [401] * 60 and statuses[60] == 429, statuses
    username, password = users[1]
    r = await _sign_in(app, address, username, password)
    assert r.status_code == 200, r.text


async def test_failures_of_one_account_lock_that_account_only(app, users):
    (victim, victim_password), (other, other_password) = users[2], users[0]
    for _ in range(ACCOUNT_LIMIT):  # each from an address of its own: the account's window counts them all
        assert (await _sign_in(app, _address(), victim, "wrong-password-1")).status_code == 401
    address = _address()
    r = await _sign_in(app, address, victim, victim_password)
    assert r.status_code == 429, r.text
    problem = r.json()["detail"][0]
    assert problem["loc"] == ["body", "username"] and problem["type"] == "rate_limited"
    assert "failed sign-ins of this account" in problem["msg"]
    assert int(r.headers["Retry-After"]) >= 1 and r.headers["RateLimit-Limit"] == str(ACCOUNT_LIMIT)
    assert (await _sign_in(app, address, other, other_password)).status_code == 200


async def test_failures_from_one_address_past_its_window_lock_its_sign_ins(app, users):
    address = _address()
    for i in range(CLIENT_LIMIT):
        r = await _sign_in(app, address, f"nobody-{i}-{uuid.uuid4().hex[:8]}", "wrong-password-1")
        assert r.status_code == 401, r.text
    username, password = users[1]
    r = await _sign_in(app, address, username, password)
    assert r.status_code == 429, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "password"]
    assert "failed sign-ins from this address" in r.json()["detail"][0]["msg"]
    assert (await _sign_in(app, _address(), username, password)).status_code == 200  # elsewhere: fine
