"""Exact log-likelihoods of continuations from the llama.cpp server that xllamacpp runs in-process.

llama.cpp's server returns no prompt log-probabilities, but for every token it *generates* it reports, with
``post_sampling_probs`` false, that token's probability from the softmax over the WHOLE vocabulary of the
raw logits (the server's ``populate_token_probs`` scans the full sorted distribution for the sampled token)
and the top ``n_probs`` tokens of that same raw distribution. Samplers act on a copy of the candidates, so
they change which token is sampled, never the reported probabilities. Hence, for a continuation of T tokens
``c_1..c_T`` after the context tokens ``x``, step ``i`` is ONE completion request:

* ``prompt`` = the token ids ``x + c_1..c_{i-1}`` (ids, so nothing is re-tokenised and no BOS is added),
* ``n_predict`` 1, ``n_probs`` 1, ``post_sampling_probs`` false,
* ``logit_bias`` ``{c_i: +10000}`` with greedy sampling (``temperature`` 0, ``top_k`` 1): the sampled
  token is forced to be ``c_i``; its reported ``logprob`` is ``ln P(c_i | x, c_<i)`` from the raw logits,
  and the reported top-1 is the model's own most probable token at that position.

``logprob`` = the sum of the T reported values; ``is_greedy`` = every ``c_i`` equals the reported top-1.
The result is the exact full-softmax value (what lm-evaluation-harness computes from the logits), not a
top-N approximation: the forced token is scored wherever it ranks.

Every step is evaluated from an empty KV cache (``cache_prompt`` false): the logits of ``c_i`` come from ONE
batch of the ``len(x) + i - 1`` tokens before it, whatever was evaluated before (the order of the requests,
the other continuations of the same context, the slot's cache). So a (context, continuation) pair's value is
a function of its tokens only, and it is the from-scratch evaluation of the engine.

Why not reuse the cache: on llama.cpp's CPU back end the logits of a position depend on how its prefix was
split into batches. Measured on this GGUF with flash attention on (llama.cpp's default): ln P(" B" | MMLU
item 2's zero-shot prompt) was -12.5117 from an empty cache and -12.0125 after the context's last token was
re-decoded alone (0.50 nats). Flash attention is therefore off (``llm.py``): the last logits of that
82-token context were then bit-identical for all 81 splits into a cached prefix and an evaluated batch. But
not everywhere: along a 15-token HellaSwag ending, a one-token step on a prefix evaluated in one batch
differed from evaluating the whole prefix in one batch at 6 of 14 positions, by 0.02-0.08 nats, and the
incremental method (the context once, then one token per step) by up to 0.21 nats a token, 0.37 nats a
continuation. The incremental method is kept as an option (``incremental``): it is path-independent too
(its first step from an empty cache, each later step appending one token), not equal to the from-scratch
values.

Shared prefixes (the default, :meth:`LlamaServerLoglik.score_shared`): where several continuations of one
call need the next token after the SAME prefix (the four letters of an MMLU item after its context; the first
tokens of an item's endings), that prefix is evaluated once, from an empty cache, unforced, with the raw
log-probabilities of its ``TOP_N`` most probable next tokens, and every needed token's value is read from it
(a token ranked lower gets its own forced step); a prefix one continuation needs is a forced step as above. It is the same evaluation of the same tokens,
so the values are those of the forced steps to the bit (measured: 0.0 difference on MMLU letters), and every
choice of an item goes through literally one evaluation.

Cost: one evaluation of ``len(x) + i - 1`` tokens (a batch) per distinct prefix; an MMLU item (four one-token
letters) costs one evaluation of its context instead of four; a continuation of T tokens still costs T
evaluations of growing prefixes.

Cheaper methods measured and not used (the 8 endings of 2 HellaSwag items, 101 tokens, flash attention off,
one 2-thread slot): one decode of context + continuation with the logits of every continuation position is what
lm-evaluation-harness does over Hugging Face models, but llama.cpp's server returns log-probabilities of
generated tokens only (no prompt log-probabilities; ``echo`` is refused), so no request reaches it. Its
nearest equivalent through the server, the whole pair evaluated in one batch from an empty cache and then
each position re-decoded alone from that cache (one batch + T one-token decodes, about 30 times cheaper), is
path-independent but differs from the from-scratch steps by up to 0.15 nats a token, 0.22 a continuation;
the incremental method by up to 0.22 and 0.28. Without llama.cpp's repacked CPU weights (``no_extra_bufts``)
the differences stay (0.11 / 0.22 nats on 4 of the endings) and every method was several times slower (from-scratch steps: 302 s
for 4 pairs, against 106 s for 8 pairs with them; separate runs on a shared machine).

Tokenisation follows lm-evaluation-harness's ``_encode_pair``: trailing whitespace of the context moves to
the front of the continuation; ``whole = tok(context + continuation)``, ``context_enc = tok(context)``,
``continuation_enc = whole[len(context_enc):]``; the model input is ``context_enc + continuation_enc``. The
tokenizer is llama.cpp's own with the GGUF's special-token rules (its ``add_bos_token``; SmolLM2's GGUF adds
no BOS). An empty context is scored after the model's BOS token (lm-evaluation-harness's
``prefix_token_id``). xllamacpp's Python API has no tokenize handler, so the tokenizer is reached through the
``/tokenize`` endpoint of the same in-process server on its loopback address (``Server.listening_address``).
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from .io import LoglikRequest, LoglikResult

MAX_CONTINUATION_TOKENS = 256
"""Longest continuation scored, in model tokens (each token costs one decode step)."""

FORCE_BIAS = 10_000.0
"""Logit bias that makes the continuation's token the sampled one (logits of this model are O(10))."""

TOP_N = 1024
"""Raw log-probabilities asked for when several next tokens of one prefix are scored; a token ranked lower
costs one more (forced) evaluation. Measured on 4 MMLU items (process CPU time, the shared machine): with
1024 every letter was among them and an item cost 4.4 times less than a forced step per letter; with 64 one
letter per item fell outside (2.8 times)."""

TOKENIZE_TIMEOUT_S = 30.0


class LoglikInputError(ValueError):
    """A log-likelihood request the model cannot score (too long, empty continuation); names the request."""


class LlamaServerLoglik:
    """Scores :class:`LoglikRequest` objects with a running ``xllamacpp.Server`` (see the module docstring).

    Args:
        server: the ``xllamacpp.Server`` (its ``handle_completions`` and ``listening_address`` are used).
        n_ctx: context size of one slot, in tokens; ``len(context) + len(continuation)`` must not exceed it.
        incremental: steps after a continuation's first append one token to the slot's KV cache (cheaper;
            path-independent, but not the from-scratch values: module docstring); by default every step
            evaluates its whole prefix from an empty cache.
        max_continuation_tokens: the continuation cap (tokens).
        model_name: named in error messages.
    """

    def __init__(
        self,
        server: Any,
        n_ctx: int,
        *,
        incremental: bool = False,
        max_continuation_tokens: int = MAX_CONTINUATION_TOKENS,
        model_name: str = "llm",
    ) -> None:
        self._complete: Callable[[dict[str, Any]], Any] = server.handle_completions
        self._address = str(server.listening_address).rstrip("/")
        self.n_ctx = n_ctx
        self.incremental = incremental
        self.max_continuation_tokens = max_continuation_tokens
        self.model_name = model_name
        self._prefix_token: int | None = None
        self._lock = threading.Lock()  # one continuation's steps are never interleaved with another's

    # ------------------------------------------------------------------------------------------ tokenizer

    def _http(self, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self._address + path, data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=TOKENIZE_TIMEOUT_S) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, OSError, json.JSONDecodeError) as exc:
            raise RuntimeError(f"{self.model_name}: llama.cpp {path} failed: {exc}") from exc

    def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text`` by llama.cpp's tokenizer, with the GGUF's special tokens (BOS only where
        the GGUF adds one; special-token text such as ``<|im_end|>`` is parsed as that token).

        Raises:
            RuntimeError: the tokenizer endpoint failed or answered something else than a list of ids.
        """
        answer = self._http("/tokenize", {"content": text, "add_special": True})
        tokens = answer.get("tokens") if isinstance(answer, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise RuntimeError(f"{self.model_name}: malformed llama.cpp /tokenize answer: {str(answer)[:200]}")
        return tokens

    def prefix_token(self) -> int:
        """The token an empty context stands for: the model's BOS token (else its EOS token), read from the
        server's ``/props``.

        Raises:
            RuntimeError: the model names neither, or they are not single tokens.
        """
        if self._prefix_token is None:
            props = self._http("/props")
            for key in ("bos_token", "eos_token"):
                text = props.get(key) if isinstance(props, dict) else None
                if text:
                    ids = self.tokenize(text)
                    if len(ids) == 1:
                        self._prefix_token = ids[0]
                        break
            else:
                raise RuntimeError(f"{self.model_name}: the model has no single-token BOS/EOS to stand for an empty context")
        return self._prefix_token

    def encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """``(context_enc, continuation_enc)`` as lm-evaluation-harness's ``_encode_pair`` makes them (module
        docstring); an empty context becomes ``[prefix_token()]`` and the continuation is tokenised alone."""
        n_spaces = len(context) - len(context.rstrip())
        if n_spaces:
            continuation = context[-n_spaces:] + continuation
            context = context[:-n_spaces]
        if not context:
            return [self.prefix_token()], self.tokenize(continuation)
        whole = self.tokenize(context + continuation)
        context_enc = self.tokenize(context)
        return context_enc, whole[len(context_enc) :]

    # ------------------------------------------------------------------------------------------ scoring

    def step(self, prefix: Sequence[int], token: int, *, fresh: bool = True) -> tuple[float, bool, int]:
        """``(ln P(token | prefix), token is the most probable next token, tokens llama.cpp evaluated)`` from
        one forced one-token completion (module docstring).

        Args:
            prefix: the token ids before ``token`` (not empty).
            token: the token scored.
            fresh: evaluate ``prefix`` from an empty KV cache (``cache_prompt`` false); else reuse what the
                slot holds (the third value then says how many tokens were evaluated on top of it).

        Raises:
            RuntimeError: llama.cpp rejected the request, did not sample the forced token, or answered
                without log-probabilities.
        """
        body = {
            "prompt": list(prefix),
            "n_predict": 1,
            "n_probs": 1,
            "post_sampling_probs": False,
            "temperature": 0.0,
            "top_k": 1,
            "logit_bias": [[token, FORCE_BIAS]],
            "cache_prompt": not fresh,
            "seed": 0,
        }
        response = self._complete(body)
        if not isinstance(response, dict) or "error" in response:
            error = response.get("error") if isinstance(response, dict) else response
            message = error.get("message") if isinstance(error, dict) else error
            raise RuntimeError(f"{self.model_name}: llama.cpp rejected the log-likelihood step: {message}")
        try:
            entry = response["choices"][0]["logprobs"]["content"][0]
            sampled, logprob = int(entry["id"]), float(entry["logprob"])
            top = int(entry["top_logprobs"][0]["id"])
            evaluated = int(response["timings"]["prompt_n"])
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise RuntimeError(f"{self.model_name}: llama.cpp answered without log-probabilities: {str(response)[:200]}") from exc
        if sampled != token:
            raise RuntimeError(f"{self.model_name}: llama.cpp sampled token {sampled}, not the forced token {token}")
        return logprob, top == token, evaluated

    def score(self, context_enc: Sequence[int], continuation_enc: Sequence[int]) -> tuple[float, bool]:
        """``(Σ ln P(c_i | context, c_<i), every c_i is the top-1)`` for one tokenised pair, evaluated by the
        protocol of the module docstring: every step from an empty cache (``incremental``: the context from an
        empty cache, then one appended token per step). The value depends on the tokens only.

        Raises:
            RuntimeError: llama.cpp failed (:meth:`step`).
        """
        total, greedy = 0.0, True
        prefix = list(context_enc)
        with self._lock:
            for i, token in enumerate(continuation_enc):
                fresh = i == 0 or not self.incremental
                logprob, top, evaluated = self.step(prefix, token, fresh=fresh)
                if not fresh and evaluated != 1:  # the slot held something else: another request used it
                    logprob, top, _ = self.step(prefix, token, fresh=True)
                total += logprob
                greedy = greedy and top
                prefix.append(token)
        return total, greedy

    def check(self, index: int, context_enc: Sequence[int], continuation_enc: Sequence[int]) -> None:
        """Refuse request ``index`` when its continuation is empty or longer than the cap, or the whole does
        not fit one slot's context.

        Raises:
            LoglikInputError: naming the request and the sizes.
        """
        if not continuation_enc:
            raise LoglikInputError(f"log-likelihood request {index}: the continuation has no tokens")
        if len(continuation_enc) > self.max_continuation_tokens:
            raise LoglikInputError(
                f"log-likelihood request {index}: the continuation has {len(continuation_enc)} tokens, "
                f"more than the {self.max_continuation_tokens} this model scores"
            )
        if len(context_enc) + len(continuation_enc) > self.n_ctx:
            raise LoglikInputError(
                f"log-likelihood request {index}: context and continuation are {len(context_enc)} + "
                f"{len(continuation_enc)} tokens, more than the context size ({self.n_ctx} tokens)"
            )

    def distribution_step(self, prefix: Sequence[int], tokens: Sequence[int]) -> tuple[dict[int, float], int]:
        """``({token: ln P(token | prefix)} for each of ``tokens``, the most probable next token)`` from ONE
        unforced completion of ``prefix`` from an empty KV cache with the raw log-probabilities of the
        ``TOP_N`` most probable next tokens (``post_sampling_probs`` false): the same evaluation, and the same
        values to the bit, as :meth:`step` of each token (module docstring). A token ranked below ``TOP_N``
        is scored by its own forced :meth:`step`.

        Raises:
            RuntimeError: llama.cpp failed.
        """
        body = {
            "prompt": list(prefix),
            "n_predict": 1,
            "n_probs": TOP_N,
            "post_sampling_probs": False,
            "temperature": 0.0,
            "top_k": 1,
            "cache_prompt": False,
            "seed": 0,
        }
        response = self._complete(body)
        if not isinstance(response, dict) or "error" in response:
            raise RuntimeError(f"{self.model_name}: llama.cpp rejected the log-likelihood step: {str(response)[:200]}")
        try:
            top = response["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
            logprobs = {int(entry["id"]): float(entry["logprob"]) for entry in top}
            best = int(top[0]["id"])
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise RuntimeError(f"{self.model_name}: llama.cpp answered without log-probabilities: {str(response)[:200]}") from exc
        for token in tokens:
            if token not in logprobs:
                logprobs[token] = self.step(prefix, token)[0]
        return {t: logprobs[t] for t in tokens}, best

    def score_shared(self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[tuple[float, bool]]:
        """:meth:`score` of every pair (every step from an empty cache), each distinct prefix evaluated once:
        where several continuations need the next token after the same prefix (an item's choices after its
        context, one-token letters above all), one :meth:`distribution_step` gives all their values, else a
        forced :meth:`step`. The values are those of :meth:`score`, bit for bit: the same evaluation of the
        same tokens.

        Raises:
            RuntimeError: llama.cpp failed.
        """
        needed: dict[tuple[int, ...], dict[int, None]] = {}
        for context_enc, continuation_enc in pairs:
            prefix = tuple(context_enc)
            for token in continuation_enc:
                needed.setdefault(prefix, {})[token] = None
                prefix = (*prefix, token)
        values: dict[tuple[int, ...], tuple[dict[int, float], int]] = {}
        with self._lock:
            for prefix, tokens in needed.items():
                if len(tokens) == 1:
                    (token,) = tokens
                    logprob, top, _ = self.step(prefix, token)
                    values[prefix] = ({token: logprob}, token if top else -1)
                else:
                    values[prefix] = self.distribution_step(prefix, list(tokens))
        results = []
        for context_enc, continuation_enc in pairs:
            total, greedy, prefix = 0.0, True, tuple(context_enc)
            for token in continuation_enc:
                logprobs, best = values[prefix]
                total += logprobs[token]
                greedy = greedy and best == token
                prefix = (*prefix, token)
            results.append((total, greedy))
        return results

    def __call__(self, requests: list[LoglikRequest]) -> list[LoglikResult]:
        """Score every request: by :meth:`score_shared` (by :meth:`score` one by one when ``incremental``);
        a value does not depend on the other requests.

        All requests are tokenised and checked before any is scored, so a bad one costs no decoding.

        Raises:
            LoglikInputError: a request cannot be scored (:meth:`check`); RuntimeError: llama.cpp failed.
        """
        pairs = [self.encode_pair(r.context, r.continuation) for r in requests]
        for index, (context_enc, continuation_enc) in enumerate(pairs):
            self.check(index, context_enc, continuation_enc)
        if self.incremental:
            scored = [self.score(context_enc, continuation_enc) for context_enc, continuation_enc in pairs]
        else:
            scored = self.score_shared(pairs)
        return [
            LoglikResult(total, greedy, len(context_enc), len(continuation_enc))
            for (total, greedy), (context_enc, continuation_enc) in zip(scored, pairs, strict=True)
        ]
