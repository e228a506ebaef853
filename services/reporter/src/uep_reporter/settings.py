"""Reporter settings (``UEP_*`` environment variables)."""

from pydantic import Field

from uep_common.settings import CommonSettings


class ReporterSettings(CommonSettings):
    """Settings of the reporter service."""

    service_name: str = "reporter"
    reporter_batch_size: int = Field(500, ge=1, description="ScoreComputed events stored per transaction.")
    reporter_batch_timeout_ms: int = Field(50, ge=1)
    stop_loss_error_rate: float = Field(
        0.5, ge=0, le=1, description="An evaluation whose error rate exceeds this stops itself (failed)..."
    )
    stop_loss_min_items: int = Field(20, ge=1, description="... once at least this many results are in.")
