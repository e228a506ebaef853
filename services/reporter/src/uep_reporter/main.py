"""``uep-reporter``: the reporter service process (health on port 8095 by default)."""

from uep_common.outbox import OutboxRelay
from uep_common.service import ServiceRuntime, build_app, serve
from uep_reporter.leaderboards import LeaderboardReconciler
from uep_reporter.retention import RetentionWorker
from uep_reporter.service import register
from uep_reporter.settings import ReporterSettings

DEFAULT_PORT = 8095


def create_app():
    """Build the reporter's FastStream ASGI app (with its outbox relay)."""
    settings = ReporterSettings()
    runtime = ServiceRuntime(settings, use_db=True, use_redis=True)
    relay = OutboxRelay(runtime.sessionmaker, runtime.broker)
    register(runtime.broker, settings, runtime.sessionmaker, runtime.redis, relay)
    retention_worker = RetentionWorker(runtime.sessionmaker, settings)
    reconciler = LeaderboardReconciler(runtime.sessionmaker, settings.leaderboard_reconcile_s)

    async def start_relay() -> None:
        relay.start()

    async def start_background() -> None:
        retention_worker.start()
        reconciler.start()

    return build_app(
        runtime,
        on_startup=[start_relay, start_background],
        on_shutdown=[relay.stop, retention_worker.stop, reconciler.stop],
    ), settings


def main() -> None:
    """Console entry point."""
    app, settings = create_app()
    serve(app, settings, DEFAULT_PORT)
