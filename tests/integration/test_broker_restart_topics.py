"""After a restart of the memory-storage broker, on a real tansu broker of its own: a topic that came back with
the wrong partition count (a client's metadata request auto-creates it with 4 before the stack re-creates it
with 6) is re-created by ``uep_stack.fix_partitions`` with 6, and events
keyed to partitions 4-5 are then published and read back from those partitions."""

from __future__ import annotations

import asyncio

from .helpers import private_broker_config

TOPIC = "uep.sample.dispatched.v1"


def _key_for_partition(wanted: set[int], partitions: int) -> bytes:
    """A key that aiokafka's default partitioner (murmur2, as Kafka's) sends to one of ``wanted``."""
    from aiokafka.partitioner import DefaultPartitioner

    part = DefaultPartitioner()
    for i in range(10_000):
        key = f"item-{i}".encode()
        if part(key, list(range(partitions)), list(range(partitions))) in wanted:
            return key
    raise AssertionError("no key found")


async def _partitions(port: int) -> dict[str, int]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
    await admin.start()
    try:
        return {d["topic"]: len(d["partitions"]) for d in await admin.describe_topics()}
    finally:
        await admin.close()


async def _read_partitions(bootstrap: str, partitions: int) -> list[tuple[int, list[bytes]]]:
    """``(partition, values)`` of every non-empty partition of the topic, read from the start."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        got = await consumer.getmany(*tps, timeout_ms=2000)
        return sorted((tp.partition, [r.value for r in records]) for tp, records in got.items() if records)
    finally:
        await consumer.stop()


async def _scenario(cfg) -> dict:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    import uep_stack
    from uep_common.messaging import ensure_topics, make_broker, publish, refresh_metadata
    from uep_common.settings import CommonSettings

    settings = CommonSettings(kafka_bootstrap=f"127.0.0.1:{cfg.broker_port}", kafka_request_timeout_ms=3000)
    await ensure_topics(settings)
    key = _key_for_partition({4, 5}, settings.kafka_partitions)
    broker = make_broker(settings)
    await broker.start()
    out: dict = {}
    try:
        await publish(broker, {"n": 0}, topic=TOPIC, key=key, headers={})  # metadata cached: 6 partitions
        await asyncio.to_thread(uep_stack.kill, cfg, "broker")
        await asyncio.to_thread(uep_stack.start_broker, cfg)
        await ensure_topics(settings)
        await publish(broker, {"n": 1}, topic=TOPIC, key=key, headers={})  # reconnected: 6 partitions again
        admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
        await admin.start()
        try:  # the topic as a reconnecting client's metadata request auto-creates it (4 partitions)
            await admin.delete_topics([TOPIC])
            await admin.create_topics([NewTopic(TOPIC, 4, 1)])
        finally:
            await admin.close()
        out["before_fix"] = (await _partitions(cfg.broker_port))[TOPIC]
        out["fixed"] = await uep_stack.fix_partitions(settings)
        out["after_fix"] = await _partitions(cfg.broker_port)
        out["fixed_again"] = await uep_stack.fix_partitions(settings)
        assert refresh_metadata(broker)  # as a client's periodic refresh would
        await publish(broker, {"n": 2}, topic=TOPIC, key=key, headers={})
        out["read_back"] = await _read_partitions(settings.kafka_bootstrap, settings.kafka_partitions)
    finally:
        await broker.stop()
    return out


def test_wrong_partition_count_is_fixed_and_events_reach_partitions_4_and_5():
    import uep_stack
    from uep_common.settings import CommonSettings

    cfg = private_broker_config(9098, "restart-topics")
    uep_stack.start_broker(cfg)
    try:
        out = asyncio.run(_scenario(cfg))
    finally:
        uep_stack.kill(cfg, "broker")
    assert out["before_fix"] == 4
    assert out["fixed"] == [TOPIC]
    wanted = CommonSettings().kafka_partitions
    assert all(n == wanted for n in out["after_fix"].values()), out["after_fix"]
    assert out["fixed_again"] == []
    [(partition, values)] = out["read_back"]  # the one event published after the fix, on its key's partition
    assert partition in (4, 5) and values == [b'{"n":2}']
