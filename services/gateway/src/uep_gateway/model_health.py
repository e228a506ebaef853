"""Whether a model's endpoint answers, asked when an evaluation is created, so that a model nobody serves is
refused there (409 naming it) instead of being accepted and failing every item.

Triton endpoints (gRPC or HTTP) are asked Triton's model-ready question (``is_model_ready`` of
``tritonclient``, the client the inference service uses) for the served name and version; an
OpenAI-compatible endpoint answers when ``GET {endpoint}/v1/models`` gets any HTTP answer (the gateway holds
no decrypted API key, so a 401 counts as answering). Each check is bounded by
``UEP_MODEL_READY_TIMEOUT_S``; answers are remembered for ``UEP_MODEL_READY_CACHE_S`` per (endpoint, served
name, version), so a burst of creations asks once. A bound, not a guarantee: a model may still go away after
creation, and then its items fail as before.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from uep_common.contract.events import Backend
from uep_common.tables.models import Model

MAX_REMEMBERED = 10_000
"""Answers remembered at most (the memory is cleared past it)."""


class ModelHealth:
    """The readiness check of model endpoints, with a short memory of answers.

    ``timeout_s``: the most one check waits, seconds; ``cache_s``: how long an answer is reused, seconds (0:
    never)."""

    def __init__(self, timeout_s: float, cache_s: float) -> None:
        self.timeout_s = timeout_s
        self.cache_s = cache_s
        self._answers: dict[tuple[str, str, str], tuple[float, str | None]] = {}

    async def problem(self, model: Model) -> str | None:
        """None when ``model``'s endpoint serves it and is ready; else why not, in a few words (no address is
        resolved here beyond what the registration allowed, and no error text of the server is repeated)."""
        served = model.triton_model_name or model.name
        key = (model.endpoint, served, model.triton_model_version or "")
        hit = self._answers.get(key)
        now = time.monotonic()
        if hit is not None and hit[0] > now:
            return hit[1]
        try:
            answer = await asyncio.wait_for(self._ask(model, served), self.timeout_s)
        except TimeoutError:
            answer = f"no answer within {self.timeout_s:g} s"
        if len(self._answers) >= MAX_REMEMBERED:
            self._answers.clear()
        if self.cache_s > 0:
            self._answers[key] = (now + self.cache_s, answer)
        return answer

    async def _ask(self, model: Model, served: str) -> str | None:
        if str(model.backend) == Backend.openai_compatible:
            return await _openai_answers(model.endpoint, self.timeout_s)
        return await _triton_ready(model.endpoint, served, model.triton_model_version or "", self.timeout_s)


async def _openai_answers(endpoint: str, timeout_s: float) -> str | None:
    import httpx

    try:
        async with httpx.AsyncClient(timeout=timeout_s, follow_redirects=False) as client:
            await client.get(endpoint.rstrip("/") + "/v1/models")
    except (httpx.HTTPError, OSError):
        return "its endpoint is unreachable"
    return None


async def _triton_ready(endpoint: str, served: str, version: str, timeout_s: float) -> str | None:
    from tritonclient.utils import InferenceServerException

    client: Any
    if endpoint.startswith(("http://", "https://")):
        import tritonclient.http.aio as triton_http

        scheme, _, url = endpoint.partition("://")
        client = triton_http.InferenceServerClient(url.rstrip("/"), ssl=scheme == "https", conn_timeout=timeout_s)
        kwargs: dict[str, Any] = {}
    else:
        import tritonclient.grpc.aio as triton_grpc

        client = triton_grpc.InferenceServerClient(endpoint.split("://", 1)[-1])
        kwargs = {"client_timeout": timeout_s}
    try:
        ready = await client.is_model_ready(served, model_version=version, **kwargs)
    except (InferenceServerException, OSError, TimeoutError):
        return "its endpoint is unreachable"
    finally:
        await client.close()
    return None if ready else f"its endpoint does not serve {served!r}" + (f" version {version}" if version else "")
