"""Scheduler service: EvaluationRequested → admit; ScoreComputed → release leases, settle budgets, adapt
model limits; one allocation task leases free slots by fair queuing (:mod:`uep_scheduler.allocation`),
woken by both and by a reconcile tick, which also re-dispatches expired leases, admits evaluations whose
request event was lost, and creates the due runs of schedules (:mod:`uep_scheduler.schedules`)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime, timedelta

from faststream import AckPolicy
from faststream.kafka import KafkaBroker, KafkaMessage
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from uep_common.contract.events import EvaluationRequested, SampleDispatched, ScoreComputed, Topics
from uep_common.records import exhaustion, settlement
from uep_common.runtime.background import BackgroundLoop
from uep_common.runtime.consuming import consume
from uep_common.runtime.messaging import consumer_options
from uep_common.runtime.outbox import OutboxRelay, StagedMessage
from uep_scheduler import instruments
from uep_scheduler.allocation import PassResult, allocate
from uep_scheduler.capacity import CallTimes, adapt
from uep_scheduler.dispatch import evaluations_to_reconcile, release
from uep_scheduler.schedules import run_due_schedules
from uep_scheduler.settings import SchedulerSettings

log = logging.getLogger(__name__)

# What ``broker.subscriber(...)`` returns, as a decorator of a :func:`consume` handler: mypy resolves the call to
# ``Any`` (its overloads are ambiguous given ``**consumer_options(...)``), so it is bound to this type first.
_Subscribe = Callable[[Callable[[KafkaMessage], Awaitable[None]]], object]


class Scheduler:
    """Dispatch logic bound to a session factory, an outbox relay and settings.

    One background task runs allocation passes: on :meth:`wake` (an admission, released leases) and every
    ``tick_seconds`` (a reconcile pass). Passes of one process never overlap; passes of several replicas
    are serialised by the allocation advisory lock in PostgreSQL.
    """

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], relay: OutboxRelay, settings: SchedulerSettings) -> None:
        self.sm = sessionmaker
        self.relay = relay
        self.settings = settings
        self._pass_lock = asyncio.Lock()
        self._next_reconcile = 0.0
        self._next_orphan_sweep = 0.0
        self._next_full_sweep = 0.0
        self._swept_at: datetime | None = None
        """Clock of the last orphan sweep that saw everything it looked for (the next looks from there)."""
        self._to_admit: set[uuid.UUID] = set()
        self._released = 0
        """Leases released since the last pass."""
        self._refill_at = 1
        """Released leases that wake the allocator (:meth:`refill_threshold` of the last pass)."""
        self._refill_timer: asyncio.TimerHandle | None = None
        self._publishing: set[asyncio.Task[None]] = set()
        self.busy = True
        """An evaluation was running or pending at the last reconcile pass, or a pass since dispatched."""
        self.call_times = CallTimes()
        """Recent call time per model, from the scores: how many items to keep queued at inference."""
        self._admitted: OrderedDict[uuid.UUID, None] = OrderedDict()
        """Evaluations this process admitted lately (bounded): their EvaluationRequested, arriving after the
        NOTIFY admitted them, is skipped without a transaction."""
        self._loop = BackgroundLoop("scheduler-allocation", self._round, self._until_reconcile, error_delay_s=0.2)

    def wake(self) -> None:
        """Ask the allocation task for a pass now."""
        self._loop.wake()

    def refill_threshold(self, in_flight: int) -> int:
        """Released leases worth a pass, given ``in_flight`` leases open after the last one:
        ``max(1, floor(refill_fraction × in_flight))``."""
        return max(1, int(self.settings.refill_fraction * in_flight))

    def _on_released(self, n: int) -> None:
        """``n`` leases were released: wake the allocator when enough have been since the last pass, else make
        sure a pass comes within ``refill_delay_s``."""
        self._released += n
        if self._released >= self._refill_at:
            self.wake()
        elif self._refill_timer is None:
            self._refill_timer = asyncio.get_running_loop().call_later(self.settings.refill_delay_s, self.wake)

    def _remember(self, evaluation_ids: Iterable[uuid.UUID]) -> None:
        for evaluation_id in evaluation_ids:
            self._admitted[evaluation_id] = None
            self._admitted.move_to_end(evaluation_id)
        while len(self._admitted) > 10_000:
            self._admitted.popitem(last=False)

    async def request_admission(self, evaluation_id: uuid.UUID) -> None:
        """Admit ``evaluation_id`` (pending → running, all arms of an A/B experiment) in the next allocation
        pass, in that pass's transaction (one transaction from a wake-up to its first dispatch); woken at once.
        The one way in for the gateway's NOTIFY, EvaluationRequested and the reconcile pass; an evaluation
        this process admitted lately is skipped without a transaction."""
        if evaluation_id not in self._admitted:
            self._to_admit.add(evaluation_id)
            self.wake()

    async def allocate_once(
        self, reconcile: bool = False, orphans_before: datetime | None = None, orphans_since: datetime | None = None
    ) -> PassResult:
        """One allocation pass in its own transaction, admitting the evaluations of :meth:`request_admission`
        first; publishes the SampleDispatched rows it claimed, and kicks the relay for an evaluation it ended."""
        async with self._pass_lock:
            to_admit, self._to_admit = sorted(self._to_admit), set()
            start = time.perf_counter()
            try:
                async with self.sm() as s, s.begin():
                    result = await allocate(
                        s,
                        self.settings,
                        reconcile=reconcile,
                        orphans_before=orphans_before,
                        admit_first=to_admit,
                        call_seconds=self.call_times.as_dict(),
                        orphans_since=orphans_since,
                    )
            except BaseException:
                self._to_admit.update(to_admit)  # the next pass tries again
                raise
            self._remember(result.admitted)
            self._released = 0
            self._refill_at = self.refill_threshold(result.in_flight)
            if self._refill_timer is not None:
                self._refill_timer.cancel()
                self._refill_timer = None
        instruments.observe_pass(
            sum(result.leased.values()), sum(result.redispatched.values()), reconcile, time.perf_counter() - start
        )
        for evaluation_id in set(to_admit) - set(result.admitted):
            log.info("evaluation %s not admitted (not pending or running)", evaluation_id)
        if result.outbox:  # published now, beside the next pass; the relay takes over what fails
            task = asyncio.create_task(self._publish(result.outbox))
            self._publishing.add(task)
            task.add_done_callback(self._publishing.discard)
        if result.exhausted:
            await self.finish_exhausted(result.exhausted)
        return result

    async def finish_exhausted(self, evaluation_ids: list[uuid.UUID]) -> None:
        """End the evaluations whose budget ran out with every kept item stored (records layer, one transaction
        after the allocation pass); their EvaluationCompleted rows are left to the outbox relay, kicked now."""
        async with self.sm() as s, s.begin():
            ended = [e for e in evaluation_ids if await exhaustion.finish_exhausted(s, e)]
        if ended:
            log.info("budget exhausted, ended: %s", ", ".join(map(str, ended)))
            self.relay.kick()

    async def _publish(self, rows: list[StagedMessage]) -> None:
        try:
            await self.relay.publish_claimed(rows)
        except Exception:  # the rows keep their claim; relays publish them when it ends
            log.exception("publishing %d claimed SampleDispatched rows failed", len(rows))

    async def on_scored(self, scores: list[ScoreComputed]) -> None:
        """Release the leases of scored items, settle their budget reservations, adapt model limits, learn the
        models' call times, wake the allocator."""
        self.call_times.observe(scores)
        items = [(e.evaluation_id, e.sample_id, e.repeat, e.arm) for e in scores]
        leased_at: list[datetime] = []
        async with self.sm() as s, s.begin():
            evaluations = await release(s, items, leased_at)
            await settlement.settle_scores(s, scores)
            if self.settings.adaptive_concurrency:
                moved = await adapt(s, scores, self.settings.default_model_capacity)
                if moved:
                    log.info("adaptive concurrency: %s", moved)
        instruments.observe_released(leased_at)  # committed: end-to-end latency of each released lease
        if evaluations:
            self._on_released(max(1, len(leased_at)))

    async def reconcile_once(self) -> bool:
        """One reconcile pass: admit stale pending evaluations, create due scheduled runs, allocate with
        expired-lease re-dispatch (and, every ``orphan_sweep_seconds``, re-dispatch of items scored but never
        stored). Returns whether anything is under way (an evaluation running or pending, a run created)."""
        async with self.sm() as s:
            running, pending = await evaluations_to_reconcile(s, self.settings.admit_pending_after_seconds)
            exhausted = await exhaustion.exhausted_and_done(s) if running else []
        if exhausted:  # a pass exhausted them, and its ending was cut short (a crash between the two transactions)
            await self.finish_exhausted(exhausted)
        self._to_admit.update(pending)  # admitted by the pass below, in its transaction
        created = await run_due_schedules(self.sm)
        if created:
            self.relay.kick()
        orphans_before = orphans_since = None
        sweep_at = datetime.now(UTC)
        full = self._swept_at is None or time.monotonic() >= self._next_full_sweep
        if time.monotonic() >= self._next_orphan_sweep:
            self._next_orphan_sweep = time.monotonic() + self.settings.orphan_sweep_seconds
            orphans_before = sweep_at - timedelta(seconds=self.settings.orphan_grace_seconds)
            # after a first full sweep, only what became an orphan since the last one (a margin for the clocks)
            orphans_since = None if full or self._swept_at is None else self._swept_at - timedelta(seconds=5)
        result = await self.allocate_once(reconcile=True, orphans_before=orphans_before, orphans_since=orphans_since)
        if orphans_before is not None and not result.redispatch_capped:  # capped: look at the same window again
            self._swept_at = sweep_at
            if full:
                self._next_full_sweep = time.monotonic() + self.settings.orphan_full_sweep_seconds
        return bool(running or pending or created or result.dispatched)

    def _until_reconcile(self) -> float:
        return self._next_reconcile - time.monotonic()

    async def _round(self) -> None:
        """A reconcile pass when one is due, else an allocation pass. Reconcile passes come every
        ``tick_seconds`` while work is under way and every ``idle_tick_seconds`` when there is none; an
        allocation pass that dispatched or admitted brings the next one back to ``tick_seconds``."""
        if time.monotonic() >= self._next_reconcile:
            self.busy = await self.reconcile_once()
            self._next_reconcile = time.monotonic() + self.tick()
        else:
            result = await self.allocate_once()
            if result.dispatched or result.admitted:
                self.busy = True
                self._next_reconcile = min(self._next_reconcile, time.monotonic() + self.settings.tick_seconds)

    def tick(self) -> float:
        """Period of the periodic passes now: ``tick_seconds`` while busy, ``idle_tick_seconds`` (if longer)
        while nothing runs."""
        return self.settings.tick_seconds if self.busy else max(self.settings.tick_seconds, self.settings.idle_tick_seconds)

    def start(self) -> None:
        """Start the allocation task."""
        self._loop.start()

    async def stop(self) -> None:
        """Stop the allocation task; wait for the publications under way."""
        await self._loop.stop()
        while self._publishing:
            await asyncio.gather(*list(self._publishing), return_exceptions=True)


def register(broker: KafkaBroker, settings: SchedulerSettings, scheduler: Scheduler) -> None:
    """Register the scheduler's subscribers and (documentation) publishers on ``broker``."""
    broker.publisher(Topics.SAMPLE_DISPATCHED, schema=SampleDispatched, title="SampleDispatched")

    subscribe_requests: _Subscribe = broker.subscriber(
        Topics.EVALUATION_REQUESTED,
        **consumer_options(settings, "scheduler.requests"),
        ack_policy=AckPolicy.NACK_ON_ERROR,
        title="scheduler:EvaluationRequested",
        description="Admits an evaluation and dispatches its first items.",
    )

    @subscribe_requests
    @consume(broker, EvaluationRequested)
    async def on_requested(event: EvaluationRequested) -> None:
        await scheduler.request_admission(event.evaluation_id)

    subscribe_scores: _Subscribe = broker.subscriber(
        Topics.SCORE_COMPUTED,
        **consumer_options(settings, "scheduler.scores"),
        batch=True,
        max_records=500,
        batch_timeout_ms=settings.scores_batch_timeout_ms,
        ack_policy=AckPolicy.NACK_ON_ERROR,
        title="scheduler:ScoreComputed",
        description="Releases the leases of scored items and dispatches the next ones.",
    )

    @subscribe_scores
    # The reporter dead-letters undecodable scores (here they are skipped); their leases expire and re-dispatch.
    @consume(
        broker,
        ScoreComputed,
        batch=True,
        dead_letter_undecodable=False,
        span="release leases",
        attributes=lambda events: {"uep.batch_size": len(events)},
        item_span="release lease",  # in each item's own trace, for the batch's duration
        item_attributes=lambda e: {"uep.item": e.item_key()},
    )
    async def on_scores(events: list[ScoreComputed]) -> None:
        await scheduler.on_scored([e for e in events if e.rescore_id is None])  # a re-score holds no lease
