"""Inference service: SampleDispatched → render prompt → call the model → OutputGenerated.

A classifier, ranker or embedding model (``target.kind``) gets no prompt: the sample's input becomes its
request and its answer the OutputGenerated's ``prediction`` (:mod:`uep_inference.predictions`).

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
from datetime import UTC, datetime
from typing import Any

from faststream import AckPolicy
from faststream.kafka import KafkaBroker, KafkaMessage

from uep_common.contract.events import (
    ErrorInfo,
    EvaluationCompleted,
    ModelKind,
    ModelTarget,
    OutputGenerated,
    SampleDispatched,
    Topics,
)
from uep_common.prompting.prompts import PromptRenderError, render_prompt
from uep_common.runtime import logs, metrics
from uep_common.runtime.consuming import Received, consume
from uep_common.runtime.messaging import broadcast_options, consumer_options, dead_letter, publish_event
from uep_common.runtime.telemetry import context_from_headers, tracer
from uep_inference import instruments
from uep_inference.agent.loop import StepReply, run_agent
from uep_inference.backends import (
    BackendError,
    Backends,
    Generation,
    GenerationRequest,
    PredictionOutput,
    PredictionRequest,
    transient_errors,
)
from uep_inference.dialogue import answer_conversation, simulate_conversation
from uep_inference.ended import EndedEvaluations, ItemWatch
from uep_inference.limits import ModelLimits
from uep_inference.loglik import loglik_continuations, loglik_output
from uep_inference.predictions import BadInputError, BadOutputError, build_request, render_input, to_prediction
from uep_inference.settings import InferenceSettings

log = logging.getLogger(__name__)
_tracer = tracer("uep.inference")

# What ``broker.subscriber(...)`` returns, as a decorator of a :func:`consume` handler: mypy resolves the call to
# ``Any`` (its overloads are ambiguous given ``**consumer_options(...)``), so it is bound to this type first.
_Subscribe = Callable[[Callable[[KafkaMessage], Awaitable[None]]], object]


TRANSIENT = frozenset({"timeout"}) | transient_errors()
"""Failure kinds worth another attempt (the endpoint may come back): ``timeout`` and every registered
backend's ``transient_errors`` (``triton_unavailable``, ``openai_unavailable``, ``rate_limited``); others (e.g.
an unknown model) are not."""

NOT_CALLED = "evaluation_ended"
"""Error kind of an item whose model was never called because its evaluation ended first (stop, cancel, …):
the item ends with this error, is not dead-lettered, and a retry of the evaluation runs it again."""


@dataclass(frozen=True)
class ModelCall:
    """Outcome of :func:`call_model`: the generation or the error, the last call's wall time, calls made, and
    ``ended``: the status of the item's evaluation when its end cut the attempts short (else None), and
    ``throttled``: an attempt failed with a transient (overload) error, whether or not a retry then answered;
    ``predicted``: a non-generative model's answer (a call with ``prediction``), ``generation`` then None."""

    generation: Generation | None
    error: ErrorInfo | None
    latency_ms: float
    attempts: int
    ended: str | None = None
    throttled: bool = False
    predicted: PredictionOutput | None = None


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
    continuations: tuple[str, ...] = (),
    max_retry_after_s: float = 60.0,
    watch: ItemWatch | None = None,
    prediction: PredictionRequest | None = None,
    json_schema: dict[str, Any] | None = None,
    as_of: datetime | None = None,
    messages: tuple[dict[str, str], ...] = (),
) -> ModelCall:
    """Call the model of ``target`` (inside its capacity limit, resized to ``target``'s capacity when ``as_of``,
    the time the target was read from the registry, default now, is not older than the limit's size:
    :meth:`~uep_inference.limits.ModelLimits.for_target`); never raises for model failures.
    With ``continuations``, a log-likelihood request of each after ``prompt`` (``backend.loglikelihood``);
    with ``prediction``, that request of a classifier, ranker or embedding model (``backend.predict``; the
    answer in ``ModelCall.predicted``); with ``json_schema``, a generation whose answer must match that JSON
    Schema (``GenerationRequest.json_schema``: constrained where the backend can); with ``messages``, a chat
    history answered as chat messages (``GenerationRequest.messages``; ``prompt`` then the same as text).

    A transient failure (:data:`TRANSIENT`) is retried up to ``max_attempts`` calls in all, waiting a random
    0–``backoff_s`` × 2^(attempt−1) seconds in between, and at least the endpoint's ``Retry-After``
    (:attr:`BackendError.retry_after_s`) capped at ``max_retry_after_s``. ``latency_ms`` is the last call's
    wall time, excluding the wait for a free slot of the model. Used for benchmark items (Kafka) and judge
    calls (HTTP).

    ``watch``: the item's evaluation (:class:`uep_inference.ended.ItemWatch`). Once it has ended, no attempt
    starts — checked before each attempt and again once the model's slot is free — and a backoff wait ends at
    once; the call in flight finishes. The outcome is then the last attempt's error, or :data:`NOT_CALLED`
    when no call was made, with ``ended`` set.
    """
    backend = backends.for_target(target)
    slot = (limits.for_target(target, backend.capacity(target), as_of) if limits else None) or contextlib.nullcontext()
    request = GenerationRequest(
        target, prompt, max_tokens, timeout_s, target.temperature, tuple(stop), chat, continuations, json_schema, messages
    )

    def invoke() -> Awaitable[Generation | PredictionOutput]:
        if prediction is not None:
            return backend.predict(prediction)
        return backend.loglikelihood(request) if continuations else backend.generate(request)

    gen: Generation | PredictionOutput | None = None
    err: ErrorInfo | None = None
    latency_ms = 0.0
    made = 0
    ended = watch.status() if watch else None
    throttled = False  # an attempt failed transiently (overload): the scheduler's AIMD hears of it
    while ended is None and made < max_attempts:
        retry_after: float | None = None
        async with slot:
            if watch and (ended := watch.status()) is not None:  # it ended while the item waited for the slot
                break
            made += 1
            start = time.perf_counter()
            try:
                # in this task, not a task of its own (wait_for's): a slot handed over starts its call at once
                async with asyncio.timeout(timeout_s + 5):
                    gen = await invoke()
            except BackendError as exc:
                err = ErrorInfo(stage="inference", type=exc.kind, message=str(exc)[:2000])
                retry_after = exc.retry_after_s
            except TimeoutError:
                err = ErrorInfo(stage="inference", type="timeout", message=f"no answer within {timeout_s:.0f} s")
            else:
                err = None
            latency_ms = (time.perf_counter() - start) * 1000
        # one turn of the loop: the item that waited for this slot sends its call before this one's output is built
        await asyncio.sleep(0)
        throttled = throttled or (err is not None and err.type in TRANSIENT)
        if err is None or err.type not in TRANSIENT or made == max_attempts:
            break
        # exponential backoff with full jitter (AWS Architecture Blog, "Exponential Backoff and Jitter", 2015),
        # and no sooner than the endpoint asked (Retry-After, bounded)
        wait = random.uniform(0, backoff_s * 2 ** (made - 1))
        if retry_after is not None:
            wait = max(wait, min(retry_after, max_retry_after_s))
        if watch:
            ended = await watch.sleep(wait)
        else:
            await asyncio.sleep(wait)
    if ended is not None and err is None and gen is None:
        err = ErrorInfo(stage="inference", type=NOT_CALLED, message=f"not called: the evaluation was {ended} first")
    elif ended is not None and err is not None:
        err = err.model_copy(update={"message": f"{err.message} (no further attempt: the evaluation was {ended})"})
    if err is not None and made > 1:
        err = err.model_copy(update={"message": f"{err.message} (after {made} attempts)"})
    ended = ended if err is not None else None
    if isinstance(gen, PredictionOutput):
        return ModelCall(None, err, latency_ms, made, ended, throttled, gen if err is None else None)
    return ModelCall(gen if err is None else None, err, latency_ms, made, ended, throttled)


async def generate_output(
    event: SampleDispatched,
    backends: Backends,
    timeout_s: float,
    limits: ModelLimits | None = None,
    max_attempts: int = 1,
    backoff_s: float = 0.5,
    max_retry_after_s: float = 60.0,
    watch: ItemWatch | None = None,
) -> OutputGenerated:
    """Render the prompt and call the model of ``event.target`` (:func:`call_model`, with ``watch`` on the
    item's evaluation); never raises for model failures: a failure is an OutputGenerated with ``error`` set.
    A non-generative model gets the sample's input instead (:func:`predict_output`); a conversation item is
    answered or simulated by :mod:`uep_inference.dialogue`."""
    common = {**event.item_fields(), "benchmark_id": event.benchmark_id, "model_id": event.target.model_id}
    if event.target.kind != ModelKind.generation:
        return await predict_output(event, backends, timeout_s, limits, max_attempts, backoff_s, max_retry_after_s, watch)
    if event.prompt.dialogue is not None or event.prompt.simulation is not None:

        async def dialogue_call(
            target: ModelTarget,
            prompt: str,
            max_tokens: int,
            stop: list[str],
            chat: bool | None,
            *,
            messages: tuple[dict[str, str], ...] = (),
            timeout_s: float = timeout_s,
        ) -> ModelCall:
            return await call_model(
                target, prompt, max_tokens, stop, chat, backends, timeout_s, limits, max_attempts, backoff_s,
                max_retry_after_s=max_retry_after_s, watch=watch, messages=messages,
            )  # fmt: skip

        stop = [*event.target.stop, *event.prompt.stop]
        if event.prompt.dialogue is not None:
            return await answer_conversation(event, dialogue_call, event.prompt.max_tokens or event.target.max_tokens, stop)
        return await simulate_conversation(event, dialogue_call, stop, timeout_s)
    try:
        prompt = render_prompt(event.prompt.template, event.input, event.fewshot)
    except PromptRenderError as exc:
        return OutputGenerated(
            **common, prompt="", output=None, error=ErrorInfo(stage="inference", type="prompt_render_error", message=str(exc))
        )
    if event.prompt.agent is not None:
        return await agent_output(event, prompt, backends, timeout_s, limits, max_attempts, backoff_s, max_retry_after_s, watch)
    max_tokens = event.prompt.max_tokens or event.target.max_tokens
    stop = [*event.target.stop, *event.prompt.stop]
    conts: tuple[str, ...] = ()
    if event.prompt.loglik is not None:  # score each choice's log-likelihood instead of generating
        try:
            conts = loglik_continuations(event.prompt.loglik, event.input)
        except ValueError as exc:
            error = ErrorInfo(stage="inference", type="loglik_bad_choices", message=str(exc))
            return OutputGenerated(**common, prompt=prompt, output=None, error=error)
    call = await call_model(
        event.target,
        prompt,
        max_tokens,
        stop,
        event.prompt.chat,
        backends,
        timeout_s,
        limits,
        max_attempts,
        backoff_s,
        conts,
        max_retry_after_s,
        watch,
        as_of=event.occurred_at,
    )
    if call.error is None:
        gen = call.generation
        assert gen is not None  # call_model sets the generation whenever there is no error
        return OutputGenerated(
            **common,
            prompt=prompt,
            output=gen.text if gen.logliks is None else loglik_output(gen.logliks),
            latency_ms=call.latency_ms,
            prompt_tokens=gen.prompt_tokens,
            completion_tokens=gen.completion_tokens,
            throttled=call.throttled,
        )
    log.warning("inference failed for %s: %s %s", event.item_key(), call.error.type, call.error.message[:200])
    return OutputGenerated(
        **common, prompt=prompt, output=None, latency_ms=call.latency_ms, error=call.error, throttled=call.throttled
    )


async def predict_output(
    event: SampleDispatched,
    backends: Backends,
    timeout_s: float,
    limits: ModelLimits | None = None,
    max_attempts: int = 1,
    backoff_s: float = 0.5,
    max_retry_after_s: float = 60.0,
    watch: ItemWatch | None = None,
) -> OutputGenerated:
    """One item of a classifier, ranker or embedding model: the sample's input as its request
    (:func:`uep_inference.predictions.build_request`), the answer as ``prediction`` and ``output`` (the label
    or the top candidate id), ``prompt`` a short rendering of the input. Never raises for model failures or
    bad samples: ``error`` of type ``bad_input`` (the sample lacks the shape, naming the field), ``bad_output``
    (the answer does not fit the model's spec) or the call's error."""
    common = {**event.item_fields(), "benchmark_id": event.benchmark_id, "model_id": event.target.model_id}
    try:
        request = build_request(event.target, event.input, timeout_s)
    except BadInputError as exc:
        return OutputGenerated(
            **common, prompt="", output=None, error=ErrorInfo(stage="inference", type="bad_input", message=str(exc))
        )
    prompt = render_input(request)
    call = await call_model(
        event.target, prompt, 1, [], None, backends, timeout_s, limits, max_attempts, backoff_s,
        max_retry_after_s=max_retry_after_s, watch=watch, prediction=request, as_of=event.occurred_at,
    )  # fmt: skip
    error = call.error
    if error is None:
        assert call.predicted is not None  # call_model sets the answer whenever there is no error
        try:
            prediction, output = to_prediction(event.target, event.input, call.predicted)
        except BadOutputError as exc:
            error = ErrorInfo(stage="inference", type="bad_output", message=str(exc))
        else:
            return OutputGenerated(
                **common,
                prompt=prompt,
                output=output,
                latency_ms=call.latency_ms,
                throttled=call.throttled,
                prediction=prediction,
            )
    log.warning("inference failed for %s: %s %s", event.item_key(), error.type, error.message[:200])
    return OutputGenerated(
        **common, prompt=prompt, output=None, latency_ms=call.latency_ms, error=error, throttled=call.throttled
    )


async def agent_output(
    event: SampleDispatched,
    task: str,
    backends: Backends,
    timeout_s: float,
    limits: ModelLimits | None = None,
    max_attempts: int = 1,
    backoff_s: float = 0.5,
    max_retry_after_s: float = 60.0,
    watch: ItemWatch | None = None,
) -> OutputGenerated:
    """One item of an agent benchmark: :func:`uep_inference.agent.loop.run_agent` on the rendered prompt
    ``task``, each step's model call a :func:`call_model` (the model's slot, retries, ``watch``). The output is
    the submitted answer (empty when none was submitted: a wrong answer, not an error), the token counts the
    sums over the steps, ``latency_ms`` the sum of the model calls, and the trajectory goes with it. A run cut
    by the end of its evaluation (stop, cancel) is an error :data:`NOT_CALLED`, as an item never called: it is
    unfinished, and a retry of the evaluation runs it again."""
    assert event.prompt.agent is not None
    chat = event.prompt.chat

    async def ask(prompt: str, max_tokens: int, call_timeout_s: float, schema: dict[str, Any]) -> StepReply:
        call = await call_model(
            event.target, prompt, max_tokens, [], chat, backends, call_timeout_s, limits, max_attempts, backoff_s,
            max_retry_after_s=max_retry_after_s, watch=watch, json_schema=schema,
        )  # fmt: skip
        gen = call.generation
        return StepReply(
            gen.text if gen is not None else None,
            call.error,
            call.latency_ms,
            (gen.prompt_tokens or 0) if gen is not None else 0,
            (gen.completion_tokens or 0) if gen is not None else 0,
            call.ended,
            call.throttled,
        )

    run = await run_agent(task, event.prompt.agent, ask, timeout_s, watch.status if watch else lambda: None)
    trajectory, error = run.trajectory, run.error
    if run.ended is not None and error is None:  # cut between steps: unfinished, so a retry runs it again
        message = f"agent stopped after {len(trajectory.steps)} steps: the evaluation was {run.ended}"
        error = ErrorInfo(stage="inference", type=NOT_CALLED, message=message)
    if error is not None:
        log.warning("agent run of %s ended: %s %s", event.item_key(), error.type, error.message[:200])
    return OutputGenerated(
        **event.item_fields(),
        benchmark_id=event.benchmark_id,
        model_id=event.target.model_id,
        prompt=task,
        output=None if error is not None else (trajectory.answer or ""),
        latency_ms=trajectory.model_ms,
        prompt_tokens=trajectory.prompt_tokens,
        completion_tokens=trajectory.completion_tokens,
        error=error,
        throttled=run.throttled,
        trajectory=trajectory,
    )


def published_at(timestamp_ms: int | None, event: SampleDispatched) -> datetime:
    """When the record was published (its Kafka timestamp ``timestamp_ms``, UTC), else the event's
    ``occurred_at`` (a record without a timestamp)."""
    if timestamp_ms is not None and timestamp_ms > 0:
        return datetime.fromtimestamp(timestamp_ms / 1000, UTC)
    return event.occurred_at


def in_publication_order(items: list[Received]) -> list[Received]:
    """The records of one fetch in the order they were published (record timestamp, ms; a record without one
    first), each partition's own order kept (a stable sort). A fetch holds records of several partitions (the
    evaluations' keys), grouped by partition; their workers reach a model's capacity slots in the order they start,
    so started in partition order an item leased in a later allocation pass could take a slot before one the
    scheduler leased earlier, urgent ones included."""
    return sorted(items, key=lambda item: item.timestamp_ms or 0)


DRAIN_S = 20.0
"""At shutdown, how long the items in flight get to finish (and their outputs to be published) before the
process stops; an item cut off is dispatched again when its lease expires."""


def register(
    broker: KafkaBroker,
    settings: InferenceSettings,
    backends: Backends,
    limits: ModelLimits | None = None,
    ended: EndedEvaluations | None = None,
) -> Callable[[], Awaitable[None]]:
    """Register the inference subscribers and the publisher on ``broker`` (``limits``: the per-model
    semaphores, shared with the judge's HTTP endpoint, :mod:`uep_inference.http_api`; ``ended``: the
    evaluations seen to end, :mod:`uep_inference.ended`).

    SampleDispatched: one consumer group for all replicas. EvaluationCompleted: no consumer group, read from
    the start of the topic, so every replica sees every end (the items of one evaluation are spread over
    the replicas). An item of an evaluation that ended after it was published starts no new model call
    and, when it fails, is not dead-lettered: nothing is wrong with it, and a retry of the evaluation runs it
    again.

    Items are handled in batches of up to ``inference_concurrency`` records; each gets a worker task of its own
    (at most ``inference_concurrency`` at once), so a slow item never holds up the next records. Returns ``drain``:
    awaited at shutdown, it waits up to :data:`DRAIN_S` for the items in flight."""
    broker.publisher(Topics.OUTPUT_GENERATED, schema=OutputGenerated, title="OutputGenerated")
    limits = limits or ModelLimits()
    ended = ended if ended is not None else EndedEvaluations()

    subscribe_ends: _Subscribe = broker.subscriber(
        Topics.EVALUATION_COMPLETED,
        group_id=None,
        **broadcast_options(settings),
        ack_policy=AckPolicy.ACK_FIRST,
        title="inference:EvaluationCompleted",
        description="Notes each ended evaluation, so its items start no further model call.",
    )

    @subscribe_ends
    @consume(broker, EvaluationCompleted, dead_letter_undecodable=False)  # the reporter's consumer dead-letters it
    async def on_ended(event: EvaluationCompleted) -> None:
        ended.record(event.evaluation_id, str(event.status), event.occurred_at)

    subscribe: _Subscribe = broker.subscriber(
        Topics.SAMPLE_DISPATCHED,
        **consumer_options(settings, "inference"),
        batch=True,
        max_records=settings.inference_concurrency,
        batch_timeout_ms=settings.inference_batch_timeout_ms,
        ack_policy=AckPolicy.ACK_FIRST,
        title="inference:SampleDispatched",
        description="Renders each sample's prompt and calls its model.",
    )
    workers = asyncio.Semaphore(settings.inference_concurrency)
    running: set[asyncio.Task[None]] = set()

    async def run_item(item: Received) -> None:
        event: SampleDispatched = item.event
        tokens = logs.bind(event.evaluation_id, event.tenant_id)
        try:
            with _tracer.start_as_current_span(
                "generate",
                context=context_from_headers(item.headers),
                attributes={"uep.item": event.item_key(), "uep.model": event.target.name},
            ):
                await handle_item(event, item)
        except Exception as exc:
            metrics.HANDLER_ERRORS.labels(Topics.SAMPLE_DISPATCHED, "on_samples", type(exc).__name__).inc()
            log.exception("inference of %s failed; its lease expires and it is dispatched again", event.item_key())
        finally:
            logs.unbind(tokens)
            workers.release()

    async def handle_item(event: SampleDispatched, item: Received) -> None:
        published = published_at(item.timestamp_ms, event)
        watch = ItemWatch(ended, event.evaluation_id, published)
        instruments.observe_queue_wait(published)
        out = await generate_output(
            event,
            backends,
            event.timeout_s or settings.inference_timeout_s,
            limits,
            settings.inference_max_attempts,
            settings.inference_backoff_s,
            settings.inference_max_retry_after_s,
            watch,
        )
        instruments.observe_output(event, out, called=out.error is None or out.error.type != NOT_CALLED)
        await publish_event(broker, out)
        # stored as the item's failed result, and dead-lettered with the reason (not when its evaluation ended)
        if out.error is not None and watch.status() is None:
            await dead_letter(
                broker,
                item.body,
                Topics.SAMPLE_DISPATCHED,
                f"{out.error.type}: {out.error.message}",
                key=event.key(),
                headers=item.headers,
                dlq_id=f"inference:{event.event_id}",
            )

    @subscribe
    @consume(broker, SampleDispatched, batch=True, with_records=True, tracer=_tracer)
    async def on_samples(items: list[Received]) -> None:
        # each item gets a worker of its own and goes on after this returns, so the next records are fetched
        # while these are at the model; at most inference_concurrency items are in this replica at once
        for item in in_publication_order(items):
            await workers.acquire()
            task = asyncio.create_task(run_item(item))
            running.add(task)
            task.add_done_callback(running.discard)

    async def drain() -> None:
        if running:  # the broker is still up: outputs of the items that finish are published
            await asyncio.wait(set(running), timeout=DRAIN_S)

    return drain
