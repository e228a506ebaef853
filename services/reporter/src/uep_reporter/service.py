"""Reporter service: ScoreComputed → sample_results (idempotent) → progress → summary + EvaluationCompleted.

Batches of ScoreComputed are stored in one transaction; the offsets are committed only after it commits
(on an error the batch is redelivered, which the idempotent insert makes harmless). Live progress is
mirrored to Redis (:mod:`uep_common.runtime.progress`) for the gateway.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from faststream import AckPolicy
from faststream.kafka import KafkaBroker
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from uep_common.contract.events import EvaluationCompleted, ScoreComputed, Topics
from uep_common.runtime.consuming import consume, within_item
from uep_common.runtime.messaging import consumer_options
from uep_common.runtime.outbox import OutboxRelay
from uep_common.runtime.progress import write_progress
from uep_common.runtime.telemetry import tracer
from uep_reporter import instruments
from uep_reporter.leaderboards import record_completed, record_rescored
from uep_reporter.reports import Subscribe, register_report_handlers
from uep_reporter.results import StopLoss, apply_rescores, store_scores
from uep_reporter.settings import ReporterSettings

log = logging.getLogger(__name__)
_tracer = tracer("uep.reporter")

if TYPE_CHECKING:
    from redis.asyncio import Redis


def register(
    broker: KafkaBroker,
    settings: ReporterSettings,
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: Redis,
    relay: OutboxRelay,
) -> None:
    """Register the reporter's batch subscriber on ``broker``."""
    stop_loss = StopLoss(settings.stop_loss_error_rate, settings.stop_loss_min_items)
    register_report_handlers(broker, settings, sessionmaker, relay)  # reports on completion and on request
    broker.publisher(Topics.EVALUATION_COMPLETED, schema=EvaluationCompleted, title="EvaluationCompleted")

    subscribe_scores: Subscribe = broker.subscriber(
        Topics.SCORE_COMPUTED,
        **consumer_options(settings, "reporter"),
        batch=True,
        max_records=settings.reporter_batch_size,
        batch_timeout_ms=settings.reporter_batch_timeout_ms,
        ack_policy=AckPolicy.NACK_ON_ERROR,
        title="reporter:ScoreComputed",
        description="Stores each item's result once and completes evaluations.",
    )

    @subscribe_scores
    @consume(
        broker,
        ScoreComputed,
        batch=True,
        span="store results",  # linked to every stored score's producer span
        attributes=lambda events: {"uep.batch_size": len(events)},
        tracer=_tracer,
        item_span="store result",  # in each item's own trace, for the batch's duration
        item_attributes=lambda e: {"uep.item": e.item_key()},
    )
    async def on_scores(events: list[ScoreComputed]) -> None:
        start = time.perf_counter()
        try:
            async with sessionmaker() as session, session.begin():
                progress = await store_scores(session, [e for e in events if e.rescore_id is None], stop_loss)
                rescored = await apply_rescores(session, [e for e in events if e.rescore_id is not None])
        except Exception:
            log.exception("storing %d results failed; the batch will be redelivered", len(events))
            await asyncio.sleep(1.0)
            raise
        instruments.observe_stored(
            len(events), time.perf_counter() - start, [p.finished.status.value for p in progress if p.finished]
        )
        if any(p.finished for p in progress):
            relay.kick()
        # Leaderboard score + board snapshot of each newly completed (or rescored) evaluation; the
        # LeaderboardReconciler records whatever a failure here leaves out.
        await record_completed(
            sessionmaker, [p.evaluation_id for p in progress if p.finished and p.finished.status == "completed"]
        )
        if rescored:
            await record_rescored(sessionmaker, rescored)
        for rescore_id in rescored:
            log.info("rescore %s completed", rescore_id)
        last = {e.evaluation_id: e for e in events}  # progress is written in its evaluation's trace
        for p in progress:
            try:
                with within_item(last.get(p.evaluation_id)):
                    await write_progress(redis, p.evaluation_id, p.completed, p.errors, p.total)
            except Exception:
                log.warning("could not update live progress in Redis", exc_info=True)
            if p.finished:
                s = p.finished.summary
                log.info(
                    "evaluation %s %s: accuracy=%s n=%s errors=%s",
                    p.evaluation_id,
                    p.finished.status.value,
                    s.accuracy if s else None,
                    s.n if s else 0,
                    s.errors if s else 0,
                )
