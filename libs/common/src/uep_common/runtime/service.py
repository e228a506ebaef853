"""Runtime shared by the FastStream services (scheduler, inference, scorer, judge, reporter).

Each service builds a :class:`ServiceRuntime` (settings, tracer provider, broker, optional database and
Redis), registers its handlers on ``runtime.broker``, and calls :func:`serve`, which runs the FastStream
app inside uvicorn with ``/healthz`` (liveness: the process and its event loop answer), ``/readyz``
(readiness: the broker, and the database/Redis where used, answer) and ``/metrics`` (Prometheus: every
metric of the process, :mod:`uep_common.runtime.metrics`; on ``UEP_METRICS_PORT`` instead when that is set). Logs are
one format for the service, uvicorn and FastStream (:mod:`uep_common.runtime.logs`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from faststream.asgi import AsgiFastStream, AsgiResponse, get
from faststream.asgi.types import Scope
from faststream.kafka import KafkaBroker
from opentelemetry.sdk.trace import TracerProvider
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from uep_common.runtime import http_server, metrics, tenant_guard
from uep_common.runtime.logs import configure_logging
from uep_common.runtime.messaging import make_broker
from uep_common.runtime.session import make_async_engine, make_sessionmaker
from uep_common.runtime.settings import CommonSettings
from uep_common.runtime.telemetry import setup_telemetry, shutdown_telemetry

log = logging.getLogger(__name__)

ReadyCheck = Callable[[], Awaitable[bool]]


@dataclass
class ServiceRuntime:
    """Process-wide resources of one service.

    Args:
        settings: the service's settings (a :class:`CommonSettings` subclass).
        use_db: create an async SQLAlchemy engine and session factory.
        use_redis: create an asyncio Redis client.
    """

    settings: CommonSettings
    use_db: bool = False
    use_redis: bool = False
    tracer_provider: TracerProvider = field(init=False)
    broker: KafkaBroker = field(init=False)
    engine: AsyncEngine | None = field(init=False, default=None)
    sessionmaker: async_sessionmaker[AsyncSession] | None = field(init=False, default=None)
    redis: object | None = field(init=False, default=None)
    ready_checks: dict[str, ReadyCheck] = field(init=False, default_factory=dict)
    started: bool = field(init=False, default=False)
    """True once the broker and every start-up hook have run (FastStream's ASGI lifespan lets the HTTP
    server answer before that, so readiness must not rely on the server answering)."""

    def __post_init__(self) -> None:
        configure_logging(self.settings)
        metrics.configure(self.settings)
        self.tracer_provider = setup_telemetry(self.settings)
        self.broker = make_broker(self.settings)
        self.ready_checks["broker"] = lambda: self.broker.ping(2.0)
        if self.use_db:
            self.engine = make_async_engine(self.settings.database_url)
            self.sessionmaker = make_sessionmaker(self.engine)
            self.ready_checks["database"] = self._db_ready
            tenant_guard.install(tenant_guard.TenantGuard(self.sessionmaker))
        if self.use_redis:
            import redis.asyncio as aioredis

            self.redis = aioredis.from_url(self.settings.redis_url)
            self.ready_checks["redis"] = self._redis_ready

    async def _db_ready(self) -> bool:
        assert self.engine is not None
        async with self.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
        return True

    async def _redis_ready(self) -> bool:
        return bool(await self.redis.ping())  # type: ignore[attr-defined]

    async def readiness(self) -> dict[str, bool]:
        """Run every readiness check with a 3 s timeout; a check that raises counts as not ready."""
        results: dict[str, bool] = {"started": self.started}
        for name, check in self.ready_checks.items():
            try:
                results[name] = bool(await asyncio.wait_for(check(), 3.0))
            except Exception:  # noqa: BLE001 - readiness reports, it does not raise
                results[name] = False
        return results

    async def close(self) -> None:
        """Release the database pool and Redis connections, flush telemetry."""
        if self.engine is not None:
            await self.engine.dispose()
        if self.redis is not None:
            await self.redis.aclose()  # type: ignore[attr-defined]
        shutdown_telemetry()


def build_app(
    runtime: ServiceRuntime,
    on_startup: list[Callable[[], Awaitable[None]]] | None = None,
    on_shutdown: list[Callable[[], Awaitable[None]]] | None = None,
    samplers: list[metrics.SampleFn] | None = None,
) -> AsgiFastStream:
    """FastStream ASGI app with ``/healthz`` and ``/readyz`` (JSON: each check's result; 503 if any fails) and
    ``/metrics`` (see the module docstring).

    ``on_startup`` hooks run after the broker has started; ``/readyz`` reports ready only after all of them.
    ``samplers``: the service's sampled gauges, run with the consumer-lag sample every ``UEP_METRICS_SAMPLE_S``.
    """

    @get
    async def healthz(scope: Scope) -> AsgiResponse:
        return AsgiResponse(json.dumps({"status": "ok"}).encode(), 200, headers={"content-type": "application/json"})

    @get
    async def readyz(scope: Scope) -> AsgiResponse:
        checks = await runtime.readiness()
        ok = all(checks.values())
        body = json.dumps({"status": "ready" if ok else "not_ready", "checks": checks}).encode()
        return AsgiResponse(body, 200 if ok else 503, headers={"content-type": "application/json"})

    sampler = metrics.Sampler(runtime.settings.metrics_sample_s, [metrics.consumer_lag(runtime.broker), *(samplers or [])])
    routes: list[tuple[str, Any]] = [("/healthz", healthz), ("/readyz", readyz)]
    if metrics.on_health_port(runtime.settings):
        routes.append(("/metrics", metrics.asgi_app()))

    async def _close() -> None:
        await sampler.stop()
        await runtime.close()

    async def _mark_started() -> None:
        metrics.start_server(runtime.settings)
        sampler.start()
        runtime.started = True

    return AsgiFastStream(
        runtime.broker,
        asgi_routes=routes,
        after_startup=[*(on_startup or []), _mark_started],
        on_shutdown=list(on_shutdown or []),
        after_shutdown=[_close],
    )


def serve(app: AsgiFastStream, settings: CommonSettings, default_port: int) -> None:
    """Run ``app`` in uvicorn on ``settings.health_host``:``settings.health_port or default_port`` (its log lines
    in the format of :func:`uep_common.runtime.logs.configure_logging`)."""
    configure_logging(settings, force=True)
    http_server.run(
        app,
        host=settings.health_host,
        port=settings.health_port or default_port,
        log_level=settings.log_level.lower(),
        log_config=None,
        lifespan="on",
        timeout_graceful_shutdown=10,
    )
