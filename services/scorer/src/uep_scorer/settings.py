"""Scorer settings (``UEP_*`` environment variables): the service's, and the code sandbox's, which the sandbox
also reads itself when it is configured outside the service (tests, benches)."""

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from uep_common.runtime.settings import CommonSettings


class SandboxSettings(BaseSettings):
    """Which sandbox runs untrusted code, with which interpreter, and how many are started ahead of time."""

    model_config = SettingsConfigDict(env_prefix="UEP_", extra="ignore")

    sandbox_mode: Literal["bwrap", "unsafe_process"] = Field(
        "bwrap",
        description="Code sandbox (UEP_SANDBOX_MODE): 'bwrap' (isolated; probed at start-up, code items score "
        "'sandbox_unavailable' if it cannot be set up) or 'unsafe_process' (no isolation, explicit opt-in only).",
    )
    sandbox_python: str | None = Field(
        None,
        description="Interpreter run inside the sandbox (UEP_SANDBOX_PYTHON); unset: the scorer's base interpreter, "
        "else the system's /usr/bin/python3.X of the same minor version, the first that passes the probe.",
    )
    sandbox_pool: int = Field(2, description="Sandboxes (or unsafe harness processes) started ahead of time (UEP_SANDBOX_POOL).")


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
