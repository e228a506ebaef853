"""Model backends: NVIDIA Triton (tritonclient asyncio gRPC or HTTP) and OpenAI-compatible endpoints.

Triton tensor contract (deploy/model-server/README.md): inputs ``text_input`` BYTES[1], optional
``max_tokens`` INT32[1], ``temperature`` FP32[1], ``stop`` BYTES[1] (JSON list); outputs ``text_output``
BYTES[1], ``prompt_tokens`` INT32[1], ``completion_tokens`` INT32[1]; models batch, so every request
tensor has a leading batch dimension of 1.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx
import numpy as np

from uep_common.events import Backend, ModelTarget


@dataclass(frozen=True)
class Generation:
    """A model's answer: ``text`` and token counts (None when the backend does not report them)."""

    text: str
    prompt_tokens: int | None
    completion_tokens: int | None


class BackendError(RuntimeError):
    """A model call failed; ``kind`` is a short machine-readable reason (e.g. 'triton_error')."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class TritonBackend:
    """Calls Triton with one cached asyncio client per endpoint (``grpc://host:port`` or ``http://host:port``)."""

    def __init__(self) -> None:
        self._clients: dict[str, object] = {}

    def _client(self, endpoint: str):
        if endpoint not in self._clients:
            if endpoint.startswith("http://") or endpoint.startswith("https://"):
                import tritonclient.http.aio as triton_http

                self._clients[endpoint] = ("http", triton_http, triton_http.InferenceServerClient(endpoint.split("://", 1)[1]))
            else:
                import tritonclient.grpc.aio as triton_grpc

                url = endpoint.split("://", 1)[1] if "://" in endpoint else endpoint
                self._clients[endpoint] = ("grpc", triton_grpc, triton_grpc.InferenceServerClient(url))
        return self._clients[endpoint]

    async def generate(
        self, target: ModelTarget, prompt: str, max_tokens: int, stop: list[str], timeout_s: float, chat: bool | None = None
    ) -> Generation:
        """One generation (``chat``: apply the model's chat template; None = model default).

        Raises :class:`BackendError` on any Triton failure."""
        from tritonclient.utils import InferenceServerException

        _, mod, client = self._client(target.endpoint)

        def tensor(name: str, value: np.ndarray, dtype: str):
            t = mod.InferInput(name, list(value.shape), dtype)
            t.set_data_from_numpy(value)
            return t

        inputs = [
            tensor("text_input", np.array([[prompt.encode()]], dtype=np.object_), "BYTES"),
            tensor("max_tokens", np.array([[max_tokens]], dtype=np.int32), "INT32"),
            tensor("temperature", np.array([[target.temperature]], dtype=np.float32), "FP32"),
            tensor("stop", np.array([[json.dumps(stop).encode()]], dtype=np.object_), "BYTES"),
            tensor("chat", np.array([[-1 if chat is None else int(chat)]], dtype=np.int32), "INT32"),
        ]
        outputs = [mod.InferRequestedOutput(n) for n in ("text_output", "prompt_tokens", "completion_tokens")]
        try:
            kwargs = (
                {"client_timeout": timeout_s}
                if mod.__name__.startswith("tritonclient.grpc")
                else {"timeout": int(timeout_s * 1_000_000)}
            )
            result = await client.infer(
                target.triton_model_name or target.name,
                inputs,
                model_version=target.triton_model_version or "",
                outputs=outputs,
                **kwargs,
            )
        except InferenceServerException as exc:
            status = str(exc.status() or "")
            if "UNAVAILABLE" in status:  # nothing listens, or the server is restarting: worth a retry
                raise BackendError("triton_unavailable", str(exc)) from exc
            if "DEADLINE_EXCEEDED" in status:
                raise BackendError("timeout", str(exc)) from exc
            raise BackendError("triton_error", str(exc)) from exc
        except (OSError, TimeoutError) as exc:
            raise BackendError("triton_unavailable", repr(exc)) from exc
        text = result.as_numpy("text_output").reshape(-1)[0]
        return Generation(
            text=text.decode("utf-8", errors="replace") if isinstance(text, bytes) else str(text),
            prompt_tokens=int(result.as_numpy("prompt_tokens").reshape(-1)[0]),
            completion_tokens=int(result.as_numpy("completion_tokens").reshape(-1)[0]),
        )

    async def close(self) -> None:
        """Close every client."""
        for _, _, client in self._clients.values():
            await client.close()
        self._clients.clear()


class OpenAIBackend:
    """OpenAI-compatible ``/v1/chat/completions`` (vLLM, TGI, llama.cpp server, Triton's OpenAI frontend)."""

    def __init__(self, api_key: str | None = None) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(headers=headers)

    async def generate(
        self, target: ModelTarget, prompt: str, max_tokens: int, stop: list[str], timeout_s: float, chat: bool | None = None
    ) -> Generation:
        """A chat completion with the prompt as the user message, or with ``chat=False`` a raw text
        completion (``/v1/completions``). Raises :class:`BackendError`."""
        body: dict = {
            "model": target.triton_model_name or target.name,
            "max_tokens": max_tokens,
            "temperature": target.temperature,
        }
        if chat is False:
            body["prompt"], path = prompt, "/v1/completions"
        else:
            body["messages"], path = [{"role": "user", "content": prompt}], "/v1/chat/completions"
        if stop:
            body["stop"] = stop[:4]
        try:
            r = await self._http.post(target.endpoint.rstrip("/") + path, json=body, timeout=timeout_s)
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

    async def close(self) -> None:
        """Close the HTTP client."""
        await self._http.aclose()


class Backends:
    """Dispatches to the backend named by the model registry (``target.backend``)."""

    def __init__(self, openai_api_key: str | None = None) -> None:
        self.triton = TritonBackend()
        self.openai = OpenAIBackend(openai_api_key)

    def for_target(self, target: ModelTarget) -> TritonBackend | OpenAIBackend:
        """The backend client of ``target``."""
        return self.triton if target.backend == Backend.triton else self.openai

    async def close(self) -> None:
        """Close every client."""
        await self.triton.close()
        await self.openai.close()
