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
broker's start (:class:`PacedKafkaBroker`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from faststream import BaseMiddleware
from faststream.kafka import KafkaBroker

IDLE_BATCH_TIMEOUT_MS = 500
"""Batch wait of a batch subscriber while its process is idle. FastStream's batch loop polls every twice its
batch wait when nothing comes (20–50 ms for uep's: 10–25 wake-ups a second); a score arriving while the loop
sleeps waits up to this once, after a quiet period."""


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
        """Start the broker and its subscribers, then pace the idle batch subscribers."""
        await super().start()
        if self.pacer is not None and self.pacer.idle:
            self.pacer.pace_batches(idle=True)
