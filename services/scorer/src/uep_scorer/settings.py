"""Scorer settings (``UEP_*`` environment variables)."""

from pydantic import Field

from uep_common.settings import CommonSettings


class ScorerSettings(CommonSettings):
    """Settings of the scorer service."""

    service_name: str = "scorer"
    scorer_concurrency: int = Field(4, ge=1, description="Outputs scored concurrently (code runs in subprocesses).")
    reference_cache_size: int = Field(50_000, ge=0)
