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


class _Clock:
    """A fake monotonic clock for :mod:`uep_common.runtime.batch_polling`: ``getmany`` and ``sleep`` advance it by
    what they would wait, and every sleep is recorded, so the pacing is asserted without reading wall time."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        self.now += seconds


class _Consumer:
    """``getmany`` of an aiokafka consumer on the fake clock: each call takes the next scripted answer, a
    ``(seconds it waited, records)`` pair, and records the arguments it was called with."""

    def __init__(self, clock: _Clock, script: list[tuple[float, list[str]]]) -> None:
        self.clock, self.script = clock, list(script)
        self.calls: list[tuple[int, int | None, float]] = []

    async def getmany(self, timeout_ms: int, max_records: int | None = None) -> dict[str, list[str]]:
        self.calls.append((timeout_ms, max_records, self.clock.now))
        waited, records = self.script.pop(0)
        self.clock.now += waited
        return {"tp": records} if records else {}


def _paced(monkeypatch) -> _Clock:
    from uep_common.runtime import batch_polling

    clock = _Clock()
    monkeypatch.setattr(batch_polling, "time", SimpleNamespace(monotonic=clock.monotonic))
    monkeypatch.setattr(batch_polling, "asyncio", SimpleNamespace(sleep=clock.sleep))
    return clock


async def test_get_batch_polls_again_at_once_after_an_empty_poll(monkeypatch):
    """An empty poll that waited the whole batch wait (0.5 s) is followed by the next poll at once: no sleep
    (FastStream's loop sleeps another 0.5 s); a record is returned by the poll that fetched it."""
    from uep_common.runtime.batch_polling import get_batch

    clock = _paced(monkeypatch)
    sub = SimpleNamespace(batch_timeout_ms=500, max_records=10)
    consumer = _Consumer(clock, [(0.5, []), (0.01, ["r1"])])
    assert await get_batch(sub, consumer) == ()
    assert await get_batch(sub, consumer) == ("r1",)
    assert clock.sleeps == []
    assert consumer.calls == [(500, 10, 100.0), (500, 10, 100.5)]  # the second poll starts when the first ends


async def test_get_batch_waits_out_the_period_after_an_early_empty_poll(monkeypatch):
    """A poll that comes back empty early (the consumer closing, a fetch error) waits out the rest of the batch
    wait, so the loop never spins: 0.1 s polled, 0.4 s slept; a poll with records never sleeps."""
    from uep_common.runtime.batch_polling import get_batch

    clock = _paced(monkeypatch)
    sub = SimpleNamespace(batch_timeout_ms=500, max_records=3)
    consumer = _Consumer(clock, [(0.1, []), (0.0, ["a", "b"])])
    assert await get_batch(sub, consumer) == ()
    assert clock.sleeps == [0.4]
    assert await get_batch(sub, consumer) == ("a", "b")
    assert clock.sleeps == [0.4] and consumer.calls[1] == (500, 3, 100.5)


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
