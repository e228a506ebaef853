"""Scorer service: OutputGenerated → ScoreComputed (or JudgeRequested for judge-type benchmarks).

An output that carries an inference error is passed on as a ScoreComputed with that error and no score;
a scoring failure becomes a ScoreComputed with a ``scoring`` error. No output is ever dropped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from faststream import AckPolicy
from faststream.kafka import KafkaBroker, KafkaMessage
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from uep_common.contract.events import JudgeRequested, OutputGenerated, RescoreRequested, ScoreComputed, Topics
from uep_common.runtime.consuming import consume, within_item
from uep_common.runtime.messaging import consumer_options, publish_event
from uep_common.runtime.telemetry import tracer
from uep_scorer import instruments
from uep_scorer.references import ReferenceStore
from uep_scorer.rescoring import rescore
from uep_scorer.scoring import score_output
from uep_scorer.settings import ScorerSettings

log = logging.getLogger(__name__)
_tracer = tracer("uep.scorer")

# What ``broker.subscriber(...)`` returns, as a decorator of a :func:`consume` handler: mypy resolves the call to
# ``Any`` (its overloads are ambiguous given ``**consumer_options(...)``), so it is bound to this type first.
_Subscribe = Callable[[Callable[[KafkaMessage], Awaitable[None]]], object]


def register(
    broker: KafkaBroker,
    settings: ScorerSettings,
    refs: ReferenceStore,
    sessionmaker: async_sessionmaker[AsyncSession] | None = None,
) -> None:
    """Register the scorer's subscribers and publishers on ``broker``."""
    broker.publisher(Topics.SCORE_COMPUTED, schema=ScoreComputed, title="ScoreComputed")
    broker.publisher(Topics.JUDGE_REQUESTED, schema=JudgeRequested, title="JudgeRequested")

    subscribe_outputs: _Subscribe = broker.subscriber(
        Topics.OUTPUT_GENERATED,
        **consumer_options(settings, "scorer"),
        batch=True,
        max_records=settings.scorer_batch_max,
        batch_timeout_ms=settings.scorer_batch_timeout_ms,
        ack_policy=AckPolicy.ACK_FIRST,
        title="scorer:OutputGenerated",
        description="Scores each output with its benchmark's metric.",
    )
    limit = asyncio.Semaphore(settings.scorer_concurrency)

    async def score_one(event: OutputGenerated) -> None:
        async with limit:
            with within_item(event):  # its span is current: the event published continues the item's trace
                start = time.perf_counter()
                out = await score_output(event, refs)
                instruments.observe_scored(out, time.perf_counter() - start)
                await publish_event(broker, out)

    @subscribe_outputs
    @consume(
        broker,
        OutputGenerated,
        batch=True,
        span="score outputs",
        attributes=lambda events: {"uep.batch_size": len(events)},
        item_span="score sample",
        item_attributes=lambda e: {"uep.item": e.item_key()},
        tracer=_tracer,
    )
    async def on_outputs(events: list[OutputGenerated]) -> None:
        # every output of the batch is scored and published, scorer_concurrency at a time, even when one fails
        results = await asyncio.gather(*(score_one(e) for e in events), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        for failure in failures:
            log.error("scoring or publishing an output failed: %r", failure)
        if failures:
            raise failures[0]

    subscribe_rescores: _Subscribe = broker.subscriber(
        Topics.RESCORE_REQUESTED,
        **consumer_options(settings, "scorer.rescore"),
        ack_policy=AckPolicy.NACK_ON_ERROR,
        title="scorer:RescoreRequested",
        description="Scores an evaluation's stored outputs again with the current metric versions.",
    )

    @subscribe_rescores
    @consume(broker, RescoreRequested, span="rescore", attributes=lambda e: {"uep.rescore_id": str(e.rescore_id)}, tracer=_tracer)
    async def on_rescore(event: RescoreRequested) -> None:
        assert sessionmaker is not None, "rescoring needs the sessionmaker (main passes the runtime's)"
        n = await rescore(event, sessionmaker, refs, broker)
        log.info("rescore %s of evaluation %s: %d items re-scored", event.rescore_id, event.evaluation_id, n)
