"""Transactional outbox on the real PostgreSQL and broker: an event exists iff its transaction committed,
and the relay publishes every committed row once per pass, stamping it."""

import asyncio
import uuid

from aiokafka import AIOKafkaConsumer
from sqlalchemy import select, text

from uep_common.admin import create_database, migrate

from uep_common.db.models import OutboxMessage
from uep_common.db.session import make_async_engine, make_sessionmaker, make_sync_engine
from uep_common.events import EvaluationCompleted, EvaluationStatus
from uep_common.messaging import make_broker
from uep_common.outbox import OutboxRelay, add_to_outbox
from uep_common.settings import CommonSettings


def _event() -> EvaluationCompleted:
    return EvaluationCompleted(evaluation_id=uuid.uuid4(), tenant_id=uuid.uuid4(), status=EvaluationStatus.cancelled, summary=None)


async def _scenario(stack) -> None:
    settings = CommonSettings(database_url=stack.database_url, kafka_bootstrap=f"127.0.0.1:{stack.broker_port}")
    engine = make_async_engine(settings.database_url)
    sm = make_sessionmaker(engine)
    rolled_back, committed = _event(), _event()
    async with sm() as s:
        async with s.begin():
            add_to_outbox(s, rolled_back, trace_headers={})
            await s.rollback()
    async with sm() as s, s.begin():
        add_to_outbox(s, committed, trace_headers={})
    async with sm() as s:
        ids = set(await s.scalars(select(OutboxMessage.event_id).where(OutboxMessage.event_id.in_([rolled_back.event_id, committed.event_id]))))
    assert ids == {committed.event_id}

    broker = make_broker(settings)
    await asyncio.wait_for(broker.start(), 30)
    consumer = AIOKafkaConsumer(committed.topic, bootstrap_servers=settings.kafka_bootstrap, group_id=f"test-outbox-{uuid.uuid4()}",
                                auto_offset_reset="earliest", session_timeout_ms=6000, fetch_max_wait_ms=100)
    await consumer.start()
    try:
        relay = OutboxRelay(sm, broker)
        while await relay.relay_once():  # other services' relays may race us for rows: fine, SKIP LOCKED
            pass
        async with sm() as s:
            row = await s.scalar(select(OutboxMessage).where(OutboxMessage.event_id == committed.event_id))
        assert row.published_at is not None and row.attempts == 1 and row.last_error is None
        seen = []
        deadline = asyncio.get_running_loop().time() + 30
        while committed.event_id not in seen:
            assert asyncio.get_running_loop().time() < deadline, "published event never arrived"
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for r in records:
                    ev = EvaluationCompleted.model_validate_json(r.value)
                    seen.append(ev.event_id)
                    if ev.event_id == committed.event_id:
                        assert r.key == str(committed.evaluation_id).encode()
                        assert dict(r.headers)["uep-event-type"] == b"EvaluationCompleted"
        assert rolled_back.event_id not in seen
        assert seen.count(committed.event_id) == 1
    finally:
        await consumer.stop()
        await broker.stop()
        await engine.dispose()


def test_outbox_commit_and_relay(stack):
    asyncio.run(_scenario(stack))


class _FailingBroker:
    async def publish(self, *args, **kwargs):
        raise ConnectionError("broker down")


async def _failing(database_url: str) -> None:
    engine = make_async_engine(database_url)
    sm = make_sessionmaker(engine)
    event = _event()
    async with sm() as s, s.begin():
        add_to_outbox(s, event, trace_headers={})
    relay = OutboxRelay(sm, _FailingBroker())
    assert await relay.relay_once() == 0
    async with sm() as s:
        row = await s.scalar(select(OutboxMessage).where(OutboxMessage.event_id == event.event_id))
    assert row.published_at is None and row.attempts == 1 and "broker down" in row.last_error
    await engine.dispose()


def test_relay_keeps_rows_it_could_not_publish(stack):
    # A database of its own: the stack's relays would otherwise publish the row first.
    url = stack.database_url.rsplit("/", 1)[0] + "/uep_test_outbox"
    engine = make_sync_engine(url.rsplit("/", 1)[0] + "/postgres")
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(text("DROP DATABASE IF EXISTS uep_test_outbox WITH (FORCE)"))
    engine.dispose()
    create_database(url)
    migrate(url)
    asyncio.run(_failing(url))
