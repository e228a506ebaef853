"""Settings of the code sandbox (``UEP_SANDBOX_*``): part of the settings of each service that runs untrusted
code (the scorer's code metrics, inference's agent tools), and read by the sandbox itself when it is configured
outside a service (tests, benches)."""

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


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
