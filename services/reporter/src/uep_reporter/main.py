"""``uep-reporter``: the reporter service process (health on port 8095 by default)."""

from uep_common.outbox import OutboxRelay
from uep_common.service import ServiceRuntime, build_app, serve
from uep_reporter.service import register
from uep_reporter.settings import ReporterSettings

DEFAULT_PORT = 8095


def create_app():
    """Build the reporter's FastStream ASGI app (with its outbox relay)."""
    settings = ReporterSettings()
    runtime = ServiceRuntime(settings, use_db=True, use_redis=True)
    relay = OutboxRelay(runtime.sessionmaker, runtime.broker)
    register(runtime.broker, settings, runtime.sessionmaker, runtime.redis, relay)

    async def start_relay() -> None:
        relay.start()

    return build_app(runtime, on_startup=[start_relay], on_shutdown=[relay.stop]), settings


def main() -> None:
    """Console entry point."""
    app, settings = create_app()
    serve(app, settings, DEFAULT_PORT)
