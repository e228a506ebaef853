"""Batch subscribers that take a record as soon as it is fetched.

FastStream's batch subscriber polls ``getmany(timeout_ms=batch_timeout_ms)`` and, when a poll comes back empty,
sleeps ``batch_timeout_ms`` more before the next one: a record that arrives during the sleep waits for its end.
:class:`BatchPollingKafkaBroker` (made by :func:`uep_common.runtime.messaging.make_broker`) gives each of its batch
subscribers :func:`get_batch` instead, which polls again at once, so a batch subscriber's ``batch_timeout_ms``
costs no latency and only sets how often an idle loop wakes up. FastStream's own loop is checked by
``tests/unit/test_batch_polling.py``, which fails when an upgrade changes it.
"""

from __future__ import annotations

import asyncio
import time
from itertools import chain
from types import MethodType
from typing import Any

from faststream.kafka import KafkaBroker
from faststream.kafka.subscriber.usecase import BatchSubscriber


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


class BatchPollingKafkaBroker(KafkaBroker):
    """A FastStream Kafka broker whose batch subscribers poll with :func:`get_batch`."""

    async def start(self) -> None:
        """Give the batch subscribers :func:`get_batch`, then start the broker and its subscribers."""
        poll_batches_without_sleep(self)
        await super().start()
