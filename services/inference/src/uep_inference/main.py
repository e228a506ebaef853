"""``uep-inference``: the inference service process (health on port 8092 by default)."""

from faststream.asgi import AsgiFastStream

from uep_common.runtime.service import ServiceRuntime, build_app, serve
from uep_common.sandbox import configure as configure_sandbox
from uep_inference.backends import Backends
from uep_inference.http_api import PATH, make_generate_endpoint
from uep_inference.limits import ModelLimits
from uep_inference.service import register
from uep_inference.settings import InferenceSettings

DEFAULT_PORT = 8092


def create_app() -> tuple[AsgiFastStream, InferenceSettings]:
    """Build the inference service's FastStream ASGI app."""
    settings = InferenceSettings()
    configure_sandbox(settings.sandbox_mode)  # agent tools run in it; probes the isolation and logs the outcome
    runtime = ServiceRuntime(settings)
    backends = Backends(settings)  # one instance of every registered backend (uep_inference.backends)
    limits = ModelLimits()
    drain = register(runtime.broker, settings, backends, limits)
    app = build_app(runtime, on_shutdown=[drain, backends.close])
    app.mount(PATH, make_generate_endpoint(backends, limits, settings))  # judge calls (uep_inference.http_api)
    return app, settings


def main() -> None:
    """Console entry point."""
    app, settings = create_app()
    serve(app, settings, DEFAULT_PORT)
