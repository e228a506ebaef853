"""PostgreSQL NOTIFY wake-ups (uep_common.wakeups) on the real server: delivered on commit only, one call per
id in order, a malformed payload ignored."""

from __future__ import annotations

import asyncio
import uuid

URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


async def _scenario() -> list[uuid.UUID]:
    from sqlalchemy import text

    from uep_common.db.session import make_async_engine, make_sessionmaker
    from uep_common.wakeups import EVALUATIONS_CHANNEL, WaitingListener, notify_waiting

    got: list[uuid.UUID] = []

    async def on_waiting(evaluation_id: uuid.UUID) -> None:
        got.append(evaluation_id)

    listener = WaitingListener(URL, on_waiting)
    listener.start()
    engine = make_async_engine(URL)
    sm = make_sessionmaker(engine)
    try:
        for _ in range(50):  # until the LISTEN is in place: a probe notification comes back
            async with sm() as s, s.begin():
                await s.execute(text("SELECT pg_notify(:ch, 'probe')"), {"ch": EVALUATIONS_CHANNEL})
            await asyncio.sleep(0.1)
            if listener.received:
                break
        committed, rolled_back = [uuid.uuid4(), uuid.uuid4()], [uuid.uuid4()]
        async with sm() as s, s.begin():
            await notify_waiting(s, rolled_back)
            await s.rollback()
        async with sm() as s, s.begin():
            await notify_waiting(s, committed)
        for _ in range(50):
            if len(got) >= 2:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.3)  # anything further would arrive now
        assert got == committed, (got, committed, rolled_back)
        return got
    finally:
        await listener.stop()
        await engine.dispose()


def test_notifications_are_delivered_on_commit_only_in_order():
    got = asyncio.run(_scenario())
    assert len(got) == 2
