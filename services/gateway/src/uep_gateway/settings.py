"""Gateway settings (``UEP_*`` environment variables)."""

from pydantic import Field

from uep_common.settings import CommonSettings


class GatewaySettings(CommonSettings):
    """Settings of the gateway."""

    service_name: str = "gateway"
    gateway_host: str = "127.0.0.1"
    gateway_port: int = Field(8080, ge=1, le=65535)
    max_request_bytes: int = Field(1_048_576, ge=1024, description="Larger request bodies are refused with 413.")
    max_upload_bytes: int = Field(50 * 1_048_576, ge=1024, description="Largest benchmark upload accepted.")
    max_upload_rows: int = Field(200_000, ge=1, description="Most samples in one uploaded benchmark.")
    max_repeats: int = Field(100, ge=1)
    results_page_max: int = Field(1000, ge=1)
