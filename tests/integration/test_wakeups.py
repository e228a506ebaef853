"""PostgreSQL NOTIFY wake-ups (uep_common.runtime.wakeups) on the real server: delivered on commit only, one call per
id in order, a malformed payload ignored."""

from __future__ import annotations

import asyncio
import uuid

from servers import PG_SERVER

URL = f"{PG_SERVER}/postgres"


async def _scenario() -> list[uuid.UUID]:
    from sqlalchemy import text

    from uep_common.runtime.session import make_async_engine, make_sessionmaker
    from uep_common.runtime.wakeups import EVALUATIONS_CHANNEL, WaitingListener, notify_waiting

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


async def _idle_timer_count(seconds: float) -> tuple[int, list[str]]:
    """Timers the event loop arms while a listener waits ``seconds`` with nothing notified (after one probe
    came through), and the payloads it received."""
    from sqlalchemy import text

    from uep_common.runtime.session import make_async_engine, make_sessionmaker
    from uep_common.runtime.wakeups import ChannelListener

    got: list[str] = []

    async def on_payload(payload: str) -> None:
        got.append(payload)

    listener = ChannelListener(URL, "uep_test_idle_listener", on_payload)
    listener.start()
    engine = make_async_engine(URL)
    try:
        sessions = make_sessionmaker(engine)
        for _ in range(50):  # until the listener has subscribed: a probe sent before its LISTEN is not heard
            async with sessions() as s, s.begin():
                await s.execute(text("SELECT pg_notify('uep_test_idle_listener', 'probe')"))
            await asyncio.sleep(0.1)
            if got:
                break
        await asyncio.sleep(0.5)  # any later probe delivered and drained before the count starts
        loop = asyncio.get_running_loop()
        armed = 0
        call_at = loop.call_at

        def counting(when, callback, *args, **kwargs):
            nonlocal armed
            armed += 1
            return call_at(when, callback, *args, **kwargs)

        loop.call_at = counting  # type: ignore[method-assign,assignment]
        try:
            await asyncio.sleep(seconds)
        finally:
            del loop.call_at
        return armed, got
    finally:
        await listener.stop()
        await engine.dispose()


def test_an_idle_listener_arms_no_poll_timer():
    """psycopg's ``notifies()`` re-arms a 0.1 s timer while it waits (about 10 in a second); the listener waits
    on the socket alone, so one idle second arms only the test's own sleep."""
    armed, got = asyncio.run(_idle_timer_count(1.0))
    assert got[:1] == ["probe"]
    assert armed <= 2, armed
