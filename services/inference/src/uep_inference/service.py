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

from faststream import AckPolicy
from faststream.kafka import KafkaBroker, KafkaMessage

from uep_common.events import ErrorInfo, OutputGenerated, SampleDispatched, Topics
from uep_common.messaging import consumer_options, decode_or_dead_letter, publish_event
from uep_common.telemetry import tracer
from uep_inference.backends import BackendError, Backends
from uep_common.prompts import PromptRenderError, render_prompt
from uep_inference.settings import InferenceSettings

log = logging.getLogger(__name__)
_tracer = tracer("uep.inference")


class ModelLimits:
    """One semaphore per model (endpoint + name), sized by the registry's serving capacity, so calls queue
    here rather than inside the model server, where the wait would count against the call's timeout."""

    def __init__(self) -> None:
        self._sems: dict[tuple[str, str], asyncio.Semaphore] = {}

    def for_target(self, target) -> asyncio.Semaphore | None:
        """The semaphore of ``target``, or None when its capacity is not set."""
        if not target.max_concurrency:
            return None
        key = (target.endpoint, target.triton_model_name or target.name)
        if key not in self._sems:
            self._sems[key] = asyncio.Semaphore(target.max_concurrency)
        return self._sems[key]


TRANSIENT = frozenset({"triton_unavailable", "openai_unavailable", "timeout"})
"""Failure kinds worth another attempt (the endpoint may come back); others (e.g. an unknown model) are not."""


async def generate_output(
    event: SampleDispatched,
    backends: Backends,
    timeout_s: float,
    limits: ModelLimits | None = None,
    max_attempts: int = 1,
    backoff_s: float = 0.5,
) -> OutputGenerated:
    """Render the prompt and call the model of ``event.target``; never raises for model failures.

    A transient failure (:data:`TRANSIENT`) is retried up to ``max_attempts`` calls in all, waiting a random
    0–``backoff_s`` × 2^(attempt−1) seconds in between. ``latency_ms`` is the last call's wall time,
    excluding the wait for a free slot of the model.
    """
    common = {**event.item_fields(), "benchmark_id": event.benchmark_id, "model_id": event.target.model_id}
    try:
        prompt = render_prompt(event.prompt.template, event.input, event.fewshot)
    except PromptRenderError as exc:
        return OutputGenerated(
            **common, prompt="", output=None, error=ErrorInfo(stage="inference", type="prompt_render_error", message=str(exc))
        )
    max_tokens = event.prompt.max_tokens or event.target.max_tokens
    stop = [*event.target.stop, *event.prompt.stop]
    slot = (limits.for_target(event.target) if limits else None) or contextlib.nullcontext()
    backend = backends.for_target(event.target)
    for attempt in range(1, max_attempts + 1):
        async with slot:
            start = time.perf_counter()
            try:
                gen = await asyncio.wait_for(
                    backend.generate(event.target, prompt, max_tokens, stop, timeout_s, event.prompt.chat), timeout_s + 5
                )
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
    if err is None:
        return OutputGenerated(
            **common,
            prompt=prompt,
            output=gen.text,
            latency_ms=latency_ms,
            prompt_tokens=gen.prompt_tokens,
            completion_tokens=gen.completion_tokens,
        )
    log.warning("inference failed for %s: %s %s", event.item_key(), err.type, err.message[:200])
    return OutputGenerated(**common, prompt=prompt, output=None, latency_ms=latency_ms, error=err)


def register(broker: KafkaBroker, settings: InferenceSettings, backends: Backends) -> None:
    """Register the inference subscriber and its publisher on ``broker``."""
    broker.publisher(Topics.OUTPUT_GENERATED, schema=OutputGenerated, title="OutputGenerated")
    limits = ModelLimits()

    @broker.subscriber(
        Topics.SAMPLE_DISPATCHED,
        **consumer_options(settings, "inference"),
        max_workers=settings.inference_concurrency,
        ack_policy=AckPolicy.ACK_FIRST,
        title="inference:SampleDispatched",
        description="Renders each sample's prompt and calls its model.",
    )
    async def on_sample(msg: KafkaMessage) -> None:
        event = await decode_or_dead_letter(broker, SampleDispatched, msg, Topics.SAMPLE_DISPATCHED)
        if event is None:
            return
        with _tracer.start_as_current_span(
            "generate", attributes={"uep.item": event.item_key(), "uep.model": event.target.name}
        ):
            out = await generate_output(
                event, backends, settings.inference_timeout_s, limits,
                settings.inference_max_attempts, settings.inference_backoff_s,
            )
            await publish_event(broker, out)
