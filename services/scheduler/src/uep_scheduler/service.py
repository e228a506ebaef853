"""Scheduler service: EvaluationRequested → admit → bounded dispatch; ScoreComputed → release + top up;
a reconcile loop re-dispatches expired leases and admits evaluations whose request event was lost."""

from __future__ import annotations

import asyncio
import logging
import uuid

from faststream import AckPolicy
from faststream.kafka import KafkaBroker, KafkaMessage

from uep_common import budget
from uep_common.events import EvaluationRequested, SampleDispatched, ScoreComputed, Topics
from uep_common.messaging import UndecodableEvent, consumer_options, decode_event, decode_or_dead_letter, raw_records
from uep_common.outbox import OutboxRelay
from uep_scheduler.dispatch import admit, evaluations_to_reconcile, release, top_up
from uep_scheduler.settings import SchedulerSettings

log = logging.getLogger(__name__)


class Scheduler:
    """Dispatch logic bound to a session factory, an outbox relay and settings."""

    def __init__(self, sessionmaker, relay: OutboxRelay, settings: SchedulerSettings) -> None:
        self.sm = sessionmaker
        self.relay = relay
        self.settings = settings
        self._task: asyncio.Task | None = None

    async def top_up(self, evaluation_id: uuid.UUID, admit_first: bool = False, redispatch_expired: bool = True) -> int:
        """Admit (optionally) and top up one evaluation in its own transaction."""
        async with self.sm() as s, s.begin():
            if admit_first and not await admit(s, evaluation_id):
                return 0
            n = await top_up(
                s, evaluation_id, self.settings.max_in_flight_per_evaluation, self.settings.lease_seconds,
                redispatch_expired,
            )
        if n:
            self.relay.kick()
        return n

    async def on_scored(self, scores: list[ScoreComputed]) -> None:
        """Release the leases of scored items, settle their budget reservations, top up their evaluations."""
        items = [(e.evaluation_id, e.sample_id, e.repeat, e.arm) for e in scores]
        async with self.sm() as s, s.begin():
            evaluations = await release(s, items)
            await budget.settle_scores(s, scores)
        for evaluation_id in sorted(evaluations):
            await self.top_up(evaluation_id, redispatch_expired=False)

    async def reconcile_once(self) -> None:
        """One pass of the reconcile loop."""
        async with self.sm() as s:
            running, pending = await evaluations_to_reconcile(s, self.settings.admit_pending_after_seconds)
        for evaluation_id in pending:
            await self.top_up(evaluation_id, admit_first=True)
        for evaluation_id in running:
            await self.top_up(evaluation_id)

    async def _loop(self) -> None:
        while True:
            try:
                await self.reconcile_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("reconcile pass failed")
            await asyncio.sleep(self.settings.tick_seconds)

    def start(self) -> None:
        """Start the reconcile loop."""
        self._task = asyncio.create_task(self._loop(), name="scheduler-reconcile")

    async def stop(self) -> None:
        """Stop the reconcile loop."""
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass


def register(broker: KafkaBroker, settings: SchedulerSettings, scheduler: Scheduler) -> None:
    """Register the scheduler's subscribers and (documentation) publishers on ``broker``."""
    broker.publisher(Topics.SAMPLE_DISPATCHED, schema=SampleDispatched, title="SampleDispatched")

    @broker.subscriber(
        Topics.EVALUATION_REQUESTED,
        **consumer_options(settings, "scheduler.requests"),
        ack_policy=AckPolicy.NACK_ON_ERROR,
        title="scheduler:EvaluationRequested",
        description="Admits an evaluation and dispatches its first items.",
    )
    async def on_requested(msg: KafkaMessage) -> None:
        event = await decode_or_dead_letter(broker, EvaluationRequested, msg, Topics.EVALUATION_REQUESTED)
        if event is None:
            return
        n = await scheduler.top_up(event.evaluation_id, admit_first=True)
        log.info("evaluation %s admitted, %d items dispatched", event.evaluation_id, n)

    @broker.subscriber(
        Topics.SCORE_COMPUTED,
        **consumer_options(settings, "scheduler.scores"),
        batch=True,
        max_records=500,
        batch_timeout_ms=20,
        ack_policy=AckPolicy.NACK_ON_ERROR,
        title="scheduler:ScoreComputed",
        description="Releases the leases of scored items and dispatches the next ones.",
    )
    async def on_scores(msg: KafkaMessage) -> None:
        items = []
        for body, _ in raw_records(msg):
            try:
                ev = decode_event(ScoreComputed, body)
            except UndecodableEvent:
                continue  # the reporter dead-letters undecodable scores; the lease expires and re-dispatches
            if ev.rescore_id is not None:
                continue  # a re-score of a stored output holds no lease
            items.append(ev)
        await scheduler.on_scored(items)
