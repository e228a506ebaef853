"""Judge settings (``UEP_*`` environment variables)."""

from pydantic import Field

from uep_common.runtime.outbox_retention import OutboxRetentionSettings


class JudgeSettings(OutboxRetentionSettings):
    """Settings of the judge service."""

    service_name: str = "judge"
    inference_url: str = Field("http://127.0.0.1:8092", description="Base URL of the inference service's /internal/generate.")
    judge_concurrency: int = Field(8, ge=1, description="Items judged concurrently in this replica.")
    judge_timeout_s: float = Field(180.0, gt=0, description="Timeout of one judge call, seconds.")
