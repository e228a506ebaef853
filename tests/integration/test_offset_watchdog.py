"""The offset watchdog on a real tansu broker of its own: a consumer left past the log of a restarted broker
(memory storage: the log is gone, the consumer keeps its position and tansu answers with empty fetches)
is moved back to the start and receives what is produced after the restart, exactly once; on a healthy
broker the watchdog never moves a consumer."""

from __future__ import annotations

import asyncio
import contextlib
import time
from types import SimpleNamespace

from .helpers import private_broker_config

TOPIC = "uep.test.watchdog"


async def _produce(port: int, values: list[str]) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", linger_ms=20)
    await producer.start()
    try:
        futures = [await producer.send(TOPIC, v.encode(), partition=0) for v in values]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def _create_topic(port: int) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
    await admin.start()
    try:
        await admin.create_topics([NewTopic(TOPIC, 1, 1)])
    finally:
        await admin.close()


async def _scenario(cfg) -> tuple[list[str], int, int]:
    from aiokafka import AIOKafkaConsumer

    import uep_stack
    from uep_common.offsets import OffsetWatchdog

    port = cfg.broker_port
    await _create_topic(port)
    consumer = AIOKafkaConsumer(
        TOPIC,
        bootstrap_servers=f"127.0.0.1:{port}",
        group_id="watchdog-test",
        auto_offset_reset="earliest",
        session_timeout_ms=3000,
        heartbeat_interval_ms=500,
        fetch_max_wait_ms=100,
    )
    await asyncio.wait_for(consumer.start(), 30)
    got: list[str] = []

    async def consume() -> None:
        while True:
            batch = await consumer.getmany(timeout_ms=200)
            for records in batch.values():
                got.extend(r.value.decode() for r in records)
            if batch:
                await consumer.commit()

    task = asyncio.create_task(consume())
    watchdog = OffsetWatchdog(SimpleNamespace(subscribers=[SimpleNamespace(consumer=consumer)]), interval_s=0.5)
    watchdog.start()
    try:
        await _produce(port, [f"before-{i}" for i in range(30)])
        deadline = time.monotonic() + 30
        while len(got) < 30 and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        await asyncio.sleep(2.0)  # four watchdog passes over a healthy, idle partition
        resets_healthy = watchdog.resets

        await asyncio.to_thread(uep_stack.kill, cfg, "broker")
        await asyncio.to_thread(uep_stack.start_broker, cfg)
        await _create_topic(port)
        await _produce(port, [f"after-{i}" for i in range(5)])
        deadline = time.monotonic() + 60
        while len(got) < 35 and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        await asyncio.sleep(2.0)  # a duplicate, if any, would arrive now
        return got, resets_healthy, watchdog.resets
    finally:
        await watchdog.stop()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await consumer.stop()


def test_consumer_past_a_lost_log_is_reset_and_gets_new_messages_once():
    import uep_stack

    cfg = private_broker_config(9099, "watchdog")
    uep_stack.start_broker(cfg)
    try:
        got, resets_healthy, resets = asyncio.run(_scenario(cfg))
    finally:
        uep_stack.kill(cfg, "broker")
    assert got[:30] == [f"before-{i}" for i in range(30)]
    assert resets_healthy == 0  # position == high watermark on a healthy broker: never moved
    assert got[30:] == [f"after-{i}" for i in range(5)]  # the new log from its start, each message once
    assert resets >= 1
