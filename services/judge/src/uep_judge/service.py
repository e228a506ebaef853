"""Judge service: JudgeRequested → judge model calls (through the inference service) → ScoreComputed.

For each item: load the judge configuration snapshot of its evaluation, ask every judge (rubric, reference
or pairwise in both orders; invalid answers re-asked with the parse error, bounded), aggregate the jury,
then record everything in one transaction (:mod:`uep_judge.store`) with the item's ScoreComputed in the
outbox. ``metrics["decided_by"]`` is "judge". A hybrid evaluation's item whose verdict is not final
(no valid verdict, swap-inconsistent, jury disagreement) gets NO ScoreComputed: it is recorded in
``hybrid_routes`` (stage 'human') for the annotators, whose annotation publishes it. An item that cannot be
judged at all gets a ScoreComputed with a ``judge`` error and no score — never an invented one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from faststream import AckPolicy
from faststream.kafka import KafkaBroker, KafkaMessage
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from uep_common.contract.configs import EvaluationType
from uep_common.contract.events import ErrorInfo, JudgeRequested, ScoreComputed, Topics
from uep_common.runtime.consuming import consume
from uep_common.runtime.messaging import consumer_options
from uep_common.runtime.outbox import OutboxRelay
from uep_common.runtime.telemetry import tracer
from uep_judge import instruments
from uep_judge.aggregate import Outcome, pairwise_outcome, rubric_outcome
from uep_judge.client import Generate
from uep_judge.modes import Verdict, compare, grade
from uep_judge.settings import JudgeSettings
from uep_judge.store import Context, ContextError, already_judged, load_context, record
from uep_judge.templates import TemplateError, template_for

log = logging.getLogger(__name__)
_tracer = tracer("uep.judge")
JUDGE_METRIC = "llm_judge"

# What ``broker.subscriber(...)`` returns, as a decorator of a :func:`consume` handler: mypy resolves the call to
# ``Any`` (its overloads are ambiguous given ``**consumer_options(...)``), so it is bound to this type first.
_Subscribe = Callable[[Callable[[KafkaMessage], Awaitable[None]]], object]


def _score(
    event: JudgeRequested,
    metric_name: str,
    metric_version: str,
    outcome: Outcome | None,
    metrics: dict[str, Any],
    error: ErrorInfo | None,
) -> ScoreComputed:
    return ScoreComputed(
        **event.item_fields(),
        benchmark_id=event.benchmark_id,
        model_id=event.model_id,
        metric_name=metric_name,
        metric_version=metric_version,
        is_correct=outcome.is_correct if outcome and error is None else None,
        score=outcome.score if outcome and error is None else None,
        extracted=outcome.extracted if outcome and error is None else None,
        metrics=metrics,
        output=event.output,
        latency_ms=event.latency_ms,
        prompt_tokens=event.prompt_tokens,
        completion_tokens=event.completion_tokens,
        error=error,
        throttled=event.throttled,
    )


async def judge_item(
    event: JudgeRequested, sessionmaker: async_sessionmaker[AsyncSession], generate: Generate
) -> ScoreComputed | None:
    """Judge one item and record the outcome; returns the ScoreComputed staged in the outbox (None when the
    item was judged before, its evaluation is gone, or it went to humans)."""
    async with sessionmaker() as s:
        if await already_judged(s, event):
            log.info("item %s was judged before; skipping the redelivery", event.item_key())
            return None
        ctx: Context | None
        problem: ContextError | None
        try:
            ctx, problem = await load_context(s, event), None
            if ctx is None:
                log.warning("evaluation of %s no longer exists; nothing to judge", event.item_key())
                return None
        except ContextError as exc:
            ctx, problem = None, exc
    base: dict[str, Any] = {"decided_by": "judge"}
    if event.route_reason is not None:
        base["route_reason"] = event.route_reason
        base.update({f"auto_{k}": v for k, v in event.automatic.items() if k in ("metric_name", "extracted", "extraction")})
    verdicts: list[Verdict] = []
    template: tuple[str, str] | None = None
    outcome: Outcome | None = None
    human_reason: str | None = None
    if problem is None and event.output is None:
        problem = ContextError("no_output", "the model gave no output to judge")
    if problem is None:
        # load_context gave a context (or raised, setting problem), and the item has an output
        assert ctx is not None and event.output is not None
        try:
            tpl = template_for(ctx.cfg)
            template = (tpl.name, tpl.version)
            judge_names = ",".join(j.name for j in ctx.judges)
            with _tracer.start_as_current_span(
                "judge item", attributes={"uep.item": event.item_key(), "uep.judges": judge_names}
            ):
                if ctx.cfg.mode == "pairwise":
                    assert ctx.baseline is not None  # load_context raises baseline_missing for pairwise items without one
                    comparisons = await compare(
                        generate, ctx.cfg, tpl, ctx.judges, event.prompt, event.output, ctx.baseline, ctx.reference
                    )
                    verdicts = [v for c in comparisons for v in (c.ab, c.ba)]
                    outcome = pairwise_outcome(ctx.cfg, comparisons)
                else:
                    verdicts = await grade(generate, ctx.cfg, tpl, ctx.judges, event.prompt, event.output, ctx.reference)
                    outcome = rubric_outcome(ctx.cfg, verdicts)
        except TemplateError as exc:
            problem = ContextError("judge_template_error", str(exc))
    if problem is not None:
        metrics = {**base, "judge_invalid": 1}
        score = _score(
            event, JUDGE_METRIC, "-", None, metrics, ErrorInfo(stage="judge", type=problem.kind, message=str(problem)[:2000])
        )
        decision, details = "invalid", metrics
    else:
        assert ctx is not None and template is not None and outcome is not None  # set by the judging above
        metrics = {
            **base,
            "judge_models": judge_names,
            "judge_template": f"{template[0]}/{template[1]}",
            **outcome.metrics,
            "judge_prompt_tokens": sum(a.prompt_tokens or 0 for v in verdicts for a in v.attempts),
            "judge_completion_tokens": sum(a.completion_tokens or 0 for v in verdicts for a in v.attempts),
        }
        details = metrics
        name = f"{JUDGE_METRIC}_{ctx.cfg.mode}"
        if ctx.evaluation_type == EvaluationType.hybrid and outcome.human_reason is not None:
            score, decision, human_reason = None, "human", outcome.human_reason
        elif outcome.valid:
            score, decision = _score(event, name, template[1], outcome, metrics, None), "scored"
        else:
            error = ErrorInfo(stage="judge", type=outcome.error_type, message=outcome.error_message)
            score, decision = _score(event, name, template[1], outcome, metrics, error), "invalid"
    async with sessionmaker() as s, s.begin():
        ok = await record(s, event, ctx, template, verdicts, decision, details, score, human_reason)
    if not ok:
        log.info("item %s was recorded by another writer first", event.item_key())
        return None
    if human_reason is not None:
        log.info("item %s sent to human annotators: %s", event.item_key(), human_reason)
    return score


def register(
    broker: KafkaBroker,
    settings: JudgeSettings,
    sessionmaker: async_sessionmaker[AsyncSession],
    relay: OutboxRelay,
    generate: Generate,
) -> None:
    """Register the judge's subscriber on ``broker`` (ScoreComputed goes out through the outbox ``relay``)."""
    broker.publisher(Topics.SCORE_COMPUTED, schema=ScoreComputed, title="judge:ScoreComputed")

    subscribe: _Subscribe = broker.subscriber(
        Topics.JUDGE_REQUESTED,
        **consumer_options(settings, "judge"),
        max_workers=settings.judge_concurrency,
        ack_policy=AckPolicy.ACK_FIRST,
        title="judge:JudgeRequested",
        description="Grades items with LLM judges (rubric, reference-guided, pairwise; juries) and routes hybrid items.",
    )

    @subscribe
    @consume(broker, JudgeRequested)  # judge_item opens the item's spans
    async def on_request(event: JudgeRequested) -> None:
        start = time.perf_counter()
        score = await judge_item(event, sessionmaker, generate)
        instruments.observe_judged(score, time.perf_counter() - start)
        if score is not None:
            relay.kick()
