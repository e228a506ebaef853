"""The gateway's FastAPI application: REST API, health checks, and the outbox relay it runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import redis.asyncio as aioredis
from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute, iter_route_contexts
from sqlalchemy import text

from uep_common.runtime import metrics
from uep_common.runtime.messaging import make_broker
from uep_common.runtime.outbox import OutboxRelay
from uep_common.runtime.session import make_async_engine, make_sessionmaker
from uep_common.runtime.telemetry import setup_telemetry, shutdown_telemetry
from uep_gateway.access import authorize, entry, operation_id
from uep_gateway.api import annotations as annotations_api
from uep_gateway.api import (
    budgets,
    catalog,
    evaluations,
    experiments,
    identity,
    invitations,
    judge_calibration,
    judges,
    leaderboards,
    lifecycle,
    models,
    reports,
    rescores,
    schedules,
    uploads,
)
from uep_gateway.audit import AuditMiddleware
from uep_gateway.auth import AuthCache
from uep_gateway.body_limit import BodyLimitMiddleware
from uep_gateway.error_responses import install as install_error_responses
from uep_gateway.model_health import ModelHealth
from uep_gateway.observability import HttpMetricsMiddleware, bind_log_context, metrics_endpoint
from uep_gateway.openapi_contract import install as install_contract
from uep_gateway.ratelimit import RateLimiter
from uep_gateway.settings import GatewaySettings
from uep_gateway.ui import router as ui_router


def create_app(settings: GatewaySettings | None = None) -> FastAPI:
    """Build the app; resources (database pool, Redis, Kafka producer, relay) live in its lifespan."""
    settings = settings or GatewaySettings()
    setup_telemetry(settings)
    metrics.configure(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = make_async_engine(settings.database_url)
        app.state.settings = settings
        app.state.engine = engine
        app.state.sessionmaker = make_sessionmaker(engine)
        app.state.redis = aioredis.from_url(settings.redis_url)
        app.state.auth_cache = AuthCache(settings.auth_cache_ttl_s)
        app.state.auth_tasks = set()
        app.state.rate_limiter = RateLimiter(settings)
        app.state.model_health = ModelHealth(settings.model_ready_timeout_s, settings.model_ready_cache_s)
        app.state.broker = make_broker(settings)
        await asyncio.wait_for(app.state.broker.start(), 30)
        app.state.relay = OutboxRelay.from_settings(app.state.sessionmaker, app.state.broker, settings)
        app.state.relay.start()
        metrics.start_server(settings)  # only with UEP_METRICS_PORT; else /metrics below
        try:
            yield
        finally:
            await app.state.relay.stop()
            await app.state.broker.stop()
            await app.state.redis.aclose()
            await engine.dispose()
            shutdown_telemetry()

    app = FastAPI(
        title="uep — Unified Evaluation Platform",
        version="0.1.0",
        description="Benchmarks, models and evaluations. Errors name the field and the reason.",
        lifespan=lifespan,
        generate_unique_id_function=operation_id,
        docs_url=None,
        redoc_url=None,
        dependencies=[Depends(authorize), Depends(bind_log_context)],
    )

    def body_limit(scope: MutableMapping[str, Any]) -> int:
        """Bytes a request body may take: the upload route gets the file limit and room for the form."""
        upload = scope.get("method") == "POST" and scope.get("path") == "/v1/benchmarks"
        return settings.max_upload_bytes + 65_536 if upload else settings.max_request_bytes

    app.add_middleware(BodyLimitMiddleware, limit_for=body_limit)
    app.add_middleware(AuditMiddleware)
    app.add_middleware(HttpMetricsMiddleware)  # outermost: times everything, 429s and 413s included
    if metrics.on_health_port(settings):
        app.add_route("/metrics", metrics_endpoint, methods=["GET"], include_in_schema=False)

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, Any]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"])
    async def readyz(request: Request) -> JSONResponse:
        """Readiness: PostgreSQL, Redis and the broker answer (503 otherwise, with each check)."""
        checks = {}

        async def db() -> bool:
            async with request.app.state.engine.connect() as c:
                await c.execute(text("SELECT 1"))
            return True

        for name, fn in (
            ("database", db),
            ("redis", request.app.state.redis.ping),
            ("broker", lambda: request.app.state.broker.ping(2.0)),
        ):
            try:
                checks[name] = bool(await asyncio.wait_for(fn(), 3.0))
            except Exception:  # noqa: BLE001
                checks[name] = False
        ok = all(checks.values())
        return JSONResponse({"status": "ready" if ok else "not_ready", "checks": checks}, status_code=200 if ok else 503)

    app.include_router(identity.router)
    app.include_router(invitations.router)
    app.include_router(evaluations.router)
    app.include_router(rescores.router)
    app.include_router(catalog.router)
    app.include_router(models.router)
    app.include_router(uploads.router)
    app.include_router(schedules.router)
    app.include_router(budgets.router)
    app.include_router(lifecycle.router)
    app.include_router(judges.router)
    app.include_router(judge_calibration.router)
    app.include_router(annotations_api.router)
    app.include_router(reports.router)
    app.include_router(experiments.router)
    app.include_router(leaderboards.router)
    app.include_router(ui_router)
    # Every route's matrix entry, found once (a route without one fails here, at build time). Included routers
    # are not flattened into app.routes: iter_route_contexts walks them.
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        if isinstance(route, APIRoute):
            (method,) = route.methods or {"GET"}
            route.uep_access = entry(method, context.path or route.path)  # type: ignore[attr-defined]
    install_contract(app)
    install_error_responses(app)
    return app
