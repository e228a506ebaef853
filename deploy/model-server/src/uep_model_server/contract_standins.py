"""Contract stand-ins: two tiny models that speak the tensor contracts of Triton's stock LLM back ends, so
the inference service's ``vllm`` and ``trtllm`` request builders are tested against a real Triton. They
are NOT vLLM or TensorRT-LLM (neither runs on this CPU machine): they answer deterministic text.

``uep_vllm_echo``: the Triton vLLM back end's contract (triton-inference-server/vllm_backend, model.py):
no batch dimension (``max_batch_size`` 0); inputs ``text_input`` BYTES[1], optional ``stream`` BOOL[1]
(must be false: this stand-in is not decoupled), ``sampling_parameters`` BYTES[1] (JSON; ``max_tokens``,
``temperature``, ``stop`` read), ``exclude_input_in_output`` BOOL[1] (false or absent: the prompt is put
before the text, as vLLM does); output ``text_output`` BYTES[-1] (one element).

``uep_trtllm_echo``: the TensorRT-LLM ``ensemble`` model's contract (triton-inference-server/
tensorrtllm_backend, all_models/inflight_batcher_llm/ensemble): batching, inputs ``text_input`` BYTES[1],
``max_tokens`` INT32[1], optional ``stop_words`` BYTES[-1], ``bad_words`` BYTES[-1], ``temperature``
FP32[1]; output ``text_output`` BYTES[-1] (one element, the generated text only).

The answer: the oracle's (:class:`uep_model_server.oracle.Oracle`: built-in items answered correctly iff
``ordinal % 3 != 2``; ``"I do not know."`` otherwise), cut before the first stop string, then to its first
``max_tokens`` whitespace-separated words. So a run of a built-in benchmark through either contract has the
oracle's known score, and the tests can see that ``max_tokens`` and the stop strings arrived.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor

from .oracle import Oracle


def _text(value: Any) -> str:
    return bytes(value).decode("utf-8", errors="replace") if isinstance(value, (bytes, np.bytes_)) else str(value)


def _first(request: Any, name: str) -> Any:
    return np.asarray(request[name]).reshape(-1)[0] if name in request else None


def shape_answer(text: str, max_tokens: int | None, stop: Sequence[str]) -> str:
    """``text`` cut before the earliest stop string, then to its first ``max_tokens`` words (None or
    ≤ 0: no limit); words are whitespace-separated and re-joined by one space when cut."""
    cut = min((i for s in stop if s and (i := text.find(s)) >= 0), default=len(text))
    text = text[:cut]
    words = text.split()
    if max_tokens is not None and 0 < max_tokens < len(words):
        return " ".join(words[:max_tokens])
    return text


class VllmEcho:
    """The vLLM-contract stand-in (module docstring)."""

    def __init__(self, oracle: Oracle | None = None) -> None:
        self._oracle = oracle or Oracle()

    def answer(self, prompt: str, sampling_parameters: str, exclude_input: bool) -> str:
        """The ``text_output`` for one request.

        Raises:
            ValueError: ``sampling_parameters`` is not a JSON object.
        """
        params = json.loads(sampling_parameters) if sampling_parameters.strip() else {}
        if not isinstance(params, dict):
            raise ValueError("sampling_parameters must be a JSON object")
        stop = params.get("stop") or []
        stop = [stop] if isinstance(stop, str) else list(stop)
        max_tokens = params.get("max_tokens")
        text = shape_answer(self._oracle.answer(prompt), int(max_tokens) if max_tokens is not None else None, stop)
        return text if exclude_input else prompt + text

    def bind(self, triton: Any, model_name: str) -> None:
        """Bind under ``model_name`` without a batch dimension."""

        def infer(requests: list[Any]) -> list[dict[str, NDArray[Any]]]:
            out = []
            for request in requests:
                stream = _first(request, "stream")
                if stream is not None and bool(stream):
                    raise ValueError(f"{model_name} is not decoupled: send stream=false")
                exclude = _first(request, "exclude_input_in_output")
                params = _first(request, "sampling_parameters")
                text = self.answer(
                    _text(_first(request, "text_input")), _text(params) if params is not None else "", bool(exclude)
                )
                out.append({"text_output": np.array([text.encode("utf-8")], dtype=object)})
            return out

        triton.bind(
            model_name=model_name,
            infer_func=infer,
            inputs=[
                Tensor(name="text_input", dtype=np.bytes_, shape=(1,)),
                Tensor(name="stream", dtype=np.bool_, shape=(1,), optional=True),
                Tensor(name="sampling_parameters", dtype=np.bytes_, shape=(1,), optional=True),
                Tensor(name="exclude_input_in_output", dtype=np.bool_, shape=(1,), optional=True),
            ],
            outputs=[Tensor(name="text_output", dtype=np.bytes_, shape=(-1,))],
            config=ModelConfig(batching=False),
            strict=True,
        )


class TrtllmEcho:
    """The TensorRT-LLM-ensemble-contract stand-in (module docstring)."""

    def __init__(self, oracle: Oracle | None = None) -> None:
        self._oracle = oracle or Oracle()

    def answer(self, prompt: str, max_tokens: int | None, stop_words: Sequence[str]) -> str:
        """The ``text_output`` for one request row."""
        return shape_answer(self._oracle.answer(prompt), max_tokens, stop_words)

    def bind(self, triton: Any, model_name: str) -> None:
        """Bind under ``model_name`` with batching (requests answered one by one: their ``stop_words``
        lengths differ)."""

        def infer(requests: list[Any]) -> list[dict[str, NDArray[Any]]]:
            out = []
            for request in requests:
                prompts = np.asarray(request["text_input"]).reshape(-1)
                maxes = np.asarray(request["max_tokens"]).reshape(-1)
                stops = np.asarray(request["stop_words"]).reshape(len(prompts), -1) if "stop_words" in request else None
                rows = []
                for i, prompt in enumerate(prompts):
                    stop = [_text(s) for s in stops[i]] if stops is not None else []
                    rows.append([self.answer(_text(prompt), int(maxes[i]), stop).encode("utf-8")])
                out.append({"text_output": np.array(rows, dtype=object)})
            return out

        triton.bind(
            model_name=model_name,
            infer_func=infer,
            inputs=[
                Tensor(name="text_input", dtype=np.bytes_, shape=(1,)),
                Tensor(name="max_tokens", dtype=np.int32, shape=(1,)),
                Tensor(name="stop_words", dtype=np.bytes_, shape=(-1,), optional=True),
                Tensor(name="bad_words", dtype=np.bytes_, shape=(-1,), optional=True),
                Tensor(name="temperature", dtype=np.float32, shape=(1,), optional=True),
            ],
            outputs=[Tensor(name="text_output", dtype=np.bytes_, shape=(-1,))],
            config=ModelConfig(batching=True, max_batch_size=8, batcher=DynamicBatcher(max_queue_delay_microseconds=500)),
            strict=True,
        )
