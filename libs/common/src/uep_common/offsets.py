"""Offset watchdog: a consumer whose position lies past its partition's high watermark is moved back to
the start of the log.

Apache Kafka answers a fetch beyond the log end with OFFSET_OUT_OF_RANGE and the client resets by its
``auto_offset_reset`` policy (``earliest`` in uep). A broker that loses its log — tansu keeps messages in
memory, so a restart empties every topic — instead answers such fetches with empty batches while the
consumer keeps its old in-memory position (and commits it again when it rejoins the new group): the
consumer would wait forever while new messages arrive below its position.

The watchdog applies the reset the client would have applied. Every ``interval_s`` it compares each
assigned partition's position with the high watermark of that partition's latest fetch response
(``AIOKafkaConsumer.highwater``). On any broker a consumer's position never exceeds the high watermark
it was fetched under, so ``position > highwater`` only holds when the log was lost; it must hold on two
passes in a row at the same position before the partition is reset (to the log start, by ListOffsets
"earliest"). ``end_offsets()`` (ListOffsets "latest") is not used: tansu answers it with the base offset
of the last batch, behind the real end (measured: 1 and 30 where the high watermark was 29 and 36).

Messages redelivered by a reset are absorbed by the idempotent consumers (PostgreSQL is the record).
"""

from __future__ import annotations

import logging

from faststream.kafka import KafkaBroker

from uep_common.background import BackgroundLoop

log = logging.getLogger(__name__)


class OffsetWatchdog:
    """Resets partitions whose position stays past the high watermark (see the module docstring).

    Args:
        broker: the service's FastStream broker; every started subscriber's consumer is checked.
        interval_s: seconds between passes (a lost log is noticed within two passes).
    """

    def __init__(self, broker: KafkaBroker, interval_s: float = 3.0) -> None:
        self.broker = broker
        self._suspect: dict[tuple[int, object], int] = {}
        self._loop = BackgroundLoop("offset-watchdog", self.check_once, interval_s)
        self.resets = 0

    async def check_once(self) -> int:
        """One pass over the subscribers; returns how many partitions were reset in it.

        A consumer whose calls fail (the broker is down) is skipped until the next pass."""
        resets = 0
        seen: dict[tuple[int, object], int] = {}
        for sub in self.broker.subscribers:
            consumer = getattr(sub, "consumer", None)
            if consumer is None:
                continue
            try:
                for tp in list(consumer.assignment()):
                    highwater = consumer.highwater(tp)
                    if highwater is None:
                        continue
                    position = await consumer.position(tp)
                    if position <= highwater:
                        continue
                    key = (id(consumer), tp)
                    if self._suspect.get(key) != position:
                        seen[key] = position  # first sighting: confirm on the next pass
                        continue
                    log.warning(
                        "%s: position %d past the high watermark %d (the broker lost its log): seeking to the beginning",
                        tp,
                        position,
                        highwater,
                    )
                    await consumer.seek_to_beginning(tp)
                    resets += 1
            except Exception as exc:  # noqa: BLE001 - transient while the broker restarts; next pass retries
                log.debug("offset watchdog: %s", exc)
        self._suspect = seen
        self.resets += resets
        return resets

    def start(self) -> None:
        """Start the periodic check on the running event loop."""
        self._loop.start()

    async def stop(self) -> None:
        """Stop the periodic check."""
        await self._loop.stop()
