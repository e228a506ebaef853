"""``uep-scorer``: the scorer service process (health on port 8093 by default)."""

import logging

from faststream.asgi import AsgiFastStream

from uep_common.runtime.service import ServiceRuntime, build_app, serve
from uep_common.sandbox import configure as configure_sandbox
from uep_scorer.catalog import register_catalogue
from uep_scorer.references import ReferenceStore
from uep_scorer.service import register
from uep_scorer.settings import ScorerSettings

DEFAULT_PORT = 8093


def create_app() -> tuple[AsgiFastStream, ScorerSettings]:
    """Build the scorer's FastStream ASGI app."""
    settings = ScorerSettings()
    runtime = ServiceRuntime(settings, use_db=True)  # sets up logging
    configure_sandbox(settings.sandbox_mode)  # probes the isolation; logs ERROR (unavailable) or WARNING (unsafe)
    sessionmaker = runtime.sessionmaker
    assert sessionmaker is not None  # use_db=True
    register(runtime.broker, settings, ReferenceStore(sessionmaker, settings.reference_cache_size), sessionmaker)

    async def publish_catalogue() -> None:
        n = await register_catalogue(sessionmaker)
        logging.getLogger(__name__).info("metric catalogue registered: %d metrics", n)

    return build_app(runtime, on_startup=[publish_catalogue]), settings


def main() -> None:
    """Console entry point."""
    app, settings = create_app()
    serve(app, settings, DEFAULT_PORT)
