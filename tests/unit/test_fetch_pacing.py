"""Long-poll pacing of consumers (uep_common.fetch_pacing): consumers start with the idle wait, the first message
gives every consumer of the broker the busy wait, and ``idle_after_s`` without one gives them the idle wait again
(and batch subscribers a longer batch wait, their own back on the next message).
The consumers are real (unstarted) aiokafka consumers; the attribute the pacer sets is checked to be the one
aiokafka's fetcher reads for each fetch request, so an aiokafka upgrade that moves it fails here."""

from __future__ import annotations

import asyncio
import inspect
from types import SimpleNamespace

from aiokafka import AIOKafkaConsumer
from aiokafka.consumer.fetcher import Fetcher

from uep_common.fetch_pacing import IDLE_BATCH_TIMEOUT_MS, FetchPacer, PacedKafkaBroker
from uep_common.messaging import consumer_options, make_broker
from uep_common.settings import CommonSettings


def test_the_attribute_set_is_the_one_aiokafka_reads_for_every_fetch():
    assert "self._fetch_max_wait_ms" in inspect.getsource(Fetcher._get_actions_per_node)  # each fetch request
    assert "fetch_max_wait_ms=self._fetch_max_wait_ms" in inspect.getsource(AIOKafkaConsumer.start)  # its fetcher


async def test_busy_on_a_message_idle_after_the_quiet_period():
    consumers = [AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1", fetch_max_wait_ms=2000) for _ in range(2)]
    fetcher = SimpleNamespace(_fetch_max_wait_ms=2000)  # a started consumer's fetcher
    consumers[1]._fetcher = fetcher
    batch = SimpleNamespace(consumer=consumers[1], batch_timeout_ms=20)  # a FastStream batch subscriber
    broker = SimpleNamespace(subscribers=[SimpleNamespace(consumer=consumers[0]), batch])
    pacer = FetchPacer(busy_ms=100, idle_ms=2000, idle_after_s=0.2, broker=broker)
    assert pacer.idle

    pacer.touch()
    assert not pacer.idle
    assert [c._fetch_max_wait_ms for c in consumers] == [100, 100] and fetcher._fetch_max_wait_ms == 100
    await asyncio.sleep(0.12)
    pacer.touch()  # a second message restarts the quiet period
    await asyncio.sleep(0.12)
    assert not pacer.idle and consumers[0]._fetch_max_wait_ms == 100  # 0.24 s since the first, 0.12 s since the last
    await asyncio.sleep(0.2)
    assert pacer.idle
    assert [c._fetch_max_wait_ms for c in consumers] == [2000, 2000] and fetcher._fetch_max_wait_ms == 2000
    assert batch.batch_timeout_ms == IDLE_BATCH_TIMEOUT_MS  # the idle batch loop polls less often
    pacer.touch()
    assert batch.batch_timeout_ms == 20 and consumers[0]._fetch_max_wait_ms == 100  # its own wait back
    for c in consumers:
        c._fetcher = None  # the stand-in; stop() closes the (never connected) client
        await c.stop()


def test_make_broker_paces_its_consumers_unless_the_waits_are_equal():
    settings = CommonSettings(kafka_fetch_max_wait_ms=100, kafka_idle_fetch_max_wait_ms=2000)
    broker = make_broker(settings)
    assert any(getattr(m, "__name__", "") == "Pace" for m in broker.middlewares)
    assert isinstance(broker, PacedKafkaBroker) and broker.pacer is not None and broker.pacer.broker is broker
    assert consumer_options(settings, "x")["fetch_max_wait_ms"] == 2000  # consumers start idle

    flat = CommonSettings(kafka_fetch_max_wait_ms=100, kafka_idle_fetch_max_wait_ms=100)
    assert not any(getattr(m, "__name__", "") == "Pace" for m in make_broker(flat).middlewares)
    assert consumer_options(flat, "x")["fetch_max_wait_ms"] == 100


async def test_consumers_of_per_evaluation_topics_keep_the_idle_wait():
    """A subscriber of per-evaluation topics only (here EvaluationRequested) keeps the idle fetch wait and the
    idle batch wait while its process is busy; one of a per-item topic gets the busy wait."""
    from uep_common.events import Topics
    from uep_common.messaging import PER_EVALUATION_TOPICS, fetch_pacer

    per_item = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1", fetch_max_wait_ms=2000)
    per_evaluation = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1", fetch_max_wait_ms=2000)
    steady_batch = SimpleNamespace(consumer=per_evaluation, batch_timeout_ms=50, topic_names=[Topics.EVALUATION_REQUESTED])
    pacer = fetch_pacer(CommonSettings(kafka_fetch_max_wait_ms=100, kafka_idle_fetch_max_wait_ms=2000, kafka_idle_after_s=60))
    assert pacer is not None and pacer.steady_topics == PER_EVALUATION_TOPICS
    assert Topics.SAMPLE_DISPATCHED not in PER_EVALUATION_TOPICS and Topics.SCORE_COMPUTED not in PER_EVALUATION_TOPICS
    pacer.broker = SimpleNamespace(
        subscribers=[SimpleNamespace(consumer=per_item, topic_names=[Topics.SCORE_COMPUTED]), steady_batch]
    )
    pacer.pace_batches(idle=True)  # the broker's start
    assert steady_batch.batch_timeout_ms == IDLE_BATCH_TIMEOUT_MS
    pacer.touch()
    assert (per_item._fetch_max_wait_ms, per_evaluation._fetch_max_wait_ms) == (100, 2000)
    assert steady_batch.batch_timeout_ms == IDLE_BATCH_TIMEOUT_MS
    for c in (per_item, per_evaluation):
        await c.stop()


def test_faststream_batch_loop_still_sleeps_after_an_empty_poll():
    """:func:`get_batch` replaces FastStream's batch ``get_msg``, which sleeps a batch wait after an empty
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
    """With FastStream's loop a record put 10 ms after an empty 100 ms poll waits out a 100 ms sleep; with
    :func:`get_batch` the next poll starts at once and returns it within a few milliseconds."""
    from uep_common.fetch_pacing import get_batch

    sub = SimpleNamespace(batch_timeout_ms=100, max_records=10)
    consumer = _Consumer()
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert await get_batch(sub, consumer) == ()  # an empty poll: the whole batch wait, not twice it (FastStream's)
    assert 0.09 <= loop.time() - t0 < 0.19
    loop.call_later(0.01, consumer.records.put_nowait, "r1")
    t1 = loop.time()
    assert await get_batch(sub, consumer) == ("r1",)
    assert loop.time() - t1 < 0.09


async def test_make_broker_gives_batch_subscribers_get_batch():
    from uep_common.fetch_pacing import get_batch, poll_batches_without_sleep

    broker = make_broker(CommonSettings())
    batch = broker.subscriber("t", batch=True, group_id="g")
    single = broker.subscriber("u", group_id="h")
    assert poll_batches_without_sleep(broker) == 1
    assert batch.get_msg.__func__ is get_batch and getattr(single.get_msg, "__func__", None) is not get_batch
