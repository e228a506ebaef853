"""Inference settings (``UEP_*`` environment variables)."""

from pydantic import Field

from uep_common.settings import CommonSettings


class InferenceSettings(CommonSettings):
    """Settings of the inference service."""

    service_name: str = "inference"
    inference_concurrency: int = Field(8, ge=1, description="Model calls in flight in this replica.")
    inference_timeout_s: float = Field(120.0, gt=0, description="Per-call timeout, seconds.")
    openai_api_key: str | None = Field(None, description="Bearer token for openai_compatible endpoints.")
