"""Scorer settings (``UEP_*`` environment variables): the service's, and the code sandbox's, which the sandbox
also reads itself when it is configured outside the service (tests, benches)."""

from pydantic import Field

from uep_common.runtime.settings import CommonSettings
from uep_common.sandbox.settings import SandboxSettings


class ScorerSettings(CommonSettings, SandboxSettings):
    """Settings of the scorer service; the code sandbox's (``sandbox_mode``, ``sandbox_python``, ``sandbox_pool``)
    are :class:`SandboxSettings`."""

    service_name: str = "scorer"
    scorer_concurrency: int = Field(4, ge=1, description="Outputs scored concurrently (code runs in subprocesses).")
    scorer_batch_max: int = Field(
        64,
        ge=1,
        le=10_000,
        description="Most OutputGenerated records handled per consumer batch: one handler call scores and publishes "
        "them all (scorer_concurrency at a time), instead of one per record. A batch of code items runs for about "
        "scorer_batch_max / scorer_concurrency sandbox runs, which must stay well inside the consumer's "
        "max.poll.interval (aiokafka's default 300 s).",
    )
    scorer_batch_timeout_ms: int = Field(
        1000,
        ge=1,
        description="Longest wait of one empty poll of the OutputGenerated consumer (uep_common.runtime.batch_polling."
        "get_batch): outputs are taken as soon as they are there, so this sets only how often an empty loop wakes.",
    )
    reference_cache_size: int = Field(50_000, ge=0)
