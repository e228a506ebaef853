"""Long-poll pacing of a process's Kafka consumers: short fetch waits while messages flow, long ones when idle.

A consumer's fetch is a long poll: the broker holds it up to ``fetch_max_wait_ms`` when there is nothing to
return. Every idle consumer therefore costs one fetch round trip per wait, on both sides. Apache Kafka answers a
waiting fetch as soon as data arrives, so there the wait costs no latency; tansu (the local stack's broker)
answers only when the wait ends, so there a long wait is latency (about half of it per hop, measured in the
broker research note). Pacing gets both: while this process receives or publishes messages its consumers
fetch with ``kafka_fetch_max_wait_ms``; after ``kafka_idle_after_s`` with neither, every consumer's wait becomes
``kafka_idle_fetch_max_wait_ms``, and the first message received or published brings them all back at once.
On tansu the first message after an idle period therefore waits up to about half the idle wait per hop; on
Kafka nothing is lost.

:class:`FetchPacer` is fed by a broker middleware (:meth:`FetchPacer.middleware`, installed by
:func:`uep_common.messaging.make_broker`) and sets the wait on each consumer of the broker's subscribers. The
wait of a running aiokafka consumer is not a public setting: it is the attribute ``_fetch_max_wait_ms`` of the
consumer and of its fetcher, which reads it for every fetch request it builds (aiokafka 0.14;
``tests/unit/test_fetch_pacing.py`` fails when an upgrade moves it). Consumers start with the idle wait, so an
idle process that never sees a message never polls fast. Batch subscribers get a longer batch wait while idle
too (:data:`IDLE_BATCH_TIMEOUT_MS`; FastStream's ``batch_timeout_ms``, read by its loop each round), from the
broker's start (:class:`PacedKafkaBroker`), and their loop polls again at once after an empty poll
(:func:`get_batch`), so the batch wait costs no latency and only sets how often an empty loop wakes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from itertools import chain
from types import MethodType
from typing import Any

from faststream import BaseMiddleware
from faststream.kafka import KafkaBroker
from faststream.kafka.subscriber.usecase import BatchSubscriber

IDLE_BATCH_TIMEOUT_MS = 500
"""Batch wait of a batch subscriber while its process is idle: one empty poll of its loop waits this long (see
:func:`get_batch`; a record that comes meanwhile is taken at once)."""


async def get_batch(self: BatchSubscriber, consumer: Any) -> tuple[Any, ...]:
    """``get_msg`` of a FastStream batch subscriber without the sleep after an empty poll.

    FastStream's own waits ``batch_timeout_ms`` for records (``getmany`` returns as soon as there are some) and,
    when none came, sleeps ``batch_timeout_ms`` more before the next poll: two wake-ups per round, and a record
    that arrives during the sleep waits for its end. This one polls again at once, so a record is taken as soon
    as the consumer's fetcher has it and an empty round costs one wake-up; a poll that returns empty early (the
    consumer closing, a fetch error) still waits out the rest of the period, so the loop never spins.
    Returns the records of one ``getmany`` (at most ``max_records``), in partition order.
    """
    t0 = time.monotonic()
    messages = await consumer.getmany(timeout_ms=self.batch_timeout_ms, max_records=self.max_records)
    if messages:
        return tuple(chain(*messages.values()))
    left = self.batch_timeout_ms / 1000 - (time.monotonic() - t0)
    if left > 0.001:
        await asyncio.sleep(left)
    return ()


def poll_batches_without_sleep(broker: KafkaBroker) -> int:
    """Give every batch subscriber of ``broker`` :func:`get_batch` as its ``get_msg``; returns how many."""
    n = 0
    for sub in broker.subscribers:
        if isinstance(sub, BatchSubscriber):
            sub.get_msg = MethodType(get_batch, sub)  # type: ignore[method-assign]
            n += 1
    return n


class FetchPacer:
    """Sets the fetch wait of every consumer of ``broker`` to ``busy_ms`` while messages flow and to ``idle_ms``
    after ``idle_after_s`` seconds without one (see the module docstring). ``broker`` may be given after
    construction (the broker takes the pacer's middleware when it is built). A subscriber whose topics are all in
    ``steady_topics`` is left alone: its consumer keeps the wait it started with (the idle one) whatever flows."""

    def __init__(
        self,
        busy_ms: int,
        idle_ms: int,
        idle_after_s: float,
        broker: KafkaBroker | None = None,
        steady_topics: frozenset[str] = frozenset(),
    ) -> None:
        self.busy_ms = busy_ms
        self.idle_ms = idle_ms
        self.idle_after_s = idle_after_s
        self.broker = broker
        self.steady_topics = steady_topics
        self.idle = True
        """Consumers have the idle wait (the state at start)."""
        self._batch_waits: dict[int, int] = {}
        """Each batch subscriber's own batch wait (by ``id``), while it has the idle one."""
        self._last = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def paced(self, sub: Any) -> bool:
        """Whether subscriber ``sub`` follows the pacer (not every one of its topics is a steady topic)."""
        topics = set(getattr(sub, "topic_names", ()) or ())
        return not topics or not topics <= self.steady_topics

    def consumers(self) -> Iterator[Any]:
        """The aiokafka consumers of the broker's paced subscribers (started or not)."""
        for sub in self.broker.subscribers if self.broker is not None else ():
            if not self.paced(sub):
                continue
            for consumer in (getattr(sub, "consumer", None), *getattr(sub, "consumer_subgroup", ())):
                if consumer is not None:
                    yield consumer

    def apply(self, wait_ms: int) -> int:
        """Give every consumer the fetch wait ``wait_ms``; returns how many were set."""
        n = 0
        for consumer in self.consumers():
            for holder in (consumer, getattr(consumer, "_fetcher", None)):
                if holder is not None and hasattr(holder, "_fetch_max_wait_ms"):
                    holder._fetch_max_wait_ms = wait_ms
            n += 1
        return n

    def pace_batches(self, idle: bool) -> None:
        """Give every batch subscriber (FastStream's ``batch_timeout_ms``) :data:`IDLE_BATCH_TIMEOUT_MS` when
        ``idle`` (if longer than its own), else its own wait back; a subscriber of steady topics only ever gets
        the idle one."""
        for sub in self.broker.subscribers if self.broker is not None else ():
            own = getattr(sub, "batch_timeout_ms", None)
            if not isinstance(own, int):
                continue
            sub_idle = idle or not self.paced(sub)
            if sub_idle and own < IDLE_BATCH_TIMEOUT_MS:
                self._batch_waits[id(sub)] = own
                setattr(sub, "batch_timeout_ms", IDLE_BATCH_TIMEOUT_MS)  # noqa: B010 - not on the base type
            elif not sub_idle and id(sub) in self._batch_waits:
                setattr(sub, "batch_timeout_ms", self._batch_waits.pop(id(sub)))  # noqa: B010

    def touch(self) -> None:
        """A message was received or published: back to the busy wait if idle, and idle again only after
        ``idle_after_s`` without another."""
        self._last = time.monotonic()
        if self.idle:
            self.idle = False
            self.apply(self.busy_ms)
            self.pace_batches(idle=False)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.idle_after_s, self._check)

    def _check(self) -> None:
        self._timer = None
        quiet = time.monotonic() - self._last
        if quiet >= self.idle_after_s:
            self.idle = True
            self.apply(self.idle_ms)
            self.pace_batches(idle=True)
        else:
            self._timer = asyncio.get_running_loop().call_later(self.idle_after_s - quiet, self._check)

    def middleware(self) -> Callable[..., BaseMiddleware]:
        """A FastStream broker middleware (factory) that calls :meth:`touch` for every message received and
        every publish."""
        pacer = self

        class Pace(BaseMiddleware):
            async def on_receive(self) -> None:
                pacer.touch()

            async def publish_scope(self, call_next: Callable[[Any], Awaitable[Any]], cmd: Any) -> Any:
                pacer.touch()
                return await call_next(cmd)

        return Pace


class PacedKafkaBroker(KafkaBroker):
    """A FastStream Kafka broker whose batch subscribers start with the idle batch wait of its ``pacer`` (set by
    :func:`uep_common.messaging.make_broker`; None: no pacing), as its consumers start with the idle fetch wait."""

    pacer: FetchPacer | None = None

    async def start(self) -> None:
        """Start the broker and its subscribers (batch ones with :func:`get_batch`), then pace the idle batch
        subscribers."""
        poll_batches_without_sleep(self)
        await super().start()
        if self.pacer is not None and self.pacer.idle:
            self.pacer.pace_batches(idle=True)
