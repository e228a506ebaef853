"""The Triton requests of each model contract: which tensors a call sends and how its answer is read.

One entry per ``(kind, contract)`` of :data:`uep_common.contract.model_contracts.CONTRACTS` that the ``triton``
backend calls; the tensor names are the contract table's (:func:`check_against_contracts` fails the import
when they differ). A builder returns :class:`Tensor` values (name, Triton datatype, numpy array); the
backend (:mod:`uep_inference.backends.triton`) wraps them in ``InferInput`` s and makes the one shared
``infer`` call. A reader takes ``as_numpy`` (``InferResult.as_numpy``: output name -> array).

Generation:

- ``uep``: the platform's contract (module docstring of :mod:`uep_inference.backends.triton`).
- ``vllm``: Triton's vLLM back end. No batch dimension: ``text_input`` [1], ``stream`` [1] = false,
  ``sampling_parameters`` [1] = JSON ``{"max_tokens", "temperature"[, "stop"]}`` (vLLM ``SamplingParams``
  fields), ``exclude_input_in_output`` [1] = true; ``text_output`` [-1], its first element the text. The
  back end applies no chat template (``chat`` is not sent) and reports no token counts (None).
- ``trtllm``: TensorRT-LLM's ``ensemble`` model. Batch dimension 1: ``text_input`` [1, 1], ``max_tokens``
  [1, 1], ``temperature`` [1, 1], ``stop_words`` [1, n] only when there are stop strings; ``text_output``
  [1, -1], its first element the text. An ensemble configured to return the prompt too
  (``exclude_input_in_output`` false in its ``tensorrt_llm`` model) answers prompt + text: a text that starts
  with the prompt has it removed. No token counts.

Prediction (every tensor with a batch dimension of 1):

- ``classification/text``: ``text`` [1, 1] -> ``probabilities`` [1, n_classes], ``label`` [1, 1].
- ``classification/features``: ``features`` [1, n] FP32 -> the same outputs.
- ``ranking/uep``: ``query`` [1, 1], ``candidates`` [1, n] -> ``scores`` [1, n].
- ``embedding/uep``: ``text`` [rows, 1] -> ``embedding`` [rows, d]; the backend embeds the query and the
  candidates (:data:`EMBED_BATCH` rows a call) and scores each candidate by cosine similarity
  (:func:`cosine_scores`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from uep_common.contract.events import ModelKind
from uep_common.contract.model_contracts import CONTRACTS
from uep_inference.backends.base import BackendError, Generation, GenerationRequest, PredictionOutput, PredictionRequest

AsNumpy = Callable[[str], Any]
"""``InferResult.as_numpy``: an output's name -> its numpy array (None when absent)."""

EMBED_BATCH = 8
"""Texts sent in one call to an embedding model (the model server's ``max_batch_size``)."""


@dataclass(frozen=True)
class Tensor:
    """One input of a Triton call: ``name``, Triton ``datatype`` (``BYTES``, ``FP32``…) and ``value``."""

    name: str
    datatype: str
    value: np.ndarray[Any, Any]


def _bytes(rows: Sequence[Sequence[str]]) -> np.ndarray[Any, Any]:
    return np.array([[s.encode("utf-8") for s in row] for row in rows], dtype=np.object_)


def _text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _first_text(as_numpy: AsNumpy, name: str) -> str:
    values = as_numpy(name)
    if values is None or np.asarray(values).size == 0:
        raise BackendError("triton_bad_response", f"the model's answer has no {name!r} value")
    return _text(np.asarray(values).reshape(-1)[0])


@dataclass(frozen=True)
class GenerationContract:
    """How one generation contract is called: ``build`` the inputs (``build(request, constrain)``: with
    ``constrain``, the request's ``json_schema`` goes to the model), the ``outputs`` to ask for, ``read`` the
    answer (``read(request, as_numpy)``)."""

    build: Callable[[GenerationRequest, bool], list[Tensor]]
    outputs: tuple[str, ...]
    read: Callable[[GenerationRequest, AsNumpy], Generation]


SCHEMA_INPUTS: dict[str, tuple[str, ...]] = {
    "uep": ("json_schema",),
    "trtllm": ("guided_decoding_guide_type", "guided_decoding_guide"),
}
"""The optional inputs through which a contract's model takes a JSON schema; it must declare all of them."""


def can_constrain(contract: str, declared: frozenset[str]) -> bool:
    """Whether a model of generation ``contract`` that declares the inputs ``declared`` can decode under a
    JSON schema: always for ``vllm`` (``guided_decoding`` in ``sampling_parameters``), for ``uep`` and
    ``trtllm`` when it declares every input of :data:`SCHEMA_INPUTS`."""
    if contract == "vllm":
        return True
    needed = SCHEMA_INPUTS.get(contract, ())
    return bool(needed) and all(n in declared for n in needed)


def _schema_text(request: GenerationRequest) -> str:
    return json.dumps(request.json_schema, separators=(",", ":"))


def _uep_build(request: GenerationRequest, constrain: bool = False) -> list[Tensor]:
    chat = request.chat
    inputs = [
        Tensor("text_input", "BYTES", _bytes([[request.prompt]])),
        Tensor("max_tokens", "INT32", np.array([[request.max_tokens]], dtype=np.int32)),
        Tensor("temperature", "FP32", np.array([[request.temperature]], dtype=np.float32)),
        Tensor("stop", "BYTES", _bytes([[json.dumps(list(request.stop))]])),
        Tensor("chat", "INT32", np.array([[-1 if chat is None else int(chat)]], dtype=np.int32)),
    ]
    if constrain and request.json_schema is not None:
        inputs.append(Tensor("json_schema", "BYTES", _bytes([[_schema_text(request)]])))
    return inputs


def _uep_read(request: GenerationRequest, as_numpy: AsNumpy) -> Generation:
    return Generation(
        text=_first_text(as_numpy, "text_output"),
        prompt_tokens=int(np.asarray(as_numpy("prompt_tokens")).reshape(-1)[0]),
        completion_tokens=int(np.asarray(as_numpy("completion_tokens")).reshape(-1)[0]),
    )


def vllm_sampling_parameters(request: GenerationRequest, constrain: bool = False) -> dict[str, Any]:
    """The ``sampling_parameters`` JSON object of a vLLM call (``max_tokens``, ``temperature``, ``stop``
    when there are stop strings, and with ``constrain`` ``guided_decoding`` ``{"json": schema}``, which the
    Triton vLLM back end turns into vLLM's ``GuidedDecodingParams`` / ``StructuredOutputsParams``)."""
    params: dict[str, Any] = {"max_tokens": request.max_tokens, "temperature": request.temperature}
    if request.stop:
        params["stop"] = list(request.stop)
    if constrain and request.json_schema is not None:
        params["guided_decoding"] = {"json": request.json_schema}
    return params


def _vllm_build(request: GenerationRequest, constrain: bool = False) -> list[Tensor]:
    return [
        Tensor("text_input", "BYTES", np.array([request.prompt.encode("utf-8")], dtype=np.object_)),
        Tensor("stream", "BOOL", np.array([False], dtype=np.bool_)),
        Tensor(
            "sampling_parameters",
            "BYTES",
            np.array([json.dumps(vllm_sampling_parameters(request, constrain)).encode()], dtype=np.object_),
        ),
        Tensor("exclude_input_in_output", "BOOL", np.array([True], dtype=np.bool_)),
    ]


def _text_only(request: GenerationRequest, as_numpy: AsNumpy) -> Generation:
    return Generation(text=_first_text(as_numpy, "text_output"), prompt_tokens=None, completion_tokens=None)


def _trtllm_build(request: GenerationRequest, constrain: bool = False) -> list[Tensor]:
    inputs = [
        Tensor("text_input", "BYTES", _bytes([[request.prompt]])),
        Tensor("max_tokens", "INT32", np.array([[request.max_tokens]], dtype=np.int32)),
        Tensor("temperature", "FP32", np.array([[request.temperature]], dtype=np.float32)),
    ]
    if request.stop:
        inputs.append(Tensor("stop_words", "BYTES", _bytes([list(request.stop)])))
    if constrain and request.json_schema is not None:
        inputs.append(Tensor("guided_decoding_guide_type", "BYTES", _bytes([["json_schema"]])))
        inputs.append(Tensor("guided_decoding_guide", "BYTES", _bytes([[_schema_text(request)]])))
    return inputs


def _trtllm_read(request: GenerationRequest, as_numpy: AsNumpy) -> Generation:
    text = _first_text(as_numpy, "text_output")
    if request.prompt and text.startswith(request.prompt):
        text = text[len(request.prompt) :]
    return Generation(text=text, prompt_tokens=None, completion_tokens=None)


GENERATION: dict[str, GenerationContract] = {
    "uep": GenerationContract(_uep_build, ("text_output", "prompt_tokens", "completion_tokens"), _uep_read),
    "vllm": GenerationContract(_vllm_build, ("text_output",), _text_only),
    "trtllm": GenerationContract(_trtllm_build, ("text_output",), _trtllm_read),
}
"""Generation contracts by name."""


def generation_contract(contract: str) -> GenerationContract:
    """The generation contract ``contract``. Raises :class:`BackendError` ``contract_unsupported``."""
    found = GENERATION.get(contract)
    if found is None:
        raise BackendError("contract_unsupported", f"the triton backend has no generation contract {contract!r}")
    return found


# ------------------------------------------------------------------------------------------------ prediction


def classification_inputs(request: PredictionRequest) -> list[Tensor]:
    """``text`` [1, 1] when the request has a text (contract ``text``), else ``features`` [1, n] FP32
    (contract ``features``); the service sets the one the model's contract takes
    (:func:`uep_inference.predictions.classification_input`).

    Raises:
        BackendError: ``bad_input`` when the request has neither.
    """
    if request.text is not None:
        return [Tensor("text", "BYTES", _bytes([[request.text]]))]
    if request.features is not None:
        return [Tensor("features", "FP32", np.array([request.features], dtype=np.float32))]
    raise BackendError("bad_input", "a classification call needs a text or features")


def read_classification(as_numpy: AsNumpy) -> PredictionOutput:
    """``probabilities`` (all of the row) and ``label`` (its first value) of a classifier's answer.

    Raises:
        BackendError: ``triton_bad_response`` when either is missing or not finite.
    """
    proba, label = as_numpy("probabilities"), as_numpy("label")
    if proba is None or label is None or np.asarray(label).size == 0:
        raise BackendError("triton_bad_response", "a classifier's answer needs 'probabilities' and 'label'")
    values = np.asarray(proba, dtype=np.float64).reshape(-1)
    if not np.isfinite(values).all():
        raise BackendError("triton_bad_response", "the classifier's probabilities are not all finite")
    return PredictionOutput(probabilities=tuple(float(v) for v in values), label_index=int(np.asarray(label).reshape(-1)[0]))


def ranking_inputs(request: PredictionRequest) -> list[Tensor]:
    """``query`` [1, 1] and ``candidates`` [1, n]."""
    return [
        Tensor("query", "BYTES", _bytes([[request.query or ""]])),
        Tensor("candidates", "BYTES", _bytes([list(request.candidates)])),
    ]


def read_scores(as_numpy: AsNumpy, n: int) -> PredictionOutput:
    """The ``n`` ``scores`` of a ranker's answer.

    Raises:
        BackendError: ``triton_bad_response`` when there are not ``n`` finite scores.
    """
    scores = as_numpy("scores")
    values = np.asarray(scores if scores is not None else [], dtype=np.float64).reshape(-1)
    if values.size != n or not np.isfinite(values).all():
        raise BackendError("triton_bad_response", f"the ranker gave {values.size} scores for {n} candidates, or a non-finite one")
    return PredictionOutput(scores=tuple(float(v) for v in values))


def embedding_inputs(texts: Sequence[str]) -> list[Tensor]:
    """``text`` [rows, 1], one row per text."""
    return [Tensor("text", "BYTES", _bytes([[t] for t in texts]))]


def cosine_scores(query: np.ndarray[Any, Any], candidates: np.ndarray[Any, Any]) -> tuple[float, ...]:
    """Cosine similarity of the vector ``query`` (d,) with each row of ``candidates`` (n, d); a zero vector
    scores 0.

    Raises:
        BackendError: ``triton_bad_response`` for mismatched dimensions or a non-finite value.
    """
    q = np.asarray(query, dtype=np.float64).reshape(-1)
    c = np.asarray(candidates, dtype=np.float64).reshape(len(candidates), -1) if len(candidates) else np.zeros((0, q.size))
    if c.shape[1] != q.size or not (np.isfinite(q).all() and np.isfinite(c).all()):
        raise BackendError("triton_bad_response", f"embeddings of {q.size} and {c.shape[1]} dimensions, or a non-finite value")
    norms = np.linalg.norm(c, axis=1) * np.linalg.norm(q)
    sims = np.divide(c @ q, norms, out=np.zeros(len(c)), where=norms > 0)
    return tuple(float(v) for v in sims)


PREDICTION_OUTPUTS: dict[tuple[ModelKind, str], tuple[str, ...]] = {
    (ModelKind.classification, "text"): ("probabilities", "label"),
    (ModelKind.classification, "features"): ("probabilities", "label"),
    (ModelKind.ranking, "uep"): ("scores",),
    (ModelKind.embedding, "uep"): ("embedding",),
}
"""The outputs each prediction contract's reader asks for."""


def _sent_by_builders() -> dict[tuple[ModelKind, str], set[str]]:
    """The input names each builder sends, found by building one request of every contract."""
    import uuid

    from uep_common.contract.events import ModelTarget

    def target(kind: ModelKind, contract: str) -> ModelTarget:
        return ModelTarget(model_id=uuid.UUID(int=0), name="m", backend="triton", endpoint="x:1", kind=kind, contract=contract)

    sent = {
        (ModelKind.generation, name): {
            t.name
            for t in c.build(
                GenerationRequest(target(ModelKind.generation, name), "p", 1, 1.0, stop=("s",), json_schema={"type": "object"}),
                True,
            )
        }
        for name, c in GENERATION.items()
    }
    for contract in ("text", "features"):
        one = {"text": "t"} if contract == "text" else {"features": (0.0,)}
        request = PredictionRequest(target(ModelKind.classification, contract), 1.0, **one)
        sent[(ModelKind.classification, contract)] = {t.name for t in classification_inputs(request)}
    sent[(ModelKind.ranking, "uep")] = {
        t.name for t in ranking_inputs(PredictionRequest(target(ModelKind.ranking, "uep"), 1.0, query="q", candidates=("c",)))
    }
    sent[(ModelKind.embedding, "uep")] = {t.name for t in embedding_inputs(["t"])}
    return sent


def check_against_contracts() -> None:
    """Raise ``RuntimeError`` when the tensors of a builder or reader differ from the contract table's
    (:data:`uep_common.contract.model_contracts.CONTRACTS`): every name sent is one of the contract's inputs, every
    required contract input is sent, every output read is one of its outputs."""
    outputs = {(ModelKind.generation, name): c.outputs for name, c in GENERATION.items()} | PREDICTION_OUTPUTS
    for key, sent in _sent_by_builders().items():
        contract = CONTRACTS.get(key)
        if contract is None:
            raise RuntimeError(f"no contract {key[1]!r} of kind {key[0].value!r} in uep_common.contract.model_contracts")
        names_in = {t.name for t in contract.inputs}
        required = {t.name for t in contract.inputs if not t.optional}
        read = set(outputs[key])
        if not sent <= names_in or not required <= sent or not read <= {t.name for t in contract.outputs}:
            raise RuntimeError(
                f"triton requests of {key[0].value}/{key[1]} differ from uep_common.contract.model_contracts: send {sorted(sent)}, "
                f"read {sorted(read)}; the contract has inputs {sorted(names_in)} (required {sorted(required)}), "
                f"outputs {sorted(t.name for t in contract.outputs)}"
            )


check_against_contracts()
