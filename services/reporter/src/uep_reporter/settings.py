"""Reporter settings (``UEP_*`` environment variables)."""

from pydantic import Field

from uep_common.settings import CommonSettings


class ReporterSettings(CommonSettings):
    """Settings of the reporter service."""

    service_name: str = "reporter"
    reporter_batch_size: int = Field(500, ge=1, description="ScoreComputed events stored per transaction.")
    reporter_batch_timeout_ms: int = Field(50, ge=1)
