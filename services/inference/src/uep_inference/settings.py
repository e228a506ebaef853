"""Inference settings (``UEP_*`` environment variables)."""

from pydantic import Field, SecretStr

from uep_common.runtime.settings import CommonSettings
from uep_common.sandbox.settings import SandboxSettings


class InferenceSettings(CommonSettings, SandboxSettings):
    """Settings of the inference service; the code sandbox's (``UEP_SANDBOX_*``, where agent tools run) are
    :class:`~uep_common.sandbox.settings.SandboxSettings`."""

    service_name: str = "inference"
    inference_concurrency: int = Field(
        64,
        ge=1,
        description="Items in this replica at once, across every model; each model's capacity (its registry "
        "max_in_flight) still bounds the calls to it. Below a model's capacity this is what limits it: a model "
        "that answers in t seconds gets at most inference_concurrency / t items a second from one replica.",
    )
    inference_batch_timeout_ms: int = Field(
        1000,
        ge=1,
        description="Longest wait of one empty poll of the SampleDispatched consumer (uep_common.runtime.batch_polling."
        "get_batch): records are taken as soon as they are there, so this sets only how often an empty loop wakes.",
    )
    triton_row_batching: bool = Field(
        True,
        description="Send the one-row requests that several items of one Triton model make at once as one call of "
        "up to the model's max_batch_size rows (uep_inference.backends.row_batching); off: one call per item.",
    )
    inference_timeout_s: float = Field(120.0, gt=0, description="Per-call timeout, seconds.")
    inference_max_attempts: int = Field(3, ge=1, le=10, description="Calls per item when failures are transient.")
    inference_backoff_s: float = Field(0.5, ge=0, description="Base of the exponential backoff with jitter, seconds.")
    inference_max_retry_after_s: float = Field(
        60.0,
        ge=0,
        description="Longest wait before a retry that an endpoint's Retry-After (429, 5xx) may ask for, seconds.",
    )
    openai_api_key: str | None = Field(
        None, description="Bearer token for openai_compatible endpoints whose registry entry has no API key of its own."
    )
    model_secret_key: SecretStr | None = Field(
        None,
        description="Fernet key(s), comma-separated, that decrypt registered models' API keys (the gateway's "
        "UEP_MODEL_SECRET_KEY). Unset: a model with a stored key fails its calls with 'api_key_unavailable'.",
    )
