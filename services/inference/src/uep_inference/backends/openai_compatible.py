"""The ``openai_compatible`` backend: ``/v1/chat/completions``, or ``/v1/completions`` for raw text (vLLM,
TGI, llama.cpp server, Triton's OpenAI frontend), with the bearer token ``UEP_OPENAI_API_KEY``.

Error kinds: ``openai_unavailable`` (the connection failed or timed out; transient), ``openai_http_error``
(a status other than 200), ``openai_bad_response`` (a body without ``choices[0]``'s text).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, ClassVar

import httpx

from uep_common.events import ModelTarget
from uep_inference.backends.base import BackendError, Generation, GenerationRequest, Probe, registry_capacity
from uep_inference.backends.registry import register_backend

if TYPE_CHECKING:
    from uep_inference.settings import InferenceSettings

MAX_STOP = 4
"""Stop strings sent (OpenAI's API takes at most four)."""


@register_backend("openai_compatible")
class OpenAIBackend:
    """One ``httpx.AsyncClient`` for every OpenAI-compatible endpoint (``transport``: for tests)."""

    transient_errors: ClassVar[frozenset[str]] = frozenset({"openai_unavailable"})

    def __init__(self, settings: InferenceSettings | None = None, transport: httpx.AsyncBaseTransport | None = None) -> None:
        api_key = settings.openai_api_key if settings is not None else None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(headers=headers, transport=transport)

    async def generate(self, request: GenerationRequest) -> Generation:
        """A chat completion with the prompt as the user message, or with ``chat=False`` a raw text
        completion (``/v1/completions``). Raises :class:`BackendError`."""
        target, chat = request.target, request.chat
        body: dict[str, Any] = {
            "model": target.triton_model_name or target.name,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        }
        if chat is False:
            body["prompt"], path = request.prompt, "/v1/completions"
        else:
            body["messages"], path = [{"role": "user", "content": request.prompt}], "/v1/chat/completions"
        if request.stop:
            body["stop"] = list(request.stop[:MAX_STOP])
        try:
            r = await self._http.post(target.endpoint.rstrip("/") + path, json=body, timeout=request.timeout_s)
        except httpx.HTTPError as exc:
            raise BackendError("openai_unavailable", repr(exc)) from exc
        if r.status_code != 200:
            raise BackendError("openai_http_error", f"HTTP {r.status_code}: {r.text[:500]}")
        try:
            data = r.json()
            choice = data["choices"][0]
            text = (choice["text"] if chat is False else choice["message"]["content"]) or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise BackendError("openai_bad_response", f"unexpected response: {r.text[:500]}") from exc
        usage = data.get("usage") or {}
        return Generation(text, usage.get("prompt_tokens"), usage.get("completion_tokens"))

    async def probe(self, target: ModelTarget, timeout_s: float) -> Probe:
        """``GET /v1/models`` answers 200 (the server is up; whether it serves this model is not checked:
        servers differ in what they list)."""
        start = time.perf_counter()
        try:
            r = await self._http.get(target.endpoint.rstrip("/") + "/v1/models", timeout=timeout_s)
        except httpx.HTTPError as exc:
            return Probe(False, (time.perf_counter() - start) * 1000, "openai_unavailable", repr(exc)[:500])
        latency_ms = (time.perf_counter() - start) * 1000
        if r.status_code != 200:
            return Probe(False, latency_ms, "openai_http_error", f"HTTP {r.status_code}: {r.text[:500]}")
        return Probe(True, latency_ms)

    def capacity(self, target: ModelTarget) -> int | None:
        """The registry's serving capacity (``max_in_flight``)."""
        return registry_capacity(target)

    async def close(self) -> None:
        """Close the HTTP client."""
        await self._http.aclose()
