"""What the platform relies on in Apache Kafka, checked on a real broker of this module's own (KRaft, single node,
started as the stack starts it): the idempotent producer makes the broker drop a retried batch, retention deletes
old segments, and a broker killed with SIGKILL comes back with its topics, records and committed offsets (its log
is on disk)."""

from __future__ import annotations

import asyncio
import shutil
import time

import pytest

from .helpers import private_broker_config

pytestmark = pytest.mark.stack


@pytest.fixture(scope="module")
def broker():
    """A private broker that checks retention every second (the stack's checks every 30 s)."""
    import servers
    import uep_stack

    cfg = private_broker_config(9098, "kafka-broker")
    shutil.rmtree(cfg.run_dir, ignore_errors=True)
    servers.start_kafka(cfg, cfg.broker_port, cfg.controller_port, overrides={"log.retention.check.interval.ms": "1000"})
    try:
        yield cfg
    finally:
        uep_stack.stop(cfg, ["broker"], 30)


def _bootstrap(cfg) -> str:
    return f"127.0.0.1:{cfg.broker_port}"


async def _create(cfg, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=_bootstrap(cfg))
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])
    finally:
        await admin.close()


async def _read_all(cfg, topic: str, partition: int = 0) -> list[bytes]:
    """Every record value of one partition, from the log start to its end."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    tp = TopicPartition(topic, partition)
    consumer = AIOKafkaConsumer(bootstrap_servers=_bootstrap(cfg), enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        values: list[bytes] = []
        while await consumer.position(tp) < end:
            got = await consumer.getmany(tp, timeout_ms=2000)
            values += [r.value for r in got.get(tp, [])]
        return values
    finally:
        await consumer.stop()


async def _send_batch_twice(cfg, topic: str) -> tuple[list[int], list[int]]:
    """Send one record with the idempotent producer, then the next batch of the same producer twice, exactly as
    a retry after a lost acknowledgement resends it (same producer id, epoch and sequence number). Returns the
    error codes and base offsets of the two answers."""
    from aiokafka import AIOKafkaProducer, TopicPartition
    from aiokafka.protocol.produce import ProduceRequest
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    producer = AIOKafkaProducer(bootstrap_servers=_bootstrap(cfg), enable_idempotence=True, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"first", partition=0)
        txn = producer._txn_manager
        tp = TopicPartition(topic, 0)
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=0,
            is_transactional=0,
            producer_id=txn.producer_id,
            producer_epoch=txn.producer_epoch,
            base_sequence=txn.sequence_number(tp),
            batch_size=16384,
        )
        builder.append(0, timestamp=None, key=None, value=b"retried", headers=[])
        data = bytes(builder.build())
        leader = producer.client.cluster.leader_for_partition(tp)
        codes, offsets = [], []
        for _ in range(2):
            request = ProduceRequest(required_acks=-1, timeout=5000, topics=[(topic, [(0, data)])], transactional_id=None)
            response = await producer.client.send(leader, request)
            [(_, [partition_response])] = response.topics
            codes.append(partition_response[1])
            offsets.append(partition_response[2])
        return codes, offsets
    finally:
        await producer.stop()


def test_the_broker_drops_a_retried_batch_of_the_idempotent_producer(broker):
    async def scenario():
        await _create(broker, "idempotence")
        codes, offsets = await _send_batch_twice(broker, "idempotence")
        return codes, offsets, await _read_all(broker, "idempotence")

    codes, offsets, values = asyncio.run(scenario())
    assert codes == [0, 0]  # the duplicate is acknowledged (Kafka answers it with the first write's offset) ...
    assert offsets == [1, 1]
    assert values == [b"first", b"retried"]  # ... and written once


def test_retention_deletes_old_segments(broker):
    """A topic keeping 2 s of records in 100 ms segments: after its records age, the log start moves past them."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def scenario() -> tuple[int, int, int]:
        await _create(broker, "retention", configs={"retention.ms": "2000", "segment.ms": "100", "file.delete.delay.ms": "0"})
        producer = AIOKafkaProducer(bootstrap_servers=_bootstrap(broker))
        await producer.start()
        tp = TopicPartition("retention", 0)
        consumer = AIOKafkaConsumer(bootstrap_servers=_bootstrap(broker))
        await consumer.start()
        try:
            for i in range(20):
                await producer.send_and_wait("retention", f"old-{i}".encode(), partition=0)
            start_before = (await consumer.beginning_offsets([tp]))[tp]
            deadline = time.monotonic() + 40
            start_after = start_before
            while start_after < 20 and time.monotonic() < deadline:
                await asyncio.sleep(0.5)
                await producer.send_and_wait("retention", b"new", partition=0)  # rolls the aged segment
                start_after = (await consumer.beginning_offsets([tp]))[tp]
            end = (await consumer.end_offsets([tp]))[tp]
            return start_before, start_after, end
        finally:
            await producer.stop()
            await consumer.stop()

    start_before, start_after, end = asyncio.run(scenario())
    assert start_before == 0
    assert start_after >= 20  # the 20 old records are gone from the log
    assert end > start_after


def test_a_killed_broker_keeps_its_topics_records_and_committed_offsets(broker):
    """kill -9 of the broker, then a start on the same log (what ``uep_stack.restart_broker`` does)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.structs import OffsetAndMetadata

    import uep_stack

    async def before() -> None:
        await _create(broker, "durable", partitions=6)
        producer = AIOKafkaProducer(bootstrap_servers=_bootstrap(broker), enable_idempotence=True, acks="all")
        await producer.start()
        for i in range(30):
            await producer.send_and_wait("durable", f"r{i}".encode(), partition=i % 6)
        await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=_bootstrap(broker), group_id="g", enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition("durable", 0)])
            await consumer.commit({TopicPartition("durable", 0): OffsetAndMetadata(3, "")})
        finally:
            await consumer.stop()

    async def after() -> tuple[int, list[bytes], int | None]:
        admin = AIOKafkaAdminClient(bootstrap_servers=_bootstrap(broker))
        await admin.start()
        try:
            [desc] = await admin.describe_topics(["durable"])
        finally:
            await admin.close()
        consumer = AIOKafkaConsumer(bootstrap_servers=_bootstrap(broker), group_id="g", enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition("durable", 0)])
            committed = await consumer.committed(TopicPartition("durable", 0))
        finally:
            await consumer.stop()
        return len(desc["partitions"]), await _read_all(broker, "durable", 0), committed

    asyncio.run(before())
    uep_stack.kill(broker, "broker")
    t0 = time.monotonic()
    uep_stack.start_broker(broker)
    restart_s = time.monotonic() - t0
    partitions, values, committed = asyncio.run(after())
    assert partitions == 6
    assert values == [f"r{i}".encode() for i in range(0, 30, 6)]
    assert committed == 3
    assert restart_s < 60
