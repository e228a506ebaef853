"""The ``openai_compatible`` backend: ``/v1/chat/completions``, or ``/v1/completions`` for raw text (vLLM,
TGI, llama.cpp server, Triton's OpenAI frontend), with the bearer token ``UEP_OPENAI_API_KEY``.

Structured output (``GenerationRequest.json_schema``): the schema goes out as ``response_format``
``{"type": "json_schema", "json_schema": {"name", "schema", "strict": true}}`` (OpenAI's structured outputs,
also read by vLLM, SGLang and llama.cpp's server), or as vLLM's ``guided_json`` when the model's ``spec`` says
``"structured_output": "guided_json"``, or not at all with ``"none"``. A server that refuses the request
(HTTP 400 or 422) is asked once more without the schema; ``Generation.constrained`` says which answered.

Error kinds: ``openai_unavailable`` (the connection failed or timed out, or a 5xx status; transient),
``rate_limited`` (HTTP 429; transient), both with the answer's ``Retry-After`` (:func:`retry_after_seconds`)
for the service's wait before the next attempt; ``openai_http_error`` (any other status than 200), ``openai_bad_response`` (a body without ``choices[0]``'s text),
``loglik_unsupported`` (a log-likelihood request answered without prompt log-probabilities).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, ClassVar

import httpx

from uep_common.contract.events import ModelTarget
from uep_inference.backends.api_keys import ApiKeys
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

if TYPE_CHECKING:
    from uep_inference.settings import InferenceSettings

STRUCTURED_OUTPUT_MODES = ("response_format", "guided_json", "none")
"""Values of a model's ``spec["structured_output"]``: how a JSON schema is sent (default ``response_format``)."""

MAX_STOP = 4
"""Stop strings sent to the server (OpenAI's API refuses more than four); every further one is applied here
(:func:`truncate_at_stop`)."""


@register_backend("openai_compatible")
class OpenAIBackend:
    """One ``httpx.AsyncClient`` for every OpenAI-compatible endpoint (``transport``: for tests)."""

    transient_errors: ClassVar[frozenset[str]] = frozenset({"openai_unavailable", "rate_limited"})

    def __init__(self, settings: InferenceSettings | None = None, transport: httpx.AsyncBaseTransport | None = None) -> None:
        secret = settings.model_secret_key.get_secret_value() if settings is not None and settings.model_secret_key else None
        self._keys = ApiKeys(secret, settings.openai_api_key if settings is not None else None)
        self._http = httpx.AsyncClient(transport=transport)

    def _headers(self, target: ModelTarget) -> dict[str, str]:
        """The request headers for ``target``: its bearer token (:class:`uep_inference.backends.api_keys.ApiKeys`), if any.
        Raises :class:`BackendError` ``api_key_unavailable``."""
        token = self._keys.for_target(target)
        return {"Authorization": f"Bearer {token}"} if token else {}

    async def generate(self, request: GenerationRequest) -> Generation:
        """A chat completion with the prompt as the user message, or with ``chat=False`` a raw text
        completion (``/v1/completions``). Raises :class:`BackendError` (:func:`check_status` for statuses).

        Stop strings: the first :data:`MAX_STOP` are sent (OpenAI's API takes no more); when there are more,
        the text is also cut client-side at the earliest occurrence of any of them (:func:`truncate_at_stop`),
        so every stop string is honoured. ``completion_tokens`` stays the server's count of what it generated
        (what the endpoint bills), which then includes the tail cut off here.

        With a ``json_schema``: sent as the model's :func:`structured_output_mode` says; when the server
        answers 400 or 422 to that, the call is made once more without it (``constrained`` False)."""
        mode = structured_output_mode(request.target) if request.json_schema is not None else "none"
        if mode != "none":
            try:
                return await self._complete(request, mode)
            except BackendError as exc:
                if exc.kind != "openai_http_error" or not str(exc).startswith(("HTTP 400", "HTTP 422")):
                    raise
        return await self._complete(request, "none")

    async def _complete(self, request: GenerationRequest, mode: str) -> Generation:
        """One completion call, the schema sent as ``mode`` says (:data:`STRUCTURED_OUTPUT_MODES`)."""
        target, chat = request.target, request.chat
        body: dict[str, Any] = {
            "model": target.triton_model_name or target.name,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        }
        if chat is False:
            body["prompt"], path = request.prompt, "/v1/completions"
        else:
            body["messages"], path = [{"role": "user", "content": request.prompt}], "/v1/chat/completions"
        if request.stop:
            body["stop"] = list(request.stop[:MAX_STOP])
        if mode == "response_format":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": request.json_schema, "strict": True},
            }
        elif mode == "guided_json":
            body["guided_json"] = request.json_schema
        try:
            r = await self._http.post(
                target.endpoint.rstrip("/") + path, json=body, timeout=request.timeout_s, headers=self._headers(target)
            )
        except httpx.HTTPError as exc:
            raise BackendError("openai_unavailable", repr(exc)) from exc
        check_status(r)
        try:
            data = r.json()
            choice = data["choices"][0]
            text = (choice["text"] if chat is False else choice["message"]["content"]) or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise BackendError("openai_bad_response", f"unexpected response: {r.text[:500]}") from exc
        if len(request.stop) > MAX_STOP:
            text = truncate_at_stop(text, request.stop)
        usage = data.get("usage") or {}
        return Generation(text, usage.get("prompt_tokens"), usage.get("completion_tokens"), constrained=mode != "none")

    async def loglikelihood(self, request: GenerationRequest) -> Generation:
        """The log-likelihood of each continuation after the context, from prompt log-probabilities: one
        ``/v1/completions`` call per continuation with the prompt context + continuation, ``echo``, ``logprobs``
        1 and ``max_tokens`` 1 (the request lm-evaluation-harness's ``local-completions`` sends; the generated
        token is dropped). See :func:`continuation_loglik` for which tokens count. Raises :class:`BackendError`:
        ``loglik_unsupported`` when the answer has no prompt log-probabilities (the server ignores ``echo``)."""
        target = request.target
        logliks: list[Loglik] = []
        context_tokens = 0
        for continuation in request.continuations:
            body: dict[str, Any] = {
                "model": target.triton_model_name or target.name,
                "prompt": request.prompt + continuation,
                "max_tokens": 1,
                "temperature": 0.0,
                "logprobs": 1,
                "echo": True,
            }
            url = target.endpoint.rstrip("/") + "/v1/completions"
            try:
                r = await self._http.post(url, json=body, timeout=request.timeout_s, headers=self._headers(target))
            except httpx.HTTPError as exc:
                raise BackendError("openai_unavailable", repr(exc)) from exc
            check_status(r)
            try:
                logprobs = r.json()["choices"][0]["logprobs"]
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                raise BackendError("openai_bad_response", f"unexpected response: {r.text[:500]}") from exc
            loglik, n_context = continuation_loglik(logprobs, request.prompt, continuation)
            logliks.append(loglik)
            context_tokens = n_context
        return Generation("", context_tokens, sum(x.n_tokens for x in logliks), tuple(logliks))

    async def predict(self, request: PredictionRequest) -> PredictionOutput:
        """OpenAI-compatible endpoints serve generation only: raises :class:`BackendError`
        ``contract_unsupported`` for every classifier, ranker or embedding model."""
        raise BackendError(
            "contract_unsupported", f"the openai_compatible backend serves generation only, not {request.target.kind} models"
        )

    async def probe(self, target: ModelTarget, timeout_s: float) -> Probe:
        """``GET /v1/models`` answers 200 (the server is up; whether it serves this model is not checked:
        servers differ in what they list)."""
        start = time.perf_counter()
        try:
            headers = self._headers(target)
        except BackendError as exc:
            return Probe(False, 0.0, exc.kind, str(exc)[:500])
        try:
            r = await self._http.get(target.endpoint.rstrip("/") + "/v1/models", timeout=timeout_s, headers=headers)
        except httpx.HTTPError as exc:
            return Probe(False, (time.perf_counter() - start) * 1000, "openai_unavailable", repr(exc)[:500])
        latency_ms = (time.perf_counter() - start) * 1000
        if r.status_code != 200:
            return Probe(False, latency_ms, "openai_http_error", f"HTTP {r.status_code}: {r.text[:500]}")
        return Probe(True, latency_ms)

    def capacity(self, target: ModelTarget) -> int | None:
        """The registry's serving capacity (``max_in_flight``)."""
        return registry_capacity(target)

    async def close(self) -> None:
        """Close the HTTP client."""
        await self._http.aclose()


def continuation_loglik(logprobs: Any, context: str, continuation: str) -> tuple[Loglik, int]:
    """The continuation's :class:`Loglik` and the context's token count from an echoed completion's
    ``logprobs`` (``tokens``, ``token_logprobs``, ``top_logprobs``, ``text_offset``; the OpenAI completions
    format) of the prompt ``context + continuation`` followed by one generated token.

    The continuation's tokens are the prompt tokens that start at or after the context's end, where, as
    lm-evaluation-harness's ``_encode_pair`` does, trailing whitespace of the context belongs to the
    continuation (``"Answer: "`` + ``"A"`` is split as ``"Answer:"`` + ``" A"``). The last entry (the generated
    token) is dropped. ``is_greedy``: each token's log-probability equals the largest of its ``top_logprobs``
    (lm-eval's check). Raises :class:`BackendError` ``loglik_unsupported`` when there are no prompt
    log-probabilities, ``openai_bad_response`` when they do not fit the prompt.
    """
    if not isinstance(logprobs, dict) or not logprobs.get("token_logprobs") or not logprobs.get("text_offset"):
        raise BackendError("loglik_unsupported", "the completion carries no prompt log-probabilities (echo with logprobs)")
    try:
        offsets = [int(o) for o in logprobs["text_offset"]]
        values = list(logprobs["token_logprobs"])
        tops = list(logprobs.get("top_logprobs") or [None] * len(values))
    except (TypeError, ValueError) as exc:
        raise BackendError("openai_bad_response", f"malformed logprobs: {exc}") from exc
    prompt_len = len(context) + len(continuation)
    split = len(context.rstrip()) if continuation else len(context)
    n_prompt = sum(1 for o in offsets[:-1] if o < prompt_len) if len(offsets) > 1 else 0
    n_context = sum(1 for o in offsets[:n_prompt] if o < split)
    if n_context < 1 or n_prompt <= n_context or len(values) < n_prompt or len(tops) < n_prompt:
        raise BackendError("openai_bad_response", f"echoed logprobs do not cover the continuation {continuation[:80]!r}")
    picked = values[n_context:n_prompt]
    if any(not isinstance(v, (int, float)) for v in picked):
        raise BackendError("openai_bad_response", "a continuation token has no log-probability")
    greedy = all(
        isinstance(t, dict) and t and v >= max(t.values()) for v, t in zip(picked, tops[n_context:n_prompt], strict=True)
    )
    return Loglik(float(sum(picked)), len(picked), greedy), n_context


def structured_output_mode(target: ModelTarget) -> str:
    """How a JSON schema is sent to ``target``: its ``spec["structured_output"]`` when that is one of
    :data:`STRUCTURED_OUTPUT_MODES`, else ``response_format``."""
    mode = (target.spec or {}).get("structured_output")
    return mode if mode in STRUCTURED_OUTPUT_MODES else "response_format"


def check_status(r: httpx.Response) -> None:
    """Raise :class:`BackendError` unless ``r`` is a 200: 429 → ``rate_limited`` and 5xx → ``openai_unavailable``
    (both transient, with the answer's ``Retry-After`` as ``retry_after_s``), any other status →
    ``openai_http_error``."""
    if r.status_code == 200:
        return
    detail = f"HTTP {r.status_code}: {r.text[:500]}"
    wait = retry_after_seconds(r.headers.get("retry-after"))
    if r.status_code == 429:
        raise BackendError("rate_limited", detail, wait)
    if r.status_code >= 500:
        raise BackendError("openai_unavailable", detail, wait)
    raise BackendError("openai_http_error", detail)


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds to wait from an HTTP ``Retry-After`` header (RFC 9110 §10.2.3: a number of seconds, or an
    HTTP-date, parsed by the standard library's ``email.utils.parsedate_to_datetime``), ≥ 0; None when the
    header is absent or neither form. ``now``: the clock for a date (default the current UTC time). The
    caller bounds the wait (``UEP_INFERENCE_MAX_RETRY_AFTER_S``)."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:  # an obsolete date form without a zone: HTTP dates are in GMT
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if seconds != seconds or seconds in (float("inf"), float("-inf")):  # NaN or infinite: no usable value
        return None
    return max(0.0, seconds)


def truncate_at_stop(text: str, stop: tuple[str, ...] | list[str]) -> str:
    """``text`` up to (not including) the earliest occurrence of any non-empty string of ``stop`` — what an
    OpenAI-compatible server does with the stop strings it is sent; ``text`` unchanged when none occurs."""
    cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=-1)
    return text if cut < 0 else text[:cut]
