"""The ``triton`` backend: NVIDIA Triton through tritonclient's asyncio gRPC or HTTP client.

Triton tensor contract (deploy/model-server/README.md): inputs ``text_input`` BYTES[1], optional
``max_tokens`` INT32[1], ``temperature`` FP32[1], ``stop`` BYTES[1] (JSON list), ``chat`` INT32[1] (-1 = the
model's default, 0, 1); outputs ``text_output`` BYTES[1], ``prompt_tokens`` INT32[1], ``completion_tokens``
INT32[1]; models batch, so every request tensor has a leading batch dimension of 1.

Log-likelihood requests (models that declare them take the optional input ``continuation`` BYTES[1] and
have the outputs ``logprob`` FP32[1] and ``is_greedy`` INT32[1]): ``text_input`` is the context, one row per
continuation (a batch of at most :data:`LOGLIK_BATCH` rows per call); ``completion_tokens`` is then the
continuation's token count and ``prompt_tokens`` the context's. A model without the ``continuation`` input
answers with an error, reported as ``loglik_unsupported``.

Error kinds: ``triton_unavailable`` (nothing listens, or the server is restarting; transient),
``timeout`` (the deadline passed), ``triton_error`` (any other Triton error, e.g. an unknown model),
``loglik_unsupported`` (a log-likelihood request to a model without the ``continuation`` input).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from uep_common.events import ModelTarget
from uep_inference.backends.base import BackendError, Generation, GenerationRequest, Loglik, Probe, registry_capacity
from uep_inference.backends.registry import register_backend

if TYPE_CHECKING:
    from uep_inference.settings import InferenceSettings

LOGLIK_BATCH = 8
"""Continuations sent in one Triton call (the model server's ``max_batch_size``)."""


@register_backend("triton")
class TritonBackend:
    """Calls Triton with one cached asyncio client per endpoint (``grpc://host:port``, ``host:port`` for gRPC,
    or ``http://host:port``)."""

    transient_errors: ClassVar[frozenset[str]] = frozenset({"triton_unavailable"})

    def __init__(self, settings: InferenceSettings | None = None) -> None:
        self._clients: dict[str, tuple[str, Any, Any]] = {}

    def _client(self, endpoint: str) -> tuple[str, Any, Any]:
        if endpoint not in self._clients:
            if endpoint.startswith("http://") or endpoint.startswith("https://"):
                import tritonclient.http.aio as triton_http

                self._clients[endpoint] = ("http", triton_http, triton_http.InferenceServerClient(endpoint.split("://", 1)[1]))
            else:
                import tritonclient.grpc.aio as triton_grpc

                url = endpoint.split("://", 1)[1] if "://" in endpoint else endpoint
                self._clients[endpoint] = ("grpc", triton_grpc, triton_grpc.InferenceServerClient(url))
        return self._clients[endpoint]

    @staticmethod
    def _error(exc: Exception) -> BackendError:
        from tritonclient.utils import InferenceServerException

        if isinstance(exc, InferenceServerException):
            status = str(exc.status() or "")
            if "UNAVAILABLE" in status:  # nothing listens, or the server is restarting: worth a retry
                return BackendError("triton_unavailable", str(exc))
            if "DEADLINE_EXCEEDED" in status:
                return BackendError("timeout", str(exc))
            return BackendError("triton_error", str(exc))
        return BackendError("triton_unavailable", repr(exc))

    async def _infer(self, request: GenerationRequest, inputs: list[Any], outputs: list[str]) -> Any:
        """One ``infer`` call on the request's model (name, version, timeout); the tritonclient result.
        Raises what tritonclient raises (the callers map it with :meth:`_error`)."""
        target = request.target
        protocol, mod, client = self._client(target.endpoint)
        kwargs = {"client_timeout": request.timeout_s} if protocol == "grpc" else {"timeout": int(request.timeout_s * 1_000_000)}
        return await client.infer(
            target.triton_model_name or target.name,
            inputs,
            model_version=target.triton_model_version or "",
            outputs=[mod.InferRequestedOutput(n) for n in outputs],
            **kwargs,
        )

    async def generate(self, request: GenerationRequest) -> Generation:
        """One inference call with the tensor contract above. Raises :class:`BackendError`."""
        from tritonclient.utils import InferenceServerException

        target, chat = request.target, request.chat
        mod = self._client(target.endpoint)[1]

        def tensor(name: str, value: np.ndarray[Any, Any], dtype: str) -> Any:  # an InferInput of the untyped tritonclient
            t = mod.InferInput(name, list(value.shape), dtype)
            t.set_data_from_numpy(value)
            return t

        inputs = [
            tensor("text_input", np.array([[request.prompt.encode()]], dtype=np.object_), "BYTES"),
            tensor("max_tokens", np.array([[request.max_tokens]], dtype=np.int32), "INT32"),
            tensor("temperature", np.array([[request.temperature]], dtype=np.float32), "FP32"),
            tensor("stop", np.array([[json.dumps(list(request.stop)).encode()]], dtype=np.object_), "BYTES"),
            tensor("chat", np.array([[-1 if chat is None else int(chat)]], dtype=np.int32), "INT32"),
        ]
        try:
            result = await self._infer(request, inputs, ["text_output", "prompt_tokens", "completion_tokens"])
        except (InferenceServerException, OSError, TimeoutError) as exc:
            raise self._error(exc) from exc
        text = result.as_numpy("text_output").reshape(-1)[0]
        return Generation(
            text=text.decode("utf-8", errors="replace") if isinstance(text, bytes) else str(text),
            prompt_tokens=int(result.as_numpy("prompt_tokens").reshape(-1)[0]),
            completion_tokens=int(result.as_numpy("completion_tokens").reshape(-1)[0]),
        )

    async def loglikelihood(self, request: GenerationRequest) -> Generation:
        """The log-likelihood of each of ``request.continuations`` after the context ``request.prompt``: one
        call per :data:`LOGLIK_BATCH` continuations, each row ``text_input`` = the context and
        ``continuation``. Raises :class:`BackendError` (``loglik_unsupported`` for a model without the
        ``continuation`` input)."""
        from tritonclient.utils import InferenceServerException

        target = request.target
        mod = self._client(target.endpoint)[1]
        outputs = ["logprob", "is_greedy", "prompt_tokens", "completion_tokens"]
        logliks: list[Loglik] = []
        context_tokens = 0
        conts = request.continuations
        for start in range(0, len(conts), LOGLIK_BATCH):
            chunk = conts[start : start + LOGLIK_BATCH]
            inputs = []
            for name, rows in (("text_input", [request.prompt] * len(chunk)), ("continuation", list(chunk))):
                t = mod.InferInput(name, [len(rows), 1], "BYTES")
                t.set_data_from_numpy(np.array([[r.encode()] for r in rows], dtype=np.object_))
                inputs.append(t)
            try:
                result = await self._infer(request, inputs, outputs)
            except (InferenceServerException, OSError, TimeoutError) as exc:
                err = self._error(exc)
                # a model without the tensors: Triton names the unknown input or one of the requested outputs
                if err.kind == "triton_error" and any(n in str(err) for n in ("continuation", "logprob", "is_greedy")):
                    raise BackendError(
                        "loglik_unsupported", f"model {target.name!r} takes no log-likelihood requests: {err}"
                    ) from exc
                raise err from exc
            values = [result.as_numpy(n).reshape(-1) for n in outputs]
            for lp, greedy, _ctx, n in zip(*values, strict=True):
                logliks.append(Loglik(float(lp), int(n), bool(greedy)))
            context_tokens = int(values[2][0])
        return Generation("", context_tokens, sum(x.n_tokens for x in logliks), tuple(logliks))

    async def probe(self, target: ModelTarget, timeout_s: float) -> Probe:
        """Triton's model-ready check (``is_model_ready``) for the target's model and version."""
        from tritonclient.utils import InferenceServerException

        protocol, _, client = self._client(target.endpoint)
        kwargs = {"client_timeout": timeout_s} if protocol == "grpc" else {}
        start = time.perf_counter()
        try:
            ready = await client.is_model_ready(
                target.triton_model_name or target.name, model_version=target.triton_model_version or "", **kwargs
            )
        except (InferenceServerException, OSError, TimeoutError) as exc:
            err = self._error(exc)
            return Probe(False, (time.perf_counter() - start) * 1000, err.kind, str(err)[:500])
        latency_ms = (time.perf_counter() - start) * 1000
        return Probe(True, latency_ms) if ready else Probe(False, latency_ms, "triton_error", "model not ready")

    def capacity(self, target: ModelTarget) -> int | None:
        """The registry's serving capacity (``max_in_flight``)."""
        return registry_capacity(target)

    async def close(self) -> None:
        """Close every client."""
        for _, _, client in self._clients.values():
            await client.close()
        self._clients.clear()
