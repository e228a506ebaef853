"""``uep-judge``: the judge service process (health on port 8094 by default)."""

from faststream.asgi import AsgiFastStream

from uep_common.runtime.outbox import OutboxRelay
from uep_common.runtime.service import ServiceRuntime, build_app, serve
from uep_judge.client import InferenceClient
from uep_judge.service import register
from uep_judge.settings import JudgeSettings

DEFAULT_PORT = 8094


def create_app() -> tuple[AsgiFastStream, JudgeSettings]:
    """Build the judge's FastStream ASGI app (with its outbox relay and inference client)."""
    settings = JudgeSettings()
    runtime = ServiceRuntime(settings, use_db=True)
    assert runtime.sessionmaker is not None  # use_db=True
    relay = OutboxRelay.from_settings(runtime.sessionmaker, runtime.broker, settings)
    client = InferenceClient(settings.inference_url, settings.judge_timeout_s, token=settings.internal_token)
    register(runtime.broker, settings, runtime.sessionmaker, relay, client)

    async def start_relay() -> None:
        relay.start()

    async def stop() -> None:
        await relay.stop()
        await client.close()

    return build_app(runtime, on_startup=[start_relay], on_shutdown=[stop]), settings


def main() -> None:
    """Console entry point."""
    app, settings = create_app()
    serve(app, settings, DEFAULT_PORT)
