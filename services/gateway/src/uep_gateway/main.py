"""``uep-gateway``: serves the REST API with uvicorn on ``UEP_GATEWAY_HOST``:``UEP_GATEWAY_PORT`` (8080)."""

from uep_common.runtime import http_server
from uep_common.runtime.logs import configure_logging
from uep_gateway.app import create_app
from uep_gateway.settings import GatewaySettings


def main() -> None:
    """Console entry point."""
    settings = GatewaySettings()
    configure_logging(settings, force=True)  # one format for uvicorn's lines and ours (uep_common.runtime.logs)
    http_server.run(
        create_app(settings),
        host=settings.gateway_host,
        port=settings.gateway_port,
        log_level=settings.log_level.lower(),
        log_config=None,
    )
