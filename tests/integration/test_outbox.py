"""Transactional outbox on the real PostgreSQL and broker: an event exists iff its transaction committed,
and the relay publishes every committed row once per pass, stamping it."""

import asyncio
import uuid

from aiokafka import AIOKafkaConsumer
from sqlalchemy import select

from uep_common.contract.events import EvaluationCompleted, EvaluationStatus
from uep_common.runtime.messaging import make_broker
from uep_common.runtime.outbox import OutboxRelay, add_to_outbox
from uep_common.runtime.session import make_async_engine, make_sessionmaker
from uep_common.runtime.settings import CommonSettings
from uep_common.tables.models import OutboxMessage

from .helpers import fresh_database


def _event() -> EvaluationCompleted:
    return EvaluationCompleted(
        evaluation_id=uuid.uuid4(), tenant_id=uuid.uuid4(), status=EvaluationStatus.cancelled, summary=None
    )


async def _scenario(stack) -> None:
    settings = CommonSettings(database_url=stack.database_url, kafka_bootstrap=f"127.0.0.1:{stack.broker_port}")
    engine = make_async_engine(settings.database_url)
    sm = make_sessionmaker(engine)
    rolled_back, committed = _event(), _event()
    async with sm() as s, s.begin():
        add_to_outbox(s, rolled_back, trace_headers={})
        await s.rollback()
    async with sm() as s, s.begin():
        add_to_outbox(s, committed, trace_headers={})
    async with sm() as s:
        ids = set(
            await s.scalars(
                select(OutboxMessage.event_id).where(OutboxMessage.event_id.in_([rolled_back.event_id, committed.event_id]))
            )
        )
    assert ids == {committed.event_id}

    broker = make_broker(settings)
    await asyncio.wait_for(broker.start(), 30)
    consumer = AIOKafkaConsumer(
        committed.topic,
        bootstrap_servers=settings.kafka_bootstrap,
        group_id=f"test-outbox-{uuid.uuid4()}",
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        fetch_max_wait_ms=100,
    )
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
    asyncio.run(_failing(fresh_database(stack, "uep_test_outbox")))


class _RecordingBroker:
    def __init__(self) -> None:
        self.sent: list[str] = []

    async def publish(self, body, **kwargs):
        self.sent.append(body["event_id"])


async def _claims(database_url: str) -> None:
    from datetime import UTC, datetime, timedelta

    engine = make_async_engine(database_url)
    sm = make_sessionmaker(engine)
    now = datetime.now(UTC)
    held, lapsed, plain, failing = _event(), _event(), _event(), _event()
    async with sm() as s, s.begin():
        held_row = add_to_outbox(s, held, trace_headers={}, claim_until=now + timedelta(seconds=60))
        add_to_outbox(s, lapsed, trace_headers={}, claim_until=now - timedelta(seconds=1))  # its writer died
        add_to_outbox(s, plain, trace_headers={})
        failing_row = add_to_outbox(s, failing, trace_headers={}, claim_until=now + timedelta(seconds=60))
    recorder = _RecordingBroker()
    relay = OutboxRelay(sm, recorder)
    assert await relay.relay_once() == 2  # the lapsed claim and the unclaimed row; the held ones are left alone
    assert sorted(recorder.sent) == sorted([str(lapsed.event_id), str(plain.event_id)])

    assert await relay.publish_claimed([held_row]) == 1  # the writer publishes its own row, no SELECT
    assert recorder.sent[-1] == str(held.event_id)
    assert await OutboxRelay(sm, _FailingBroker()).publish_claimed([failing_row]) == 0
    async with sm() as s:
        rows = {r.event_id: r for r in await s.scalars(select(OutboxMessage))}
    assert rows[held.event_id].published_at is not None and rows[held.event_id].attempts == 1
    assert rows[failing.event_id].published_at is None and rows[failing.event_id].claimed_until is None
    assert "broker down" in rows[failing.event_id].last_error
    assert await relay.relay_once() == 1  # the failed row lost its claim: the relay takes it at once
    assert recorder.sent[-1] == str(failing.event_id) and len(recorder.sent) == 4
    await engine.dispose()


def test_claimed_rows_are_published_by_their_writer_and_taken_over_when_the_claim_ends(stack):
    asyncio.run(_claims(fresh_database(stack, "uep_test_outbox_claims")))
