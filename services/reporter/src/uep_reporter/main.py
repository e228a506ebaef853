"""``uep-reporter``: the reporter service process (health on port 8095 by default)."""

from faststream.asgi import AsgiFastStream
from redis.asyncio import Redis

from uep_common.runtime.outbox import OutboxRelay
from uep_common.runtime.service import ServiceRuntime, build_app, serve
from uep_reporter.compaction import CompactionWorker
from uep_reporter.leaderboards import LeaderboardReconciler
from uep_reporter.retention import RetentionWorker
from uep_reporter.service import register
from uep_reporter.settings import ReporterSettings
from uep_reporter.vacuuming import VacuumWorker

DEFAULT_PORT = 8095


def create_app() -> tuple[AsgiFastStream, ReporterSettings]:
    """Build the reporter's FastStream ASGI app (with its outbox relay)."""
    settings = ReporterSettings()
    runtime = ServiceRuntime(settings, use_db=True, use_redis=True)
    sessionmaker, redis, engine = runtime.sessionmaker, runtime.redis, runtime.engine
    assert sessionmaker is not None and engine is not None  # use_db=True
    assert isinstance(redis, Redis)  # use_redis=True
    relay = OutboxRelay.from_settings(sessionmaker, runtime.broker, settings)
    register(runtime.broker, settings, sessionmaker, redis, relay)
    retention_worker = RetentionWorker(sessionmaker, settings)
    compaction_worker = CompactionWorker(sessionmaker, settings)
    reconciler = LeaderboardReconciler(sessionmaker, settings.leaderboard_reconcile_s)
    vacuum_worker = VacuumWorker(engine, settings)

    async def start_relay() -> None:
        relay.start()

    async def start_background() -> None:
        retention_worker.start()
        compaction_worker.start()
        reconciler.start()
        vacuum_worker.start()

    return build_app(
        runtime,
        on_startup=[start_relay, start_background],
        on_shutdown=[relay.stop, retention_worker.stop, compaction_worker.stop, reconciler.stop, vacuum_worker.stop],
    ), settings


def main() -> None:
    """Console entry point."""
    app, settings = create_app()
    serve(app, settings, DEFAULT_PORT)
