"""The judge's model client: ``POST /internal/generate`` on the inference service (see
``uep_inference.http_api`` for why judge calls go through the inference service over HTTP)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from uep_common.contract.events import ModelTarget


@dataclass(frozen=True)
class JudgeGeneration:
    """A judge model's reply: ``text``, token counts (None if unknown), the call's wall time in ms, and
    ``constrained``: the model decoded under the answer's JSON schema (grammar / guided decoding)."""

    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_ms: float | None
    constrained: bool = False


class JudgeCallError(RuntimeError):
    """The judge model could not be called (``kind``: e.g. 'inference_unavailable', 'triton_error')."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Generate(Protocol):
    """``await generate(target, prompt, max_tokens, json_schema) -> JudgeGeneration``: ``json_schema`` (or
    None) is the JSON Schema the answer must match, for backends that can constrain their decoding to it;
    raises :class:`JudgeCallError`."""

    async def __call__(
        self, target: ModelTarget, prompt: str, max_tokens: int, json_schema: dict[str, Any] | None = None
    ) -> JudgeGeneration:
        """The judge model's answer to ``prompt`` (at most ``max_tokens`` tokens); see the class docstring."""


class InferenceClient:
    """HTTP client of the inference service's generate endpoint.

    Args:
        base_url: e.g. ``http://127.0.0.1:8092`` (``UEP_INFERENCE_URL``).
        timeout_s: per-request timeout (the inference service has its own per-call timeout and retries).
        token: the service credential (``UEP_INTERNAL_TOKEN``) sent as ``Authorization: Bearer``.
        attempts: tries when the inference service itself cannot be reached (connection refused, timeout),
            with exponential backoff and full jitter; a model error reported by the service is not retried
            here (the service already retried what was transient).
    """

    def __init__(
        self, base_url: str, timeout_s: float = 180.0, attempts: int = 3, backoff_s: float = 0.5, token: str = ""
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.AsyncClient(base_url=base_url.rstrip("/"), timeout=timeout_s, headers=headers)
        self._attempts, self._backoff = attempts, backoff_s

    async def __call__(
        self, target: ModelTarget, prompt: str, max_tokens: int, json_schema: dict[str, Any] | None = None
    ) -> JudgeGeneration:
        """One judge call (with ``json_schema``, the answer's schema for constrained decoding). Raises
        :class:`JudgeCallError`."""
        body: dict[str, Any] = {"target": target.model_dump(mode="json"), "prompt": prompt, "max_tokens": max_tokens}
        if json_schema is not None:
            body["json_schema"] = json_schema
        for attempt in range(1, self._attempts + 1):
            try:
                r = await self._http.post("/internal/generate", json=body)
            except httpx.HTTPError as exc:
                if attempt == self._attempts:
                    raise JudgeCallError("inference_unavailable", f"{exc!r} (after {attempt} attempts)") from exc
                await asyncio.sleep(random.uniform(0, self._backoff * 2 ** (attempt - 1)))
                continue
            data = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
            if r.status_code == 200:
                return JudgeGeneration(
                    data["text"],
                    data.get("prompt_tokens"),
                    data.get("completion_tokens"),
                    data.get("latency_ms"),
                    bool(data.get("constrained")),
                )
            err = data.get("error") or {}
            raise JudgeCallError(err.get("type", f"http_{r.status_code}"), err.get("message") or r.text[:500])
        raise AssertionError("unreachable")

    async def close(self) -> None:
        """Close the HTTP client."""
        await self._http.aclose()
