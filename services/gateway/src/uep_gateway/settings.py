"""Gateway settings (``UEP_*`` environment variables)."""

from pydantic import Field, SecretStr

from uep_common.analytics.judge_standing import JudgeCalibrationSettings
from uep_common.registry.model_registry import EgressSettings
from uep_common.runtime.outbox_retention import OutboxRetentionSettings


class GatewaySettings(OutboxRetentionSettings, EgressSettings, JudgeCalibrationSettings):
    """Settings of the gateway (the model endpoints' egress allowlist, ``UEP_MODEL_EGRESS_*``, from
    :class:`uep_common.registry.model_registry.EgressSettings`; the judge calibration threshold,
    ``UEP_JUDGE_MIN_AGREEMENT``)."""

    service_name: str = "gateway"
    gateway_host: str = "127.0.0.1"
    gateway_port: int = Field(8080, ge=1, le=65535)
    max_request_bytes: int = Field(1_048_576, ge=1024, description="Larger request bodies are refused with 413.")
    max_upload_bytes: int = Field(50 * 1_048_576, ge=1024, description="Largest benchmark upload accepted.")
    max_upload_rows: int = Field(200_000, ge=1, description="Most samples in one uploaded benchmark.")
    max_upload_decoded_bytes: int = Field(
        256 * 1_048_576,
        ge=1024,
        description="Most bytes an upload's rows may take once decompressed and decoded (Parquet: the column "
        "chunks' uncompressed sizes from the file's metadata, at least 8 bytes a value, and the strings of "
        "dictionary-encoded columns as expanded; checked before any row is built).",
    )
    max_upload_columns: int = Field(1000, ge=1, description="Most columns (Parquet leaf columns, CSV fields) in an upload.")
    max_upload_row_bytes: int = Field(
        1_048_576,
        ge=256,
        description="Largest row: a JSONL line or CSV field (characters), and each row as UTF-8 JSON (bytes).",
    )
    max_prompt_chars: int = Field(
        262_144, ge=64, description="Longest prompt (characters) a row of an upload may render through its template."
    )
    upload_workers: int = Field(2, ge=1, le=32, description="Worker processes that parse uploads and render templates.")
    upload_worker_timeout_s: float = Field(
        30.0, gt=0, description="Wall-clock budget of one upload's parsing and rendering; past it the worker is killed."
    )
    upload_worker_memory_bytes: int = Field(
        2 * 1_073_741_824,
        ge=268_435_456,
        description="Address-space limit (RLIMIT_AS) of each worker process, its ~0.5 GiB of interpreter and "
        "libraries included; a job that needs more is refused.",
    )
    preview_timeout_s: float = Field(5.0, gt=0, description="Wall-clock budget of rendering one preview page.")
    preview_prompt_chars: int = Field(
        16_384, ge=64, description="Rendered prompts in a preview are cut to this many characters (prompt_truncated)."
    )
    preview_max_bytes: int = Field(
        2 * 1_048_576,
        ge=65_536,
        description="Largest preview response (JSON bytes); the page ends before a sample that would pass it.",
    )
    max_repeats: int = Field(100, ge=1)
    results_page_max: int = Field(1000, ge=1)
    # identity (uep_gateway.auth)
    session_ttl_s: int = Field(8 * 3600, ge=60, description="A login session ends this many seconds after sign-in.")
    session_idle_s: int = Field(3600, ge=60, description="A login session ends after this many seconds without a request.")
    session_cookie_secure: bool = Field(
        True, description="Mark the session cookie Secure (HTTPS only; browsers allow localhost)."
    )
    auth_cache_ttl_s: float = Field(2.0, ge=0, description="Seconds a credential lookup is cached per gateway process.")
    invitation_ttl_s: int = Field(7 * 86400, ge=60, description="A member invitation lapses this many seconds after it is sent.")
    max_pending_invitations: int = Field(1000, ge=1, description="Most pending invitations one tenant may have.")
    login_max_password_chars: int = Field(1024, ge=64, description="Longest password accepted at sign-in.")
    # rate limits (uep_gateway.ratelimit); strings are parsed by the limits library ("600/minute", "10/second")
    rate_limits_enabled: bool = True
    rate_limits: dict[str, str] = Field(
        default_factory=lambda: {
            "*.read": "1200/minute",
            "*.write": "300/minute",
            "*.upload": "30/minute",
            "*.auth": "20/minute",
            "viewer.write": "60/minute",
            "annotator.write": "600/minute",
            "site.read": "6000/minute",
            "site.write": "1200/minute",
        },
        description="Per principal: '<role>.<class>' or '*.<class>' -> rate; classes read, write, upload, auth.",
    )
    tenant_rate_limits: dict[str, str] = Field(
        default_factory=lambda: {"read": "6000/minute", "write": "1500/minute", "upload": "60/minute"},
        description="Per tenant, shared by all its principals: class -> rate.",
    )
    failed_auth_rate_limit: str = Field(
        "60/minute", description="Requests with a failing API key or session per client address (not sign-ins)."
    )
    failed_signin_account_rate_limit: str = Field(
        "10/minute", description="Failed sign-ins per account (username); past it the account's sign-in is 429."
    )
    failed_signin_client_rate_limit: str = Field(
        "100/minute", description="Failed sign-ins per client address, whichever accounts they name."
    )
    # the model registry (uep_common.registry.model_registry)
    model_secret_key: SecretStr | None = Field(
        None,
        description="Fernet key(s) encrypting the API keys models store, comma-separated (the first encrypts, every "
        "one decrypts: rotation); make one with `python -c 'from cryptography.fernet import Fernet; "
        "print(Fernet.generate_key().decode())'`. Unset: a registration with an api_key is refused (422).",
    )
    model_ready_check: bool = Field(
        True, description="Refuse (409) an evaluation of a model whose endpoint does not answer its readiness check."
    )
    model_ready_timeout_s: float = Field(3.0, gt=0, le=30, description="The most one readiness check waits, seconds.")
    model_ready_cache_s: float = Field(5.0, ge=0, description="Seconds a readiness answer is reused per model endpoint.")
    leaderboards_site_wide: bool = Field(False, description="Boards show every tenant's entries, not only the caller's.")
