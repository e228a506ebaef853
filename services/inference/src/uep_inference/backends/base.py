"""What a model backend is: the :class:`ModelBackend` protocol and the values it takes and returns.

A backend is one way of reaching a served model (``models.backend`` in the registry, ``ModelTarget.backend``
in every SampleDispatched). The inference service holds one instance of each registered backend per
process and picks it by name (:mod:`uep_inference.backends.registry`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

from uep_common.events import ModelTarget

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
    """

    target: ModelTarget
    prompt: str
    max_tokens: int
    timeout_s: float
    temperature: float = 0.0
    stop: tuple[str, ...] = field(default_factory=tuple)
    chat: bool | None = None


@dataclass(frozen=True)
class Generation:
    """A model's answer: ``text`` and token counts (None when the backend does not report them)."""

    text: str
    prompt_tokens: int | None
    completion_tokens: int | None


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
    (``<backend>_unavailable``, ``<backend>_error``, ``<backend>_http_error``, ``timeout``, …)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


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

    ``probe(target, timeout_s)`` → :class:`Probe`: is the model of ``target`` loaded and answering; never
    raises for an unreachable or failing endpoint (``ok=False`` with the kind and detail).

    ``capacity(target)`` → calls in flight this replica may have open to ``target`` (≥ 1), or None for
    unbounded; the service sizes the model's semaphore with it (``uep_inference.service.ModelLimits``).

    ``close()``: close every client (service shutdown).
    """

    name: ClassVar[str]
    transient_errors: ClassVar[frozenset[str]]

    def __init__(self, settings: InferenceSettings) -> None: ...

    async def generate(self, request: GenerationRequest) -> Generation: ...

    async def probe(self, target: ModelTarget, timeout_s: float) -> Probe: ...

    def capacity(self, target: ModelTarget) -> int | None: ...

    async def close(self) -> None: ...


def registry_capacity(target: ModelTarget) -> int | None:
    """The serving capacity the model registry gives ``target`` (``models.max_in_flight``), None = unbounded:
    what a backend's ``capacity`` returns unless the backend knows better."""
    return target.max_concurrency
