"""Reporter service: ScoreComputed → sample_results (idempotent) → progress → summary + EvaluationCompleted.

Batches of ScoreComputed are stored in one transaction; the offsets are committed only after it commits
(on an error the batch is redelivered, which the idempotent insert makes harmless). Live progress is
mirrored to Redis (hash ``uep:evaluation:<id>``: completed, errors, total) for the gateway.
"""

from __future__ import annotations

import asyncio
import logging

from faststream import AckPolicy
from faststream.kafka import KafkaBroker, KafkaMessage
from opentelemetry import trace

from uep_common.events import EvaluationCompleted, ScoreComputed, Topics
from uep_common.messaging import UndecodableEvent, consumer_options, dead_letter, decode_event, raw_records
from uep_common.outbox import OutboxRelay
from uep_common.telemetry import context_from_headers, tracer
from uep_reporter.leaderboards import record_completed, record_rescored
from uep_reporter.reports import register_report_handlers
from uep_reporter.results import StopLoss, apply_rescores, store_scores
from uep_reporter.settings import ReporterSettings

log = logging.getLogger(__name__)
_tracer = tracer("uep.reporter")


def progress_key(evaluation_id) -> str:
    """Redis key of an evaluation's live progress hash."""
    return f"uep:evaluation:{evaluation_id}"


def register(broker: KafkaBroker, settings: ReporterSettings, sessionmaker, redis, relay: OutboxRelay) -> None:
    """Register the reporter's batch subscriber on ``broker``."""
    stop_loss = StopLoss(settings.stop_loss_error_rate, settings.stop_loss_min_items)
    register_report_handlers(broker, settings, sessionmaker, relay)  # reports on completion and on request
    broker.publisher(Topics.EVALUATION_COMPLETED, schema=EvaluationCompleted, title="EvaluationCompleted")

    @broker.subscriber(
        Topics.SCORE_COMPUTED,
        **consumer_options(settings, "reporter"),
        batch=True,
        max_records=settings.reporter_batch_size,
        batch_timeout_ms=settings.reporter_batch_timeout_ms,
        ack_policy=AckPolicy.NACK_ON_ERROR,
        title="reporter:ScoreComputed",
        description="Stores each item's result once and completes evaluations.",
    )
    async def on_scores(msg: KafkaMessage) -> None:
        events: list[ScoreComputed] = []
        links = []
        for body, headers in raw_records(msg):
            try:
                events.append(decode_event(ScoreComputed, body))
            except UndecodableEvent as exc:
                await dead_letter(broker, body, Topics.SCORE_COMPUTED, str(exc))
                continue
            ctx = trace.get_current_span(context_from_headers(headers)).get_span_context()
            if ctx.is_valid:
                links.append(trace.Link(ctx))
        if not events:
            return
        with _tracer.start_as_current_span("store results", links=links, attributes={"uep.batch_size": len(events)}):
            try:
                async with sessionmaker() as session, session.begin():
                    progress = await store_scores(session, [e for e in events if e.rescore_id is None], stop_loss)
                    rescored = await apply_rescores(session, [e for e in events if e.rescore_id is not None])
            except Exception:
                log.exception("storing %d results failed; the batch will be redelivered", len(events))
                await asyncio.sleep(1.0)
                raise
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
        for p in progress:
            try:
                await redis.hset(
                    progress_key(p.evaluation_id),
                    mapping={"completed": p.completed, "errors": p.errors, "total": p.total},
                )
                await redis.expire(progress_key(p.evaluation_id), 7 * 24 * 3600)
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
