"""What a model backend is: the :class:`ModelBackend` protocol and the values it takes and returns.

A backend is one way of reaching a served model (``models.backend`` in the registry, ``ModelTarget.backend``
in every SampleDispatched). The inference service holds one instance of each registered backend per
process and picks it by name (:mod:`uep_inference.backends.registry`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from uep_common.contract.events import ModelTarget

if TYPE_CHECKING:
    from uep_inference.settings import InferenceSettings


@dataclass(frozen=True)
class GenerationRequest:
    """One generation asked of a backend.

    ``target``: where and what to call (``endpoint``, ``triton_model_name or name``, ``triton_model_version``);
    ``prompt``: the rendered prompt text; ``max_tokens``: at most this many new tokens (≥ 1); ``temperature``:
    sampling temperature (≥ 0; 0 = greedy); ``stop``: stop strings (a backend may send only the first few:
    OpenAI-compatible servers take 4); ``chat``: True = apply the model's chat template, False = raw text
    completion, None = the model's default; ``timeout_s``: the call's deadline, seconds (> 0).

    ``json_schema``: when set, the answer must be JSON matching this JSON Schema: the backend asks the model
    to constrain its decoding to it where the model can (llama.cpp grammars, vLLM guided decoding,
    TensorRT-LLM guided decoding, an OpenAI-compatible ``response_format``) and says so in
    :attr:`Generation.constrained`; elsewhere the request is sent as if there were none.

    ``continuations``: when not empty, the request is a log-likelihood request (``ModelBackend.loglikelihood``):
    ``prompt`` is the context and each continuation (its delimiter included, e.g. ``" Paris"``) is scored as
    it stands after the context; the decoding fields are then unused.
    """

    target: ModelTarget
    prompt: str
    max_tokens: int
    timeout_s: float
    temperature: float = 0.0
    stop: tuple[str, ...] = field(default_factory=tuple)
    chat: bool | None = None
    continuations: tuple[str, ...] = field(default_factory=tuple)
    json_schema: dict[str, Any] | None = None


@dataclass(frozen=True)
class Loglik:
    """The log-likelihood of one continuation given a context (lm-evaluation-harness ``loglikelihood``).

    ``logprob``: sum over the continuation's tokens of ln P(token | context, previous tokens), natural log,
    ≤ 0; ``n_tokens``: the continuation's token count (≥ 1); ``is_greedy``: every continuation token is the
    model's most probable next token (greedy decoding would produce the continuation).
    """

    logprob: float
    n_tokens: int
    is_greedy: bool


@dataclass(frozen=True)
class Generation:
    """A model's answer: ``text`` and token counts (None when the backend does not report them); for a
    log-likelihood request ``logliks`` holds one :class:`Loglik` per continuation, in order (``text`` empty,
    ``prompt_tokens`` the context's tokens, ``completion_tokens`` the continuations' tokens in all).
    ``constrained``: the model was asked to decode under the request's ``json_schema`` (False when the
    request had none, or the model offers no constrained decoding)."""

    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    logliks: tuple[Loglik, ...] | None = None
    constrained: bool = False


@dataclass(frozen=True)
class PredictionRequest:
    """One call of a non-generative model (``target.kind`` classification, ranking or embedding).

    Classification: ``text`` (contract ``text``) or ``features`` (contract ``features``: finite floats).
    Ranking and embedding retrieval: ``query`` and the ``candidates``' texts, in the sample's order.
    ``timeout_s``: the call's deadline, seconds (> 0).
    """

    target: ModelTarget
    timeout_s: float
    text: str | None = None
    features: tuple[float, ...] | None = None
    query: str | None = None
    candidates: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class PredictionOutput:
    """A non-generative model's raw answer: a classifier's ``probabilities`` (one per class, in the model's
    class order) and ``label_index`` (the class it predicts); a ranker's or an embedding model's ``scores``
    (one per candidate, in the request's order; higher = more relevant). The service names the classes and
    sorts the candidates (:mod:`uep_inference.predictions`)."""

    probabilities: tuple[float, ...] | None = None
    label_index: int | None = None
    scores: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Probe:
    """Whether a target answers: ``ok``; on failure ``kind`` (a :class:`BackendError` kind) and ``detail``;
    ``latency_ms``: the probe's wall time, milliseconds."""

    ok: bool
    latency_ms: float
    kind: str | None = None
    detail: str = ""


class BackendError(RuntimeError):
    """A model call failed; ``kind`` is a short machine-readable reason stored with the item's error
    (``<backend>_unavailable``, ``<backend>_error``, ``<backend>_http_error``, ``rate_limited``, ``timeout``,
    …). ``retry_after_s``: how long the endpoint asked to wait before another call (its ``Retry-After``),
    seconds ≥ 0, or None; the service waits at least that long (bounded) before retrying a transient kind."""

    def __init__(self, kind: str, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_after_s = retry_after_s


@runtime_checkable
class ModelBackend(Protocol):
    """What a backend class must provide (register it with ``@register_backend("name")``).

    Construction: ``cls(settings: InferenceSettings)``, once per inference process; clients are opened
    lazily, per endpoint, on first use.

    ``name``: the registry name, set by :func:`~uep_inference.backends.registry.register_backend`.
    ``transient_errors``: the :class:`BackendError` kinds worth another attempt (the endpoint may come back);
    the service retries them (``uep_inference.service.TRANSIENT``, which adds ``timeout``).

    ``generate(request)`` → :class:`Generation`: one call with the request's decoding parameters, within
    ``request.timeout_s``. Raises :class:`BackendError` for every failure, never anything else (the kind
    ``timeout`` for a missed deadline).

    ``loglikelihood(request)`` → :class:`Generation` with ``logliks``: the log-likelihood of each of
    ``request.continuations`` given ``request.prompt``, within ``request.timeout_s``. Raises
    :class:`BackendError`; the kind ``loglik_unsupported`` when the model cannot answer such requests (the
    registry's ``models.supports_logprobs`` declares that it can; evaluation creation refuses a
    log-likelihood benchmark for a model that does not declare it).

    ``predict(request)`` → :class:`PredictionOutput`: one call of a classifier, ranker or embedding model
    (:class:`PredictionRequest`; the target's ``kind`` and ``contract`` say which), within
    ``request.timeout_s``. Raises :class:`BackendError`; the kind ``contract_unsupported`` when the backend
    cannot call a model of that kind and contract.

    ``probe(target, timeout_s)`` → :class:`Probe`: is the model of ``target`` loaded and answering; never
    raises for an unreachable or failing endpoint (``ok=False`` with the kind and detail).

    ``capacity(target)`` → calls in flight this replica may have open to ``target`` (≥ 1), or None for
    unbounded; the service sizes the model's semaphore with it (``uep_inference.service.ModelLimits``).

    ``close()``: close every client (service shutdown).
    """

    name: ClassVar[str]
    transient_errors: ClassVar[frozenset[str]]

    def __init__(self, settings: InferenceSettings) -> None: ...

    async def generate(self, request: GenerationRequest) -> Generation:
        """One generation call within ``request.timeout_s``; raises only :class:`BackendError`."""

    async def loglikelihood(self, request: GenerationRequest) -> Generation:
        """The log-likelihood of each of ``request.continuations`` given the prompt; raises only
        :class:`BackendError` (``loglik_unsupported`` when the model cannot answer)."""

    async def predict(self, request: PredictionRequest) -> PredictionOutput:
        """One call of a classifier, ranker or embedding model; raises only :class:`BackendError`."""

    async def probe(self, target: ModelTarget, timeout_s: float) -> Probe:
        """Whether the model of ``target`` is loaded and answering, within ``timeout_s`` seconds; never raises."""

    def capacity(self, target: ModelTarget) -> int | None:
        """Calls in flight this replica may have open to ``target`` (≥ 1), or None for unbounded."""

    async def close(self) -> None:
        """Close every client (service shutdown)."""


def registry_capacity(target: ModelTarget) -> int | None:
    """The serving capacity the model registry gives ``target`` (``models.max_in_flight``), None = unbounded:
    what a backend's ``capacity`` returns unless the backend knows better."""
    return target.max_concurrency
