"""Inference service: SampleDispatched → render prompt → call the model → OutputGenerated.

A failed render or model call still produces an OutputGenerated, with ``error`` set and no output.
Samples are processed concurrently (``UEP_INFERENCE_CONCURRENCY`` per replica); the subscriber commits
on receipt, and a sample lost to a crash is re-dispatched by the scheduler when its lease expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from faststream import AckPolicy
from faststream.kafka import KafkaBroker, KafkaMessage

from uep_common.consuming import consume
from uep_common.events import ErrorInfo, ModelTarget, OutputGenerated, SampleDispatched, Topics
from uep_common.messaging import consumer_options, dead_letter, publish_event, raw_records
from uep_common.prompts import PromptRenderError, render_prompt
from uep_common.telemetry import tracer
from uep_inference.backends import BackendError, Backends, Generation, GenerationRequest, transient_errors
from uep_inference.settings import InferenceSettings

log = logging.getLogger(__name__)
_tracer = tracer("uep.inference")

# What ``broker.subscriber(...)`` returns, as a decorator of a :func:`consume` handler: mypy resolves the call to
# ``Any`` (its overloads are ambiguous given ``**consumer_options(...)``), so it is bound to this type first.
_Subscribe = Callable[[Callable[[KafkaMessage], Awaitable[None]]], object]


class ModelLimits:
    """One semaphore per model (endpoint + name), sized by the registry's serving capacity, so calls queue
    here rather than inside the model server, where the wait would count against the call's timeout."""

    def __init__(self) -> None:
        self._sems: dict[tuple[str, str], asyncio.Semaphore] = {}

    def for_target(self, target: ModelTarget, capacity: int | None = None) -> asyncio.Semaphore | None:
        """The semaphore of ``target`` sized by ``capacity`` (calls in flight, default the registry's
        ``target.max_concurrency``; a backend's ``capacity(target)``), or None when it is not set."""
        capacity = target.max_concurrency if capacity is None else capacity
        if not capacity:
            return None
        key = (target.endpoint, target.triton_model_name or target.name)
        if key not in self._sems:
            self._sems[key] = asyncio.Semaphore(capacity)
        return self._sems[key]


TRANSIENT = frozenset({"timeout"}) | transient_errors()
"""Failure kinds worth another attempt (the endpoint may come back): ``timeout`` and every registered
backend's ``transient_errors`` (``triton_unavailable``, ``openai_unavailable``); others (e.g. an unknown
model) are not."""


@dataclass(frozen=True)
class ModelCall:
    """Outcome of :func:`call_model`: the generation or the error, the last call's wall time, calls made."""

    generation: Generation | None
    error: ErrorInfo | None
    latency_ms: float
    attempts: int


async def call_model(
    target: ModelTarget,
    prompt: str,
    max_tokens: int,
    stop: list[str],
    chat: bool | None,
    backends: Backends,
    timeout_s: float,
    limits: ModelLimits | None = None,
    max_attempts: int = 1,
    backoff_s: float = 0.5,
) -> ModelCall:
    """Call the model of ``target`` (inside its capacity semaphore); never raises for model failures.

    A transient failure (:data:`TRANSIENT`) is retried up to ``max_attempts`` calls in all, waiting a random
    0–``backoff_s`` × 2^(attempt−1) seconds in between. ``latency_ms`` is the last call's wall time,
    excluding the wait for a free slot of the model. Used for benchmark items (Kafka) and judge calls (HTTP).
    """
    backend = backends.for_target(target)
    slot = (limits.for_target(target, backend.capacity(target)) if limits else None) or contextlib.nullcontext()
    request = GenerationRequest(target, prompt, max_tokens, timeout_s, target.temperature, tuple(stop), chat)
    gen = None
    err: ErrorInfo | None = None
    for attempt in range(1, max_attempts + 1):
        async with slot:
            start = time.perf_counter()
            try:
                gen = await asyncio.wait_for(backend.generate(request), timeout_s + 5)
            except BackendError as exc:
                err = ErrorInfo(stage="inference", type=exc.kind, message=str(exc)[:2000])
            except TimeoutError:
                err = ErrorInfo(stage="inference", type="timeout", message=f"no answer within {timeout_s:.0f} s")
            else:
                err = None
            latency_ms = (time.perf_counter() - start) * 1000
        if err is None or err.type not in TRANSIENT or attempt == max_attempts:
            break
        # exponential backoff with full jitter (AWS Architecture Blog, "Exponential Backoff and Jitter", 2015)
        await asyncio.sleep(random.uniform(0, backoff_s * 2 ** (attempt - 1)))
    if err is not None and attempt > 1:
        err = err.model_copy(update={"message": f"{err.message} (after {attempt} attempts)"})
    return ModelCall(gen if err is None else None, err, latency_ms, attempt)


async def generate_output(
    event: SampleDispatched,
    backends: Backends,
    timeout_s: float,
    limits: ModelLimits | None = None,
    max_attempts: int = 1,
    backoff_s: float = 0.5,
) -> OutputGenerated:
    """Render the prompt and call the model of ``event.target`` (:func:`call_model`); never raises for
    model failures: a failure is an OutputGenerated with ``error`` set."""
    common = {**event.item_fields(), "benchmark_id": event.benchmark_id, "model_id": event.target.model_id}
    try:
        prompt = render_prompt(event.prompt.template, event.input, event.fewshot)
    except PromptRenderError as exc:
        return OutputGenerated(
            **common, prompt="", output=None, error=ErrorInfo(stage="inference", type="prompt_render_error", message=str(exc))
        )
    max_tokens = event.prompt.max_tokens or event.target.max_tokens
    stop = [*event.target.stop, *event.prompt.stop]
    call = await call_model(
        event.target, prompt, max_tokens, stop, event.prompt.chat, backends, timeout_s, limits, max_attempts, backoff_s
    )
    if call.error is None:
        gen = call.generation
        assert gen is not None  # call_model sets the generation whenever there is no error
        return OutputGenerated(
            **common,
            prompt=prompt,
            output=gen.text,
            latency_ms=call.latency_ms,
            prompt_tokens=gen.prompt_tokens,
            completion_tokens=gen.completion_tokens,
        )
    log.warning("inference failed for %s: %s %s", event.item_key(), call.error.type, call.error.message[:200])
    return OutputGenerated(**common, prompt=prompt, output=None, latency_ms=call.latency_ms, error=call.error)


def register(broker: KafkaBroker, settings: InferenceSettings, backends: Backends, limits: ModelLimits | None = None) -> None:
    """Register the inference subscriber and its publisher on ``broker`` (``limits``: the per-model
    semaphores, shared with the judge's HTTP endpoint, :mod:`uep_inference.http_api`)."""
    broker.publisher(Topics.OUTPUT_GENERATED, schema=OutputGenerated, title="OutputGenerated")
    limits = limits or ModelLimits()

    subscribe: _Subscribe = broker.subscriber(
        Topics.SAMPLE_DISPATCHED,
        **consumer_options(settings, "inference"),
        max_workers=settings.inference_concurrency,
        ack_policy=AckPolicy.ACK_FIRST,
        title="inference:SampleDispatched",
        description="Renders each sample's prompt and calls its model.",
    )

    @subscribe
    @consume(
        broker,
        SampleDispatched,
        span="generate",
        attributes=lambda e: {"uep.item": e.item_key(), "uep.model": e.target.name},
        tracer=_tracer,
    )
    async def on_sample(event: SampleDispatched, msg: KafkaMessage) -> None:
        out = await generate_output(
            event,
            backends,
            event.timeout_s or settings.inference_timeout_s,
            limits,
            settings.inference_max_attempts,
            settings.inference_backoff_s,
        )
        await publish_event(broker, out)
        if out.error is not None:  # stored as the item's failed result, and dead-lettered with the reason
            body, headers = raw_records(msg)[0]
            await dead_letter(
                broker,
                body,
                Topics.SAMPLE_DISPATCHED,
                f"{out.error.type}: {out.error.message}",
                key=event.key(),
                headers=headers,
                dlq_id=f"inference:{event.event_id}",
            )
