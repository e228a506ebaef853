"""The ``triton`` backend: NVIDIA Triton through tritonclient's asyncio gRPC or HTTP client.

A model's ``kind`` and ``contract`` (``ModelTarget``; the contracts: :mod:`uep_common.contract.model_contracts`) choose
the tensors: generation ``uep`` (below), ``vllm`` and ``trtllm``, classification ``text`` and ``features``,
ranking ``uep`` and embedding ``uep``, each built and read by :mod:`uep_inference.backends.triton_contracts`;
every call goes through one ``infer`` (:meth:`TritonBackend._infer`).

Generation contract ``uep`` (deploy/model-server/README.md): inputs ``text_input`` BYTES[1], optional
``max_tokens`` INT32[1], ``temperature`` FP32[1], ``stop`` BYTES[1] (JSON list), ``chat`` INT32[1] (-1 = the
model's default, 0, 1); outputs ``text_output`` BYTES[1], ``prompt_tokens`` INT32[1], ``completion_tokens``
INT32[1]; models batch, so every request tensor has a leading batch dimension of 1.

Log-likelihood requests (models that declare them take the optional input ``continuation`` BYTES[1] and
have the outputs ``logprob`` FP32[1] and ``is_greedy`` INT32[1]): ``text_input`` is the context, one row per
continuation (a batch of at most :data:`LOGLIK_BATCH` rows per call); ``completion_tokens`` is then the
continuation's token count and ``prompt_tokens`` the context's. A model without the ``continuation`` input
answers with an error, reported as ``loglik_unsupported``.

Row batching (:mod:`uep_inference.backends.row_batching`, ``UEP_TRITON_ROW_BATCHING``): the one-row requests of
the ``uep`` and ``trtllm`` generation contracts, of classifiers and of the ``uep`` ranker that several items of one
model make at once go out as one call of up to the model's ``max_batch_size`` rows (its Triton configuration,
read once per model, :meth:`TritonBackend.max_rows`), and each item reads its own row of the answer.

Structured output (``GenerationRequest.json_schema``): ``uep`` models whose configuration declares the
optional input ``json_schema`` (the embedded LLM: llama.cpp grammars) get the schema there; ``trtllm`` ensembles
that declare ``guided_decoding_guide_type`` and ``guided_decoding_guide`` get ``json_schema`` and the schema
(TensorRT-LLM guided decoding, XGrammar); ``vllm`` models get ``guided_decoding`` ``{"json": schema}`` in
``sampling_parameters`` (the Triton vLLM back end turns it into vLLM's guided-decoding parameters). Other
models are called without it (``Generation.constrained`` False), and the caller parses strictly.

Error kinds: ``triton_unavailable`` (nothing listens, or the server is restarting; transient),
``timeout`` (the deadline passed), ``triton_error`` (any other Triton error, e.g. an unknown model),
``loglik_unsupported`` (a log-likelihood request to a model without the ``continuation`` input, or of another
contract than ``uep``), ``contract_unsupported`` (a kind and contract this backend has no requests for),
``triton_bad_response`` (an answer without the contract's outputs).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from uep_common.contract.events import ModelKind, ModelTarget
from uep_inference import instruments
from uep_inference.backends import triton_contracts as contracts
from uep_inference.backends.base import (
    BackendError,
    Generation,
    GenerationRequest,
    Loglik,
    PredictionOutput,
    PredictionRequest,
    Probe,
    registry_capacity,
)
from uep_inference.backends.registry import register_backend
from uep_inference.backends.row_batching import RowBatcher

if TYPE_CHECKING:
    from uep_inference.settings import InferenceSettings

log = logging.getLogger(__name__)

CONFIG_TIMEOUT_S = 10.0
"""How long reading a model's Triton configuration may take."""

CONFIG_RETRY_S = 60.0
"""After a model's configuration could not be read, how long its calls go one row each before it is asked again."""

LOGLIK_BATCH = 8
"""Continuations sent in one Triton call (the model server's ``max_batch_size``)."""

_LOGLIK_TENSORS = (("input", "continuation"), ("output", "logprob"), ("output", "is_greedy"))


@register_backend("triton")
class TritonBackend:
    """Calls Triton with one cached asyncio client per endpoint (``grpc://host:port``, ``host:port`` for gRPC,
    or ``http://host:port``)."""

    transient_errors: ClassVar[frozenset[str]] = frozenset({"triton_unavailable"})

    def __init__(self, settings: InferenceSettings | None = None) -> None:
        self._clients: dict[str, tuple[str, Any, Any]] = {}
        self.batcher: RowBatcher | None = (
            RowBatcher(instruments.observe_triton_call) if settings is None or settings.triton_row_batching else None
        )
        """Stacks concurrent one-row calls of a model (:mod:`uep_inference.backends.row_batching`); None when
        ``UEP_TRITON_ROW_BATCHING`` is off."""
        self._max_rows: dict[tuple[str, str, str], tuple[int, float]] = {}
        self._inputs: dict[tuple[str, str, str], frozenset[str]] = {}
        self._config_reads: dict[tuple[str, str, str], asyncio.Future[int]] = {}

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

    async def max_rows(self, target: ModelTarget) -> int:
        """Rows one call to ``target``'s model may carry: its Triton configuration's ``max_batch_size`` (0, no
        batch dimension, counts as 1), read once per model; 1 while the configuration cannot be read (asked
        again after :data:`CONFIG_RETRY_S`)."""
        return (await self.model_info(target))[0]

    async def declared_inputs(self, target: ModelTarget) -> frozenset[str]:
        """The input names ``target``'s model declares in its Triton configuration (read once per model with
        :meth:`max_rows`); empty while the configuration cannot be read."""
        return (await self.model_info(target))[1]

    async def model_info(self, target: ModelTarget) -> tuple[int, frozenset[str]]:
        """``(max rows a call, declared input names)`` of ``target``'s model, from its configuration."""
        name, version = target.triton_model_name or target.name, target.triton_model_version or ""
        key = (target.endpoint, name, version)
        known = self._max_rows.get(key)
        if known is not None and (known[1] == 0.0 or time.monotonic() < known[1]):
            return known[0], self._inputs.get(key, frozenset())
        reading = self._config_reads.get(key)
        if reading is None:  # one read, which every item arriving meanwhile awaits (they then go out together)
            reading = self._config_reads[key] = asyncio.ensure_future(self._read_max_rows(target, key))
            reading.add_done_callback(lambda _: self._config_reads.pop(key, None))
        rows = await asyncio.shield(reading)
        return rows, self._inputs.get(key, frozenset())

    async def _read_max_rows(self, target: ModelTarget, key: tuple[str, str, str]) -> int:
        from tritonclient.utils import InferenceServerException

        _, name, version = key
        protocol, _, client = self._client(target.endpoint)
        try:
            async with asyncio.timeout(CONFIG_TIMEOUT_S):
                if protocol == "grpc":
                    config = (await client.get_model_config(name, model_version=version, as_json=True)).get("config", {})
                else:
                    config = await client.get_model_config(name, model_version=version)
            rows = max(1, int(config.get("max_batch_size", 0) or 0))
            inputs = frozenset(str(t.get("name")) for t in config.get("input") or [] if isinstance(t, dict))
        except (InferenceServerException, OSError, TimeoutError, ValueError, TypeError, AttributeError) as exc:
            log.info("model %s: configuration not read (%s); its calls go one row each", name, exc)
            self._max_rows[key] = (1, time.monotonic() + CONFIG_RETRY_S)
            self._inputs.pop(key, None)
            return 1
        self._max_rows[key] = (rows, 0.0)
        self._inputs[key] = inputs
        return rows

    async def _infer(
        self,
        target: ModelTarget,
        timeout_s: float,
        inputs: Sequence[contracts.Tensor],
        outputs: Sequence[str],
        stackable: bool = False,
    ) -> Any:
        """The answer of ``target``'s model (name, version) within ``timeout_s`` to ``inputs``, with the
        ``outputs`` asked for: the tritonclient result, or, for a ``stackable`` one-row request (every input's
        batch dimension is 1 and each row is answered on its own), that row of a call shared with other items
        of the model (:class:`~uep_inference.backends.row_batching.RowBatcher`). Raises :class:`BackendError`
        (:meth:`_error`). A model of capacity 1 never has two rows at the backend at once: its calls go out at
        once, without the batcher's turn of the event loop."""
        capacity = registry_capacity(target)
        if stackable and self.batcher is not None and (capacity is None or capacity > 1):
            rows = await self.max_rows(target)
            key = (target.endpoint, target.triton_model_name or target.name, target.triton_model_version or "")
            return await self.batcher.infer(
                key, rows, inputs, outputs, timeout_s, lambda i, o, t: self._infer_now(target, t, i, o)
            )
        return await self._infer_now(target, timeout_s, inputs, outputs)

    async def _infer_now(
        self, target: ModelTarget, timeout_s: float, inputs: Sequence[contracts.Tensor], outputs: Sequence[str]
    ) -> Any:
        """One ``infer`` call on ``target``'s model with ``inputs`` as they are (see :meth:`_infer`)."""
        from tritonclient.utils import InferenceServerException

        protocol, mod, client = self._client(target.endpoint)
        infer_inputs = []
        for tensor in inputs:
            t = mod.InferInput(tensor.name, list(tensor.value.shape), tensor.datatype)
            t.set_data_from_numpy(tensor.value)
            infer_inputs.append(t)
        kwargs = {"client_timeout": timeout_s} if protocol == "grpc" else {"timeout": int(timeout_s * 1_000_000)}
        try:
            return await client.infer(
                target.triton_model_name or target.name,
                infer_inputs,
                model_version=target.triton_model_version or "",
                outputs=[mod.InferRequestedOutput(n) for n in outputs],
                **kwargs,
            )
        except (InferenceServerException, OSError, TimeoutError) as exc:
            raise self._error(exc) from exc

    async def generate(self, request: GenerationRequest) -> Generation:
        """One inference call with the tensors of the target's generation contract (``uep``, ``vllm``,
        ``trtllm``). With a ``json_schema``, the decoding is constrained where the contract allows it
        (:func:`~uep_inference.backends.triton_contracts.can_constrain`: the model's configuration declares the
        contract's schema inputs, or the vLLM back end's ``guided_decoding``). Raises :class:`BackendError`."""
        target = request.target
        contract = contracts.generation_contract(target.contract)
        constrain = False
        if request.json_schema is not None:
            declared = frozenset() if target.contract == "vllm" else await self.declared_inputs(target)
            constrain = contracts.can_constrain(target.contract, declared)
        inputs = contract.build(request, constrain)
        result = await self._infer(target, request.timeout_s, inputs, contract.outputs, stackable=True)
        generation = contract.read(request, result.as_numpy)
        return dataclasses.replace(generation, constrained=constrain)

    async def loglikelihood(self, request: GenerationRequest) -> Generation:
        """The log-likelihood of each of ``request.continuations`` after the context ``request.prompt``: one
        call per :data:`LOGLIK_BATCH` continuations, each row ``text_input`` = the context and
        ``continuation``. Raises :class:`BackendError` (``loglik_unsupported`` for a model without the
        ``continuation`` input, or of another contract than ``uep``)."""
        target = request.target
        if target.contract != "uep":
            raise BackendError(
                "loglik_unsupported", f"model {target.name!r} speaks {target.contract!r}: no log-likelihood requests"
            )
        outputs = ["logprob", "is_greedy", "prompt_tokens", "completion_tokens"]
        logliks: list[Loglik] = []
        context_tokens = 0
        conts = request.continuations
        for start in range(0, len(conts), LOGLIK_BATCH):
            chunk = conts[start : start + LOGLIK_BATCH]
            inputs = [
                contracts.Tensor("text_input", "BYTES", np.array([[request.prompt.encode()]] * len(chunk), dtype=np.object_)),
                contracts.Tensor("continuation", "BYTES", np.array([[c.encode()] for c in chunk], dtype=np.object_)),
            ]
            try:
                result = await self._infer(target, request.timeout_s, inputs, outputs)
            except BackendError as err:
                # a model without the tensors: Triton names the unknown input or one of the requested outputs
                # ("unexpected inference output 'is_greedy' for model ..."); a model's own error that merely
                # mentions a continuation (one too long to score) stays a triton_error
                unknown = [f"unexpected inference {kind} '{n}'" for kind, n in _LOGLIK_TENSORS]
                if err.kind == "triton_error" and any(u in str(err) for u in unknown):
                    raise BackendError(
                        "loglik_unsupported", f"model {target.name!r} takes no log-likelihood requests: {err}"
                    ) from err
                raise
            values = [result.as_numpy(n).reshape(-1) for n in outputs]
            for lp, greedy, _ctx, n in zip(*values, strict=True):
                logliks.append(Loglik(float(lp), int(n), bool(greedy)))
            context_tokens = int(values[2][0])
        return Generation("", context_tokens, sum(x.n_tokens for x in logliks), tuple(logliks))

    async def predict(self, request: PredictionRequest) -> PredictionOutput:
        """One call of a classifier (``text``, ``features``) or ranker (``uep``); for an embedding model, the
        query's and the candidates' embeddings (:data:`~uep_inference.backends.triton_contracts.EMBED_BATCH`
        texts a call) scored by cosine similarity. Raises :class:`BackendError`."""
        target = request.target
        kind = ModelKind(target.kind)
        if kind is ModelKind.classification:
            inputs = contracts.classification_inputs(request)
            result = await self._infer(target, request.timeout_s, inputs, ["probabilities", "label"], stackable=True)
            return contracts.read_classification(result.as_numpy)
        if kind is ModelKind.ranking and target.contract == "uep":
            inputs = contracts.ranking_inputs(request)
            result = await self._infer(target, request.timeout_s, inputs, ["scores"], stackable=True)
            return contracts.read_scores(result.as_numpy, len(request.candidates))
        if kind is ModelKind.embedding and target.contract == "uep":
            prefixes = target.spec.get("query_prefix", ""), target.spec.get("passage_prefix", "")
            texts = [f"{prefixes[0]}{request.query or ''}", *(f"{prefixes[1]}{c}" for c in request.candidates)]
            rows: list[np.ndarray[Any, Any]] = []
            for start in range(0, len(texts), contracts.EMBED_BATCH):
                chunk = texts[start : start + contracts.EMBED_BATCH]
                result = await self._infer(target, request.timeout_s, contracts.embedding_inputs(chunk), ["embedding"])
                vectors = result.as_numpy("embedding")
                if vectors is None or len(vectors) != len(chunk):
                    raise BackendError(
                        "triton_bad_response", f"the embedding model gave no vector for each of {len(chunk)} texts"
                    )
                rows.extend(np.asarray(vectors).reshape(len(chunk), -1))
            return PredictionOutput(scores=contracts.cosine_scores(rows[0], np.array(rows[1:])))
        raise BackendError("contract_unsupported", f"the triton backend has no {kind.value}/{target.contract} requests")

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
