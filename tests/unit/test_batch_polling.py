"""Batch subscribers poll again at once after an empty poll (uep_common.runtime.batch_polling): FastStream's own loop
still sleeps (checked, so an upgrade that changes it fails here), :func:`uep_common.runtime.batch_polling.get_batch` takes a record as soon as it
comes, and :func:`uep_common.runtime.messaging.make_broker` gives every batch subscriber :func:`uep_common.runtime.batch_polling.get_batch`."""

from __future__ import annotations

import asyncio
import inspect
from types import SimpleNamespace

from uep_common.runtime.messaging import make_broker
from uep_common.runtime.settings import CommonSettings


def test_faststream_batch_loop_still_sleeps_after_an_empty_poll():
    """:func:`uep_common.runtime.batch_polling.get_batch` replaces FastStream's batch ``get_msg``, which sleeps a batch wait after an empty
    poll; when an upgrade changes that method, this fails and the replacement must be looked at again."""
    from faststream.kafka.subscriber.usecase import BatchSubscriber

    source = inspect.getsource(BatchSubscriber.get_msg)
    assert "consumer.getmany(" in source and "anyio.sleep(self.batch_timeout_ms / 1000)" in source


class _Consumer:
    """``getmany`` of an aiokafka consumer: waits for a record up to the timeout, returns it at once when one comes."""

    def __init__(self) -> None:
        self.records: asyncio.Queue[str] = asyncio.Queue()

    async def getmany(self, timeout_ms: int, max_records: int | None = None) -> dict[str, list[str]]:
        try:
            return {"tp": [await asyncio.wait_for(self.records.get(), timeout_ms / 1000)]}
        except TimeoutError:
            return {}


async def test_get_batch_takes_a_record_at_once_after_an_empty_poll():
    """With FastStream's loop a record put 10 ms after an empty 500 ms poll waits out a 500 ms sleep; with
    :func:`uep_common.runtime.batch_polling.get_batch` the next poll starts at once and returns it within a few milliseconds. The bounds sit
    halfway between the two behaviours, so a loaded machine's scheduling delays do not decide the outcome."""
    from uep_common.runtime.batch_polling import get_batch

    sub = SimpleNamespace(batch_timeout_ms=500, max_records=10)
    consumer = _Consumer()
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert await get_batch(sub, consumer) == ()  # an empty poll: the whole batch wait (0.5 s), not twice it (FastStream's)
    assert 0.45 <= loop.time() - t0 < 0.75
    loop.call_later(0.01, consumer.records.put_nowait, "r1")
    t1 = loop.time()
    assert await get_batch(sub, consumer) == ("r1",)
    assert loop.time() - t1 < 0.25  # FastStream's loop: at least 0.5 s


async def test_make_broker_gives_batch_subscribers_get_batch():
    from uep_common.runtime.batch_polling import get_batch, poll_batches_without_sleep

    broker = make_broker(CommonSettings())
    batch = broker.subscriber("t", batch=True, group_id="g")
    single = broker.subscriber("u", group_id="h")
    assert poll_batches_without_sleep(broker) == 1
    assert batch.get_msg.__func__ is get_batch and getattr(single.get_msg, "__func__", None) is not get_batch


async def test_the_broker_installs_get_batch_when_it_starts():
    """:meth:`uep_common.runtime.batch_polling.BatchPollingKafkaBroker.start` gives its batch subscribers :func:`uep_common.runtime.batch_polling.get_batch` before starting
    (the start itself fails here: nothing listens on port 1)."""
    from uep_common.runtime.batch_polling import BatchPollingKafkaBroker, get_batch

    broker = make_broker(CommonSettings(kafka_bootstrap="127.0.0.1:1", kafka_request_timeout_ms=1000))
    assert isinstance(broker, BatchPollingKafkaBroker)
    batch = broker.subscriber("t", batch=True, group_id="g")
    try:
        await asyncio.wait_for(broker.start(), 5)
    except Exception:  # noqa: BLE001 - no broker to connect to; only the subscribers' get_msg is asserted
        pass
    finally:
        await broker.stop()
    assert batch.get_msg.__func__ is get_batch
