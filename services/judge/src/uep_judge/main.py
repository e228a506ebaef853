"""``uep-judge``: the judge service process (health on port 8094 by default)."""

from uep_common.service import ServiceRuntime, build_app, serve
from uep_judge.service import register
from uep_judge.settings import JudgeSettings

DEFAULT_PORT = 8094


def create_app():
    """Build the judge's FastStream ASGI app."""
    settings = JudgeSettings()
    runtime = ServiceRuntime(settings)
    register(runtime.broker, settings)
    return build_app(runtime), settings


def main() -> None:
    """Console entry point."""
    app, settings = create_app()
    serve(app, settings, DEFAULT_PORT)
