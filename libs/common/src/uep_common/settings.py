"""Settings shared by every uep process, read from ``UEP_*`` environment variables.

Defaults point at the local stack that ``make up`` starts (PostgreSQL and Redis on this machine, tansu
on 127.0.0.1:9092). Each service extends :class:`CommonSettings` with its own fields.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class CommonSettings(BaseSettings):
    """Connection and telemetry settings every service needs.

    Environment variables use the ``UEP_`` prefix, e.g. ``UEP_DATABASE_URL``.
    """

    model_config = SettingsConfigDict(env_prefix="UEP_", extra="ignore")

    service_name: str = "uep"
    database_url: str = "postgresql+psycopg://postgres@127.0.0.1:5432/uep"
    redis_url: str = "redis://127.0.0.1:6379/0"
    kafka_bootstrap: str = "127.0.0.1:9092"
    kafka_partitions: int = Field(6, ge=1, description="Partitions per topic when uep creates its topics.")
    kafka_replication_factor: int = Field(
        1, ge=1, description="Replication factor of topics uep creates (3 on a production cluster)."
    )
    kafka_session_timeout_ms: int = Field(
        6000, ge=1000, description="Consumer session timeout; tansu holds a join for half of it."
    )
    kafka_heartbeat_interval_ms: int = 1000
    kafka_fetch_max_wait_ms: int = Field(100, ge=1, description="Long-poll wait; latency ~ half of it on tansu.")
    kafka_request_timeout_ms: int = 10_000
    kafka_offset_watchdog_s: float = Field(
        3.0, gt=0, description="Seconds between checks for consumers left past a lost log (uep_common.offsets)."
    )
    consumer_group_prefix: str = Field("uep", description="Consumer groups are '<prefix>.<service>'.")
    health_host: str = "127.0.0.1"
    health_port: int = Field(0, ge=0, le=65535, description="Port of /healthz and /readyz; 0 = service default.")
    internal_token: str = Field(
        "",
        description="Shared secret of internal service calls (judge → inference POST /internal/generate), sent as "
        "'Authorization: Bearer <token>'. Empty: the internal endpoint refuses every call.",
        repr=False,
    )
    otel_exporter: Literal["none", "console", "otlp"] = "console"
    otel_console_path: str | None = Field(
        None, description="With the console exporter: append one JSON span per line to this file instead of stdout."
    )
    otel_otlp_endpoint: str = "http://127.0.0.1:4318/v1/traces"
    log_level: str = "INFO"
    # Work limits per tenant (uep_common.creation.WorkLimits; a tenant's own value in the tenants table wins).
    max_items_per_evaluation: int = Field(
        100_000, ge=1, le=2**31 - 1, description="Most items (samples × repeats) one evaluation may have."
    )
    max_queued_items: int = Field(
        500_000,
        ge=1,
        le=2**31 - 1,
        description="Most items a tenant may have queued: not yet finished, across its pending/running/interrupted evaluations.",
    )
    max_evaluations_per_minute: int = Field(
        120, ge=1, le=2**31 - 1, description="Most evaluations a tenant may create in any 60 s (requests and scheduled runs)."
    )
    min_schedule_interval_s: int = Field(
        300,
        ge=1,
        le=2**31 - 1,
        description="Closest two runs of one schedule, seconds: a cron whose consecutive runs are closer is refused, "
        "and the scheduler never creates runs closer than this.",
    )
