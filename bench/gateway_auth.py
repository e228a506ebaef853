"""bench/gateway_auth: latency the gateway's access checks add to a cheap authenticated route.

Two ASGI apps in this one process, on the same PostgreSQL pool, Redis client and event loop, called
in-process (``httpx.ASGITransport``, no sockets) so that only the apps differ:

- **checked**: the gateway's own app (``uep_gateway.app.create_app``): the API key is looked up (cached for
  ``UEP_AUTH_CACHE_TTL_S``, as in production), the role matrix is checked, the call is counted against the
  principal's and the tenant's rate limits in Redis, and the route's session is tenant-scoped (``SET LOCAL
  ROLE uep_tenant_scoped`` + ``uep.tenant_id`` on each transaction, row-level security).
- **bypassed**: a FastAPI app built here that mounts the *same route function* with the same middleware
  (body limit, audit/request id) but without the app-wide ``authorize`` dependency and with an unscoped
  session. Nothing of it exists in the gateway's code paths.

The route is ``GET /v1/models`` (a handful of rows). Requests alternate A, B, B, A, … (the order flips every
pair, so neither arm always goes first) after a warm-up; printed: p50/p99 of each arm, the added latency at
p50 and p99, and the ratio. Target: < 1 ms added at p50. The rate limits are raised so that they count every
call but never refuse one.

Needs PostgreSQL and Redis only (no broker, Triton or services): database ``uep_bench_auth`` (dropped,
created and migrated), Redis db ``UEP_BENCH_REDIS_DB`` (default 12; its rate-limit counters expire).

Usage: ``python bench/gateway_auth.py [--requests 3000] [--warmup 300]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy" / "local"))

from servers import PG_SERVER, REDIS_SERVER  # noqa: E402 - deploy/local is on the path from here

DB = "uep_bench_auth"
SERVER = f"{PG_SERVER}"
ROUTE = "/v1/models"


def _pct(xs: list[float], q: float) -> float:
    """Percentile by linear interpolation (numpy's default method)."""
    import numpy as np

    return float(np.percentile(xs, q))


def prepare_database(url: str) -> str:
    """Drop, create and migrate the bench database; register tenant ``default``, five models and an admin
    API key of ``default``; returns the key."""
    from sqlalchemy import text

    from uep_common.admin import create_api_key, create_database, create_tenant, migrate
    from uep_common.runtime.session import make_sync_engine

    admin = make_sync_engine(f"{SERVER}/postgres")
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(text(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)"))
    admin.dispose()
    create_database(url)
    migrate(url)
    create_tenant(url, "default", "default")
    engine = make_sync_engine(url)
    with engine.begin() as c:
        for i in range(5):
            c.execute(
                text(
                    "INSERT INTO models (id, name, version, description, backend, endpoint, triton_model_name, "
                    "decoding_defaults, supports_logprobs) VALUES (:id, :n, '1', 'bench', 'triton', '127.0.0.1:1', 'm', "
                    "'{}', false)"
                ),
                {"id": uuid.uuid4(), "n": f"bench-model-{i}"},
            )
    engine.dispose()
    return create_api_key(url, "default", "admin", name="bench gateway_auth")


def build_apps(settings: Any) -> tuple[Any, Any, dict[str, Any]]:
    """The checked app (the gateway's), the bypassed app (the same route function, no checks) and the shared
    resources to attach to both before use."""
    import redis.asyncio as aioredis
    from fastapi import FastAPI
    from fastapi.routing import APIRoute, iter_route_contexts

    from uep_common.runtime.session import make_async_engine, make_sessionmaker
    from uep_gateway.access import authorize
    from uep_gateway.app import create_app
    from uep_gateway.audit import AuditMiddleware
    from uep_gateway.auth import AuthCache
    from uep_gateway.body_limit import BodyLimitMiddleware
    from uep_gateway.deps import db_session, unscoped_session
    from uep_gateway.ratelimit import RateLimiter

    checked = create_app(settings)
    route = next(
        c
        for c in iter_route_contexts(checked.routes)
        if isinstance(c.original_route, APIRoute) and c.path == ROUTE and "GET" in (c.methods or ())
    )
    bypassed = FastAPI()
    others = [d for d in route.dependencies if d.dependency is not authorize]  # the router's own (NUL check)
    bypassed.add_api_route(ROUTE, route.endpoint, methods=["GET"], response_model=route.response_model, dependencies=others)
    bypassed.dependency_overrides[db_session] = unscoped_session
    bypassed.add_middleware(BodyLimitMiddleware, limit_for=lambda scope: settings.max_request_bytes)
    bypassed.add_middleware(AuditMiddleware)

    engine = make_async_engine(settings.database_url)
    resources = {
        "settings": settings,
        "engine": engine,
        "sessionmaker": make_sessionmaker(engine),
        "redis": aioredis.from_url(settings.redis_url),
        "auth_cache": AuthCache(settings.auth_cache_ttl_s),
        "auth_tasks": set(),
        "rate_limiter": RateLimiter(settings),
    }
    for app in (checked, bypassed):
        for name, value in resources.items():
            setattr(app.state, name, value)
    return checked, bypassed, resources


async def measure(checked: Any, bypassed: Any, key: str, requests: int, warmup: int) -> dict[str, list[float]]:
    """ms per request of each arm, interleaved (``<arm>``: wall clock; ``<arm>_cpu``: this process's CPU time,
    which other processes' load does not inflate); every answer must be 200."""
    import httpx

    headers = {"Authorization": f"Bearer {key}"}
    clients = {
        name: httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench", headers=headers)
        for name, app in (("checked", checked), ("bypassed", bypassed))
    }
    times: dict[str, list[float]] = {"checked": [], "bypassed": [], "checked_cpu": [], "bypassed_cpu": []}
    try:
        for i in range(warmup + requests):
            order = ("checked", "bypassed") if i % 2 == 0 else ("bypassed", "checked")
            for name in order:
                c0, t0 = time.process_time(), time.perf_counter()
                r = await clients[name].get(ROUTE)
                elapsed, cpu = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
                if r.status_code != 200:
                    raise RuntimeError(f"{name}: {r.status_code} {r.text[:300]}")
                if i >= warmup:
                    times[name].append(elapsed)
                    times[f"{name}_cpu"].append(cpu)
    finally:
        for c in clients.values():
            await c.aclose()
    return times


async def run(args: argparse.Namespace, key: str, settings: Any) -> dict[str, list[float]]:
    checked, bypassed, resources = build_apps(settings)
    try:
        return await measure(checked, bypassed, key, args.requests, args.warmup)
    finally:
        await resources["redis"].aclose()
        await resources["engine"].dispose()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=3000, help="measured requests per arm")
    ap.add_argument("--warmup", type=int, default=300, help="unmeasured requests per arm first")
    args = ap.parse_args()
    url = f"{SERVER}/{DB}"
    os.environ.update(
        {
            "UEP_DATABASE_URL": url,
            "UEP_REDIS_URL": f"{REDIS_SERVER}/{os.environ.get('UEP_BENCH_REDIS_DB', '12')}",
            "UEP_OTEL_EXPORTER": "none",
            "UEP_LOG_LEVEL": "WARNING",
        }
    )
    from uep_gateway.settings import GatewaySettings

    key = prepare_database(url)
    huge = "100000000/minute"
    settings = GatewaySettings(
        rate_limits={"*.read": huge, "*.write": huge, "*.upload": huge, "*.auth": huge},
        tenant_rate_limits={"read": huge, "write": huge, "upload": huge},
    )
    times = asyncio.run(run(args, key, settings))
    c50, c99 = _pct(times["checked"], 50), _pct(times["checked"], 99)
    b50, b99 = _pct(times["bypassed"], 50), _pct(times["bypassed"], 99)
    print(f"\nGET {ROUTE}, {args.requests} requests per arm interleaved (after {args.warmup} warm-up), in-process ASGI")
    print(f"checked  (API key, role matrix, rate limits in Redis, tenant-scoped session):  p50 {c50:6.3f} ms  p99 {c99:6.3f} ms")
    print(f"bypassed (same route function, fixed unscoped session, no checks):            p50 {b50:6.3f} ms  p99 {b99:6.3f} ms")
    print(
        f"added by the checks:  p50 {c50 - b50:+6.3f} ms  p99 {c99 - b99:+6.3f} ms   ratio p50 {c50 / b50:.2f}×  p99 {c99 / b99:.2f}×"
    )
    cpu_c, cpu_b = (sum(times[f"{arm}_cpu"]) / len(times[f"{arm}_cpu"]) for arm in ("checked", "bypassed"))
    print(f"CPU of this process per request: checked {cpu_c:.3f} ms, bypassed {cpu_b:.3f} ms, added {cpu_c - cpu_b:+.3f} ms")
    print(f"target: < 1 ms added at p50 — {'met' if c50 - b50 < 1.0 else 'NOT met'}")
    print(
        f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (other processes inflate wall-clock times)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
