"""uep_common.runtime.background.BackgroundLoop: rounds at the interval, at once when woken, carrying on after a
failed round, and ending on stop."""

from __future__ import annotations

import asyncio
import time

from uep_common.runtime.background import BackgroundLoop


def test_rounds_wake_failures_and_stop():
    async def scenario():
        calls: list[float] = []

        async def step():
            calls.append(time.monotonic())
            if len(calls) == 2:
                raise RuntimeError("database down")

        loop = BackgroundLoop("test-loop", step, interval_s=60.0)
        loop.start()
        await asyncio.sleep(0.2)
        assert len(calls) == 1  # the first round runs at start, the next only after 60 s …
        loop.wake()
        await asyncio.sleep(0.2)
        assert len(calls) == 2  # … or at once when woken
        assert loop.failures == 1 and loop.running  # the failure is logged, the loop goes on
        loop.wake()
        await asyncio.sleep(0.2)
        assert len(calls) == 3
        await loop.stop()
        assert not loop.running
        loop.wake()
        await asyncio.sleep(0.2)
        assert len(calls) == 3  # stopped: no more rounds

    asyncio.run(scenario())


def test_interval_function_and_error_delay():
    async def scenario():
        calls: list[float] = []

        async def failing():
            calls.append(time.monotonic())
            raise ValueError("boom")

        loop = BackgroundLoop("failing-loop", failing, interval_s=lambda: 0.0, error_delay_s=0.2)
        loop.start()
        await asyncio.sleep(0.7)
        await loop.stop()
        assert 2 <= len(calls) <= 4  # every 0.2 s despite a zero interval, not a busy loop
        assert all(b - a >= 0.19 for a, b in zip(calls, calls[1:], strict=False))

    asyncio.run(scenario())
