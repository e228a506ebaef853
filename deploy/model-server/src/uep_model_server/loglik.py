"""Exact log-likelihoods of continuations with llama.cpp (llama-cpp-python), the way lm-evaluation-harness
computes ``loglikelihood`` requests for a local model.

Tokens (lm-eval ``TemplateLM._encode_pair``): trailing whitespace of the context is moved to the front of the
continuation; ``whole = tokenize(context + continuation)``, ``ctx = tokenize(context)``, and the
continuation's tokens are ``whole[len(ctx):]``. Tokenization adds BOS when the model's vocabulary asks for it
(``add_bos_token`` in the GGUF). An empty context is the BOS token alone.

Scores: ``logprob`` = Σ ln softmax(logits at the position before each continuation token)[token], in float64
from llama.cpp's float32 logits over the whole vocabulary (exact: no top-N shortcut); ``is_greedy`` = every
continuation token is the argmax of its logits.

How: llama.cpp's low-level batch API, with output logits requested only at the positions that predict a
continuation token (``llama_batch.logits``), not at every prompt position (``Llama(logits_all=True)`` would
keep an n_ctx × n_vocab array and compute the output layer for every token). The KV cache of sequence 0 keeps
the last prompt: the next request reuses its longest common prefix (``llama_memory_seq_rm`` drops the rest),
so the choices of one question share one evaluation of the context. One request at a time (a lock).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from .io import LoglikRequest, LoglikResult

LOGGER = logging.getLogger(__name__)


def encode_pair(tokenize: Any, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """The context's and the continuation's tokens, as lm-eval's ``_encode_pair`` splits them (module
    docstring). ``tokenize``: ``str -> list[int]``."""
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole = tokenize(context + continuation)
    ctx = tokenize(context)
    return ctx, whole[len(ctx) :]


class LlamaLoglik:
    """One llama.cpp context scoring continuations: ``LlamaLoglik(path)(requests) -> results``.

    Args:
        path: the GGUF file. ``n_ctx``: context size in tokens (context + continuation must fit);
        ``n_threads``: CPU threads; ``n_batch``: tokens per ``llama_decode`` call.

    Raises:
        RuntimeError: (per request) the request does not fit ``n_ctx``, or llama.cpp failed to decode.
    """

    def __init__(self, path: Path, n_ctx: int = 4096, n_threads: int = 2, n_batch: int = 512) -> None:
        import llama_cpp  # heavy native import, only when the model is served

        started = time.perf_counter()
        self._lib = llama_cpp
        self._llm = llama_cpp.Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_batch=n_batch,
            n_ubatch=n_batch,
            n_threads=n_threads,
            n_threads_batch=n_threads,
            logits_all=False,
            verbose=False,
        )
        self._ctx = self._llm._ctx.ctx  # the llama_context of the high-level object (its public low-level handle)
        self._mem = llama_cpp.llama_get_memory(self._ctx)
        self._n_vocab = self._llm.n_vocab()
        self._n_ctx = n_ctx
        self._n_batch = n_batch
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self._bos = self._llm.token_bos()
        self._cached: list[int] = []  # the tokens whose keys and values sequence 0 holds, positions 0..
        self._lock = threading.Lock()
        LOGGER.info("llama.cpp log-likelihood context for %s ready in %.2f s", path.name, time.perf_counter() - started)

    def tokenize(self, text: str) -> list[int]:
        """Tokens of ``text`` (BOS added when the model's vocabulary asks for it; special tokens as text)."""
        return self._llm.tokenize(text.encode("utf-8"), add_bos=True, special=False) if text else []

    def score(self, context: str, continuation: str) -> LoglikResult:
        """The log-likelihood of ``continuation`` after ``context`` (blocking; see the module docstring).

        Raises:
            ValueError: the continuation has no tokens. RuntimeError: the tokens exceed ``n_ctx`` or decoding failed.
        """
        ctx, cont = encode_pair(self.tokenize, context, continuation)
        if not ctx:
            ctx = [self._bos]
        if not cont:
            raise ValueError("the continuation has no tokens")
        tokens = ctx + cont
        if len(tokens) > self._n_ctx:
            raise RuntimeError(f"context + continuation are {len(tokens)} tokens, more than n_ctx {self._n_ctx}")
        with self._lock:
            logits = self._logits(tokens, first=len(ctx) - 1)
        logprob, greedy = 0.0, True
        for row, token in zip(logits, cont, strict=True):
            x = row.astype(np.float64)
            top = float(x.max())
            logprob += float(x[token] - top - np.log(np.exp(x - top).sum()))
            greedy = greedy and int(np.argmax(x)) == token
        return LoglikResult(logprob, greedy, len(ctx), len(cont))

    def _logits(self, tokens: list[int], first: int) -> list[np.ndarray]:
        """Decode ``tokens[:-1]`` after the cached prefix and return the logits at positions ``first`` ..
        ``len(tokens) - 2`` (each predicts the next token), copied out of llama.cpp."""
        lib, batch = self._lib, self._batch
        last = len(tokens) - 1  # the final token is only predicted, never fed
        common = 0
        for a, b in zip(self._cached, tokens[:last], strict=False):  # the shorter one bounds the prefix
            if a != b:
                break
            common += 1
        keep = min(common, first)  # position ``first`` is recomputed: its logits are needed
        if not lib.llama_memory_seq_rm(self._mem, 0, keep, -1):
            lib.llama_memory_clear(self._mem, True)
            keep = 0
        self._cached = tokens[:keep]
        rows: list[np.ndarray] = []
        pos = keep
        while pos < last:
            n = min(self._n_batch, last - pos)
            for i in range(n):
                batch.token[i] = tokens[pos + i]
                batch.pos[i] = pos + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = 1 if pos + i >= first else 0
            batch.n_tokens = n
            status = lib.llama_decode(self._ctx, batch)
            if status != 0:
                self._cached = []
                lib.llama_memory_clear(self._mem, True)
                raise RuntimeError(f"llama_decode failed with status {status}")
            for i in range(n):
                if pos + i >= first:
                    ptr = lib.llama_get_logits_ith(self._ctx, i)
                    rows.append(np.ctypeslib.as_array(ptr, shape=(self._n_vocab,)).copy())
            self._cached.extend(tokens[pos : pos + n])
            pos += n
        return rows

    def __call__(self, requests: list[LoglikRequest]) -> list[LoglikResult]:
        """Score a batch in order (requests of one context reuse its cached evaluation)."""
        return [self.score(r.context, r.continuation) for r in requests]

    def close(self) -> None:
        """Free the batch (the model and context are freed with the object)."""
        if self._batch is not None:
            self._lib.llama_batch_free(self._batch)
            self._batch = None
