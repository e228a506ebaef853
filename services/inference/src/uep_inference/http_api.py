"""``POST /internal/generate``: one model call over HTTP, for the judge service.

The judge calls its judge models through the inference service rather than talking to Triton itself, so a
judge model is just a registered model: the same backends (Triton gRPC/HTTP, OpenAI-compatible), the same
per-model capacity semaphores (judge calls and benchmark items queue for one model together), the same
transient-failure retries. HTTP, not a Kafka request/response pair: a judge call is a synchronous step
inside the handling of one item (the judge needs the answer to parse it, retry and aggregate), which on
Kafka would need a reply topic, correlation ids and per-replica reply consumers; HTTP gives the timeout,
the backpressure (a slow model slows the caller) and the error for free. It is an internal endpoint on
the service's health port, not routed by the gateway.

Only the platform's own services may call it: a request must carry ``Authorization: Bearer <token>`` with
the shared secret ``UEP_INTERNAL_TOKEN`` (:class:`uep_common.runtime.settings.CommonSettings.internal_token`),
compared in constant time; anything else is 401 before the body is read. With no token configured every
call is refused (503), so a deployment that forgot the secret is closed rather than open.

Request (JSON): ``{"target": ModelTarget, "prompt": str, "max_tokens": int?, "stop": [str]?, "chat": bool?,
"json_schema": object?}``; ``json_schema`` (at most :data:`MAX_SCHEMA_CHARS` characters as JSON) asks for an
answer matching that JSON Schema: decoded under it where the model's backend can
(``uep_inference.backends.base.GenerationRequest``), and ``constrained`` in the answer says whether it was.
Each call is a server span ``POST /internal/generate`` continuing the caller's W3C ``traceparent`` header
(the judge's httpx client span), with the response status as ``http.response.status_code``.

Responses (JSON): 401 for a missing or wrong service credential, 503 when none is configured; 200 ``{"text", "prompt_tokens", "completion_tokens", "latency_ms", "attempts", "constrained"}``;
422 ``{"detail": [{"loc", "msg", "type"}]}`` for a malformed request; 502 ``{"error": {"type", "message"},
"latency_ms", "attempts"}`` when the model call failed (after the retries of transient failures).
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from faststream.asgi.types import ASGIApp, Message, Receive, Scope, Send
from opentelemetry import trace
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from uep_common.contract.events import ModelTarget
from uep_common.runtime.telemetry import context_from_headers, tracer
from uep_inference.backends import Backends
from uep_inference.service import ModelLimits, call_model
from uep_inference.settings import InferenceSettings

PATH = "/internal/generate"
_tracer = tracer("uep.inference")
_TRACE_HEADERS = (b"traceparent", b"tracestate")
MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_SCHEMA_CHARS = 64 * 1024
"""Longest ``json_schema`` (serialised as JSON) a request may carry."""


class GenerateRequest(BaseModel):
    """Body of ``POST /internal/generate``."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    target: ModelTarget
    prompt: str = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1)
    stop: list[str] = Field(default_factory=list)
    chat: bool | None = None
    json_schema: dict[str, Any] | None = None

    @field_validator("json_schema")
    @classmethod
    def _bounded_schema(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is not None and len(json.dumps(v)) > MAX_SCHEMA_CHARS:
            raise ValueError(f"json_schema is longer than {MAX_SCHEMA_CHARS} characters as JSON")
        return v


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b""
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ValueError(f"request body larger than {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _send_json(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": data})


def service_credential_problem(scope: Scope, token: str) -> tuple[int, str] | None:
    """``(status, reason)`` when the request's ``Authorization`` is not ``Bearer <token>`` (401), or when no
    token is configured (503); None when the caller is one of the platform's services."""
    if not token:
        return 503, "no service credential is configured (UEP_INTERNAL_TOKEN); internal calls are refused"
    sent = dict(scope.get("headers") or []).get(b"authorization", b"")
    scheme, _, value = sent.partition(b" ")
    if scheme.lower() != b"bearer" or not hmac.compare_digest(value.strip(), token.encode()):
        return 401, "internal endpoint: expected 'Authorization: Bearer <service token>'"
    return None


def make_generate_endpoint(backends: Backends, limits: ModelLimits, settings: InferenceSettings) -> ASGIApp:
    """The raw ASGI app of ``POST /internal/generate`` (mounted on the service's FastStream ASGI app)."""

    async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers") or [] if k in _TRACE_HEADERS}
        with _tracer.start_as_current_span(
            f"POST {PATH}",
            context=context_from_headers(carrier),
            kind=trace.SpanKind.SERVER,
            attributes={"http.request.method": str(scope.get("method", "")), "http.route": PATH},
        ) as span:

            async def traced_send(message: Message) -> None:
                if message["type"] == "http.response.start":
                    span.set_attribute("http.response.status_code", message["status"])
                await send(message)

            await handle(scope, receive, traced_send)

    async def handle(scope: Scope, receive: Receive, send: Send) -> None:
        problem = service_credential_problem(scope, settings.internal_token)
        if problem is not None:
            status, reason = problem
            await _send_json(
                send, status, {"detail": [{"loc": ["header", "Authorization"], "msg": reason, "type": "bad_credentials"}]}
            )
            return
        if scope.get("method") != "POST":
            await _send_json(send, 405, {"detail": [{"loc": ["method"], "msg": "use POST", "type": "method_not_allowed"}]})
            return
        try:
            req = GenerateRequest.model_validate_json(await _read_body(receive))
        except ValidationError as exc:
            problems = [{"loc": ["body", *map(str, e["loc"])], "msg": e["msg"], "type": e["type"]} for e in exc.errors()[:10]]
            await _send_json(send, 422, {"detail": problems})
            return
        except ValueError as exc:
            await _send_json(send, 413, {"detail": [{"loc": ["body"], "msg": str(exc), "type": "too_large"}]})
            return
        call = await call_model(
            req.target,
            req.prompt,
            req.max_tokens or req.target.max_tokens,
            [*req.target.stop, *req.stop],
            req.chat,
            backends,
            settings.inference_timeout_s,
            limits,
            settings.inference_max_attempts,
            settings.inference_backoff_s,
            max_retry_after_s=settings.inference_max_retry_after_s,
            json_schema=req.json_schema,
        )
        if call.error is not None:
            await _send_json(
                send, 502, {"error": call.error.model_dump(), "latency_ms": call.latency_ms, "attempts": call.attempts}
            )
            return
        gen = call.generation
        assert gen is not None  # call_model sets the generation whenever there is no error
        await _send_json(
            send,
            200,
            {
                "text": gen.text,
                "prompt_tokens": gen.prompt_tokens,
                "completion_tokens": gen.completion_tokens,
                "latency_ms": call.latency_ms,
                "attempts": call.attempts,
                "constrained": gen.constrained,
            },
        )

    return endpoint
