"""The tensor contract shared by every model this server exposes, and the glue that binds a model to it.

Every model has the same inputs and outputs, so the inference service can call any of them the same way.
All tensors are per-request shape ``(1,)`` (Triton adds the batch dimension; ``max_batch_size`` 8):

=====================  =======  ========  ==============================================================
tensor                 dtype    required  meaning
=====================  =======  ========  ==============================================================
``text_input``         BYTES    yes       the fully rendered prompt, UTF-8
``max_tokens``         INT32    no        generation budget in model tokens; absent or <= 0: model default
``temperature``        FP32     no        sampling temperature; absent or < 0: model default (0 = greedy)
``stop``               BYTES    no        UTF-8 JSON list of stop strings, e.g. ``["\\n\\n", "Question:"]``;
                                          absent or empty: no stop strings
``chat``               INT32    no        1: apply the model's chat template (prompt = one user message);
                                          0: raw text completion; absent or < 0: model default (chat)
``text_output``        BYTES    (out)     the generated text, UTF-8 (without the prompt)
``prompt_tokens``      INT32    (out)     size of the prompt (unit depends on the model, see its docs)
``completion_tokens``  INT32    (out)     size of the output (same unit)
=====================  =======  ========  ==============================================================

A model that answers log-likelihood requests (it has a ``loglikelihood`` method, :data:`LoglikModel`) takes
one more optional input and gives two more outputs. A row whose ``continuation`` is not empty is such a
request: ``text_input`` is the context, and the row's result is the log-likelihood of the continuation after
it (``text_output`` empty, ``prompt_tokens`` / ``completion_tokens`` the context's / continuation's tokens).
Rows of both kinds may share a batch.

=====================  =======  ========  ==============================================================
``continuation``       BYTES    no        UTF-8 text scored after the context; absent or empty: generate
``logprob``            FP32     (out)     sum of ln P(token | preceding) over the continuation; 0 otherwise
``is_greedy``          INT32    (out)     1 when every continuation token is the most probable one
=====================  =======  ========  ==============================================================

A model that decodes under a JSON schema (its ``structured_output`` attribute is true: the LLM, through
llama.cpp's grammar-constrained sampling) takes one more optional input. A row whose ``json_schema`` is not
empty must answer with JSON valid under that schema; rows with and without one may share a batch.

=====================  =======  ========  ==============================================================
``json_schema``        BYTES    no        UTF-8 JSON Schema the answer must match; absent or empty: free
=====================  =======  ========  ==============================================================

A model is a plain Python callable ``list[GenerationRequest] -> list[GenerationResult]`` (one result per
request, same order); :func:`bind_text_model` wraps it with PyTriton's ``@batch`` and binds it with a
:class:`~pytriton.model_config.DynamicBatcher`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor

LOGGER = logging.getLogger(__name__)

MAX_BATCH_SIZE = 8
"""Largest batch Triton's dynamic batcher hands to a model."""

DEFAULT_QUEUE_DELAY_US = 2000
"""How long (microseconds) the dynamic batcher may hold a request to form a bigger batch."""

INPUTS: tuple[Tensor, ...] = (
    Tensor(name="text_input", dtype=np.bytes_, shape=(1,)),
    Tensor(name="max_tokens", dtype=np.int32, shape=(1,), optional=True),
    Tensor(name="temperature", dtype=np.float32, shape=(1,), optional=True),
    Tensor(name="stop", dtype=np.bytes_, shape=(1,), optional=True),
    Tensor(name="chat", dtype=np.int32, shape=(1,), optional=True),
)
OUTPUTS: tuple[Tensor, ...] = (
    Tensor(name="text_output", dtype=np.bytes_, shape=(1,)),
    Tensor(name="prompt_tokens", dtype=np.int32, shape=(1,)),
    Tensor(name="completion_tokens", dtype=np.int32, shape=(1,)),
)

LOGLIK_INPUTS: tuple[Tensor, ...] = (Tensor(name="continuation", dtype=np.bytes_, shape=(1,), optional=True),)
STRUCTURED_INPUTS: tuple[Tensor, ...] = (Tensor(name="json_schema", dtype=np.bytes_, shape=(1,), optional=True),)

LOGLIK_OUTPUTS: tuple[Tensor, ...] = (
    Tensor(name="logprob", dtype=np.float32, shape=(1,)),
    Tensor(name="is_greedy", dtype=np.int32, shape=(1,)),
)

# Values filled in for absent optional inputs (so @batch sees one consistent set of keys); they decode to
# "use the model default".
_OPTIONAL_DEFAULTS: dict[str, tuple[Any, Any]] = {
    "max_tokens": (-1, np.int32),
    "temperature": (-1.0, np.float32),
    "stop": (b"", object),
    "chat": (-1, np.int32),
    "continuation": (b"", object),
    "json_schema": (b"", object),
}


@dataclass(frozen=True)
class GenerationRequest:
    """One decoded request.

    Attributes:
        prompt: the rendered prompt (decoded from ``text_input``).
        max_tokens: generation budget, or None for the model default.
        temperature: sampling temperature, or None for the model default.
        stop: stop strings (possibly empty).
        chat: True/False to apply the chat template or not; None for the model default.
        json_schema: the JSON Schema (a parsed object) the answer must match, or None (free text).
    """

    prompt: str
    max_tokens: int | None = None
    temperature: float | None = None
    stop: tuple[str, ...] = ()
    chat: bool | None = None
    json_schema: dict[str, Any] | None = None


@dataclass(frozen=True)
class GenerationResult:
    """One model answer.

    Attributes:
        text: generated text (without the prompt).
        prompt_tokens: prompt size, in the model's unit (tokens for an LLM, words for the test models).
        completion_tokens: output size, same unit.
    """

    text: str
    prompt_tokens: int
    completion_tokens: int


TextModel = Callable[[list[GenerationRequest]], list[GenerationResult]]
"""A model: requests in, one result per request out (same order)."""


@dataclass(frozen=True)
class LoglikRequest:
    """One log-likelihood request: the ``continuation`` (its leading delimiter included) after ``context``."""

    context: str
    continuation: str


@dataclass(frozen=True)
class LoglikResult:
    """One log-likelihood: ``logprob`` (natural log, summed over the continuation's tokens), ``is_greedy``,
    and the token counts of the context and of the continuation."""

    logprob: float
    is_greedy: bool
    context_tokens: int
    continuation_tokens: int


LoglikModel = Callable[[list[LoglikRequest]], list[LoglikResult]]
"""A model's ``loglikelihood`` method: requests in, one result per request out (same order)."""


def _scalar(column: NDArray[Any] | None, row: int) -> Any:
    if column is None:
        return None
    value = column[row]
    return value.reshape(-1)[0] if isinstance(value, np.ndarray) else value


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (bytes, np.bytes_)):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def parse_stop(raw: Any) -> tuple[str, ...]:
    """Decode the ``stop`` input: UTF-8 JSON list of strings (or a single JSON string).

    Empty input means no stop strings.

    Raises:
        ValueError: the value is not JSON, or not a string / list of strings.
    """
    text = _text(raw).strip()
    if not text:
        return ()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"'stop' must be a JSON list of strings, got {text[:80]!r}") from exc
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise ValueError(f"'stop' must be a JSON list of strings, got {text[:80]!r}")
    return tuple(s for s in value if s)


MAX_SCHEMA_BYTES = 64 * 1024
"""Largest ``json_schema`` value a request may carry."""


def parse_json_schema(raw: Any) -> dict[str, Any] | None:
    """Decode the ``json_schema`` input: a UTF-8 JSON object of at most :data:`MAX_SCHEMA_BYTES` bytes;
    empty input means no schema (None).

    Raises:
        ValueError: the value is too long, not JSON, or not a JSON object.
    """
    text = _text(raw).strip()
    if not text:
        return None
    if len(text.encode()) > MAX_SCHEMA_BYTES:
        raise ValueError(f"'json_schema' is longer than {MAX_SCHEMA_BYTES} bytes")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"'json_schema' must be a JSON object, got {text[:80]!r}") from exc
    if not isinstance(value, dict):
        raise ValueError(f"'json_schema' must be a JSON object, got {text[:80]!r}")
    return value


def decode_requests(
    text_input: NDArray[Any],
    max_tokens: NDArray[Any] | None = None,
    temperature: NDArray[Any] | None = None,
    stop: NDArray[Any] | None = None,
    chat: NDArray[Any] | None = None,
    json_schema: NDArray[Any] | None = None,
) -> list[GenerationRequest]:
    """Turn batched input tensors (each of shape ``(B, 1)``) into B :class:`GenerationRequest` objects.

    Raises:
        ValueError: a ``stop`` or ``json_schema`` value is malformed (see :func:`parse_stop`,
            :func:`parse_json_schema`).
    """
    requests = []
    for row in range(text_input.shape[0]):
        m = _scalar(max_tokens, row)
        t = _scalar(temperature, row)
        c = _scalar(chat, row)
        requests.append(
            GenerationRequest(
                prompt=_text(_scalar(text_input, row)),
                max_tokens=int(m) if m is not None and int(m) > 0 else None,
                temperature=float(t) if t is not None and float(t) >= 0.0 else None,
                stop=parse_stop(_scalar(stop, row)),
                chat=None if c is None or int(c) < 0 else bool(int(c)),
                json_schema=parse_json_schema(_scalar(json_schema, row)),
            )
        )
    return requests


def encode_results(results: Sequence[GenerationResult]) -> dict[str, NDArray[Any]]:
    """Turn B results into the output tensors (each of shape ``(B, 1)``)."""
    return {
        "text_output": np.array([[r.text.encode("utf-8")] for r in results], dtype=object).reshape(-1, 1),
        "prompt_tokens": np.array([[r.prompt_tokens] for r in results], dtype=np.int32).reshape(-1, 1),
        "completion_tokens": np.array([[r.completion_tokens] for r in results], dtype=np.int32).reshape(-1, 1),
    }


def _mixed_batch(
    model: TextModel,
    loglik: LoglikModel,
    requests: list[GenerationRequest],
    continuations: list[str],
) -> dict[str, NDArray[Any]]:
    """Answer a batch whose rows with a non-empty continuation are log-likelihood requests (``loglik``) and
    the others generations (``model``); the outputs of both kinds, in row order."""
    scored = [i for i, c in enumerate(continuations) if c]
    generated = [i for i, c in enumerate(continuations) if not c]
    gen_results = model([requests[i] for i in generated]) if generated else []
    ll_results = loglik([LoglikRequest(requests[i].prompt, continuations[i]) for i in scored]) if scored else []
    if len(gen_results) != len(generated) or len(ll_results) != len(scored):
        raise RuntimeError(f"{len(requests)} requests but {len(gen_results) + len(ll_results)} results")
    results: list[GenerationResult] = [GenerationResult("", 0, 0)] * len(requests)
    logprob = np.zeros((len(requests), 1), dtype=np.float32)
    greedy = np.zeros((len(requests), 1), dtype=np.int32)
    for i, g in zip(generated, gen_results, strict=True):
        results[i] = g
    for i, r in zip(scored, ll_results, strict=True):
        results[i] = GenerationResult("", r.context_tokens, r.continuation_tokens)
        logprob[i, 0], greedy[i, 0] = r.logprob, int(r.is_greedy)
    return {**encode_results(results), "logprob": logprob, "is_greedy": greedy}


def make_infer_func(
    model: TextModel, model_name: str, loglik: LoglikModel | None = None, structured: bool = False
) -> Callable[[list[dict[str, Any]]], list[dict[str, Any]]]:
    """Wrap ``model`` as a PyTriton inference callable (a list of Triton requests in, a list of outputs out);
    with ``loglik``, rows with a ``continuation`` are log-likelihood requests answered by it; with
    ``structured``, the model takes the ``json_schema`` input.

    Absent optional inputs are filled with "model default" sentinels first, so requests with and without
    them still form one batch; then PyTriton's ``@batch`` concatenates the batch.

    Raises (to Triton, which reports it to every request of that batch):
        ValueError: malformed ``stop`` or ``json_schema``; RuntimeError: the model failed or returned the wrong number of results.
    """

    @batch
    def _batched(
        text_input: NDArray[Any],
        max_tokens: NDArray[Any] | None = None,
        temperature: NDArray[Any] | None = None,
        stop: NDArray[Any] | None = None,
        chat: NDArray[Any] | None = None,
        continuation: NDArray[Any] | None = None,
        json_schema: NDArray[Any] | None = None,
    ) -> dict[str, NDArray[Any]]:
        started = time.perf_counter()
        requests = decode_requests(text_input, max_tokens, temperature, stop, chat, json_schema)
        if loglik is not None:
            continuations = [_text(_scalar(continuation, row)) for row in range(len(requests))]
            out = _mixed_batch(model, loglik, requests, continuations)
        else:
            results = model(requests)
            if len(results) != len(requests):
                raise RuntimeError(f"{model_name}: {len(requests)} requests but {len(results)} results")
            out = encode_results(results)
        LOGGER.debug("%s: batch of %d in %.1f ms", model_name, len(requests), (time.perf_counter() - started) * 1e3)
        return out

    defaults = {
        k: v
        for k, v in _OPTIONAL_DEFAULTS.items()
        if (loglik is not None or k != "continuation") and (structured or k != "json_schema")
    }

    def infer_func(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for request in requests:
            rows = np.asarray(request["text_input"]).shape[0]
            for name, (value, dtype) in defaults.items():
                if name not in request:
                    request[name] = np.full((rows, 1), value, dtype=dtype)
        outputs: list[dict[str, Any]] = _batched(requests)  # @batch turns the batch's one dict back into one per request
        return outputs

    infer_func.__name__ = f"infer_{model_name}"
    return infer_func


def model_config(max_batch_size: int = MAX_BATCH_SIZE, queue_delay_us: int = DEFAULT_QUEUE_DELAY_US) -> ModelConfig:
    """The Triton model configuration shared by all models: batching with a dynamic batcher."""
    return ModelConfig(
        batching=True,
        max_batch_size=max_batch_size,
        batcher=DynamicBatcher(max_queue_delay_microseconds=queue_delay_us),
    )


def bind_text_model(
    triton: Any,
    model_name: str,
    model: TextModel,
    *,
    max_batch_size: int = MAX_BATCH_SIZE,
    queue_delay_us: int = DEFAULT_QUEUE_DELAY_US,
) -> None:
    """Bind ``model`` into ``triton`` (a :class:`pytriton.triton.Triton`) under ``model_name`` with the shared
    contract, the log-likelihood tensors when the model has a ``loglikelihood`` method, and the ``json_schema``
    input when its ``structured_output`` attribute is true."""
    loglik: LoglikModel | None = getattr(model, "loglikelihood", None)
    structured = bool(getattr(model, "structured_output", False))
    triton.bind(
        model_name=model_name,
        infer_func=make_infer_func(model, model_name, loglik, structured),
        inputs=list(INPUTS) + (list(LOGLIK_INPUTS) if loglik else []) + (list(STRUCTURED_INPUTS) if structured else []),
        outputs=list(OUTPUTS) + (list(LOGLIK_OUTPUTS) if loglik else []),
        config=model_config(max_batch_size, queue_delay_us),
        strict=True,
    )
