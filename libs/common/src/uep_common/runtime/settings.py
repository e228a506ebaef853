"""Settings shared by every uep process, read from ``UEP_*`` environment variables.

Defaults point at the local stack that ``make up`` starts (its PostgreSQL on 127.0.0.1:25432, Redis on
127.0.0.1:26379, Apache Kafka on 127.0.0.1:9092). Each service extends :class:`CommonSettings` with its own fields.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class CommonSettings(BaseSettings):
    """Connection and telemetry settings every service needs.

    Environment variables use the ``UEP_`` prefix, e.g. ``UEP_DATABASE_URL``.
    """

    model_config = SettingsConfigDict(env_prefix="UEP_", extra="ignore")

    service_name: str = "uep"
    database_url: str = "postgresql+psycopg://postgres@127.0.0.1:25432/uep"
    redis_url: str = "redis://127.0.0.1:26379/0"
    kafka_bootstrap: str = "127.0.0.1:9092"
    kafka_partitions: int = Field(6, ge=1, description="Partitions per topic when uep creates its topics.")
    kafka_replication_factor: int = Field(
        1, ge=1, description="Replication factor of topics uep creates (3 on a production cluster)."
    )
    kafka_session_timeout_ms: int = Field(
        10_000,
        ge=1000,
        description="Consumer session timeout: a member that sends no heartbeat for this long (a killed replica) "
        "leaves its group and its partitions go to the others (the broker allows 6000 to 1800000; Kafka's client "
        "default is 45000).",
    )
    kafka_heartbeat_interval_ms: int = Field(
        3000,
        ge=100,
        description="Consumer heartbeat period (a third of the session timeout, Kafka's rule): members learn of a "
        "rebalance at their next heartbeat; each idle consumer sends one request per period.",
    )
    kafka_fetch_max_wait_ms: int = Field(
        5000,
        ge=1,
        description="Long-poll wait of a fetch (Kafka's fetch.max.wait.ms): the broker answers a waiting fetch as "
        "soon as a record arrives, so this costs no latency and only sets how often an idle consumer fetches.",
    )
    kafka_consumer_timeout_ms: int = Field(
        5000,
        ge=10,
        description="Longest sleep of a consumer's background fetch loop (aiokafka consumer_timeout_ms, default 200): "
        "it wakes at once for new data, consumed data and rebalances, so this only paces its idle wake-ups.",
    )
    kafka_request_timeout_ms: int = 10_000
    kafka_compression_type: Literal["gzip", "lz4", "zstd"] | None = Field(
        None,
        description="Producer compression of record batches (Kafka's compression.type): fewer bytes on the wire and "
        "in the broker's log for some CPU in every producer and consumer; unset: none. gzip needs only the standard "
        "library (aiokafka compresses at level 9: the costliest in CPU), lz4 and zstd cramjam (installed with uep_common).",
    )
    kafka_retention_ms: int = Field(
        24 * 3600 * 1000,
        ge=60_000,
        description="retention.ms of the topics uep creates: a closed log segment older than this is deleted. The "
        "events are a transport (PostgreSQL and the outbox are the record), so a day covers any consumer's outage.",
    )
    kafka_retention_bytes: int = Field(
        1 << 30,
        ge=1 << 20,
        description="retention.bytes of the topics uep creates, per partition: the oldest closed segments are deleted "
        "beyond it (with 6 partitions a topic holds at most about 6 GiB plus one open segment each).",
    )
    kafka_segment_bytes: int = Field(
        64 << 20,
        ge=1 << 20,
        description="segment.bytes of the topics uep creates: retention deletes whole closed segments, so this is the "
        "grain of what it frees.",
    )
    kafka_dead_letter_retention_ms: int = Field(
        7 * 24 * 3600 * 1000,
        ge=60_000,
        description="retention.ms of the dead-letter topic (the scheduler also keeps each dead letter in PostgreSQL).",
    )
    kafka_min_insync_replicas: int = Field(
        1,
        ge=1,
        description="min.insync.replicas of topics uep creates (2 on a production cluster with replication factor 3): "
        "with acks=all a write needs this many in-sync replicas or is refused.",
    )
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="Kafka client security protocol (the listener's: SASL_SSL for Strimzi's scram-sha-512 TLS one)."
    )
    kafka_sasl_mechanism: Literal["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"] = Field(
        "SCRAM-SHA-512", description="SASL mechanism with SASL_PLAINTEXT / SASL_SSL."
    )
    kafka_sasl_username: str = Field("", description="SASL user (a Strimzi KafkaUser's name); required with SASL_*.")
    kafka_sasl_password: SecretStr | None = Field(None, description="SASL password; required with SASL_*.")
    kafka_ssl_ca_file: str | None = Field(
        None, description="PEM file of the CA that signed the brokers' certificates (SSL / SASL_SSL); unset: the system CAs."
    )
    kafka_ssl_cert_file: str | None = Field(None, description="PEM client certificate for mutual TLS (with kafka_ssl_key_file).")
    kafka_ssl_key_file: str | None = Field(None, description="PEM private key of kafka_ssl_cert_file.")
    consumer_group_prefix: str = Field(
        "uep", description="Consumer groups are '<prefix>.<service>' or '<prefix>.<service>.<subscription>'."
    )
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
    otel_instrument_db: bool = Field(
        True,
        description="With an exporter: a span per SQL statement (SQLAlchemy) and per Redis command, made only "
        "inside a span the service already has (uep_common.runtime.telemetry).",
    )
    otel_instrument_http: bool = Field(
        True, description="With an exporter: a client span per httpx request, with traceparent sent on it."
    )
    log_level: str = "INFO"
    kafka_access_log_level: Literal["DEBUG", "INFO", "WARNING"] = Field(
        "DEBUG",
        description="Level of FastStream's per-record access lines ('Received', 'Processed' on faststream.access.kafka). "
        "DEBUG keeps them out of an INFO log: two lines per record and service cost CPU at hundreds of records a "
        "second; INFO shows every record.",
    )
    log_format: Literal["json", "text", "auto"] = Field(
        "auto",
        description="Log lines: one JSON object per line (json), plain text (text), or text when stderr is a terminal "
        "and JSON otherwise (auto). Neither has ANSI colour codes (uep_common.runtime.logs).",
    )
    metrics_enabled: bool = Field(
        True, description="Record Prometheus metrics and serve GET /metrics (off: every metric hook does nothing)."
    )
    metrics_port: int = Field(
        0,
        ge=0,
        le=65535,
        description="Serve /metrics on this port of health_host instead of the health port (0: on the health port; "
        "the gateway's health port is its API port). Kubernetes sets it, so scrapers reach no API or internal route.",
    )
    metrics_sample_s: float = Field(
        10.0, gt=0, description="Seconds between samples of the sampled gauges (consumer lag, queue depths, outbox)."
    )
    # Work limits per tenant (uep_common.records.creation.WorkLimits; a tenant's own value in the tenants table wins).
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

    @model_validator(mode="after")
    def _check_kafka(self) -> Self:
        """SASL needs a user and a password; min.insync.replicas cannot exceed the replication factor; a client
        key needs its certificate."""
        if self.kafka_security_protocol.startswith("SASL_"):
            if not self.kafka_sasl_username:
                raise ValueError(f"kafka_sasl_username: required with kafka_security_protocol={self.kafka_security_protocol}")
            if self.kafka_sasl_password is None or not self.kafka_sasl_password.get_secret_value():
                raise ValueError(f"kafka_sasl_password: required with kafka_security_protocol={self.kafka_security_protocol}")
        if self.kafka_min_insync_replicas > self.kafka_replication_factor:
            raise ValueError(
                f"kafka_min_insync_replicas: {self.kafka_min_insync_replicas} exceeds kafka_replication_factor "
                f"{self.kafka_replication_factor} (every write would be refused)"
            )
        if bool(self.kafka_ssl_cert_file) != bool(self.kafka_ssl_key_file):
            raise ValueError("kafka_ssl_cert_file, kafka_ssl_key_file: set both or neither")
        return self
