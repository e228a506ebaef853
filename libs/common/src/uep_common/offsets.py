"""Offset watchdog: a consumer whose position lies past the end of its partition's log is moved back to
the start of the log.

Apache Kafka answers a fetch beyond the log end with OFFSET_OUT_OF_RANGE and the client resets by its
``auto_offset_reset`` policy (``earliest`` in uep). A broker that loses its log — tansu keeps messages in
memory, so a restart empties every topic — may instead answer such fetches with empty batches while the
consumer keeps its old in-memory position (and even commits it): the consumer then waits forever while new
messages arrive below its position. The watchdog applies the same ``earliest`` reset the client would have:
every ``interval_s`` it compares each assigned partition's position with the partition's end offset and
seeks to the beginning where position > end + :data:`SLACK`. On a healthy broker that never holds, so the
watchdog never moves a consumer.

Duplicates this may cause are absorbed by the idempotent consumers (PostgreSQL is the record).
"""

from __future__ import annotations

import asyncio
import logging

from faststream.kafka import KafkaBroker

log = logging.getLogger(__name__)

SLACK = 1
"""Positions up to one past the reported end are normal: tansu reports the last offset where Kafka reports
the high watermark (last + 1). A broker that lost its log is behind by far more than that."""


async def reset_overrun_positions(broker: KafkaBroker) -> int:
    """One pass over ``broker``'s started subscribers; returns how many partitions were reset.

    Errors of one consumer (e.g. while the broker is down) are logged at debug level and skipped."""
    resets = 0
    for sub in broker.subscribers:
        consumer = getattr(sub, "consumer", None)
        if consumer is None:
            continue
        try:
            assigned = list(consumer.assignment())
            if not assigned:
                continue
            ends = await consumer.end_offsets(assigned)
            for tp in assigned:
                position = await consumer.position(tp)
                end = ends.get(tp)
                if end is not None and position > end + SLACK:
                    log.warning("%s: position %d past the log end %d (broker lost its log?): seeking to the beginning",
                                tp, position, end)
                    await consumer.seek_to_beginning(tp)
                    resets += 1
        except Exception as exc:  # noqa: BLE001 - transient while the broker restarts; try again next pass
            log.debug("offset watchdog: %s", exc)
    return resets


class OffsetWatchdog:
    """Runs :func:`reset_overrun_positions` every ``interval_s`` seconds (a background task)."""

    def __init__(self, broker: KafkaBroker, interval_s: float = 5.0) -> None:
        self.broker, self.interval_s = broker, interval_s
        self._task: asyncio.Task | None = None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await reset_overrun_positions(self.broker)

    async def start(self) -> None:
        """Start the loop (idempotent)."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="offset-watchdog")

    async def stop(self) -> None:
        """Stop the loop."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
