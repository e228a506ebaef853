"""QuietServer: uvicorn's housekeeping once a TICK_S instead of every 0.1 s, and the exit signal still ends it at once."""

from __future__ import annotations

import asyncio
import signal

import uvicorn

from uep_common.runtime import http_server
from uep_common.runtime.http_server import QuietServer


def _server() -> tuple[QuietServer, list[int]]:
    server = QuietServer(uvicorn.Config(app=None))
    ticks: list[int] = []

    async def on_tick(counter: int) -> bool:
        ticks.append(counter)
        return server.should_exit

    server.on_tick = on_tick  # type: ignore[method-assign]
    return server, ticks


async def test_the_exit_signal_ends_the_main_loop_without_waiting_for_the_tick(monkeypatch):
    monkeypatch.setattr(http_server, "TICK_S", 30.0)
    server, ticks = _server()
    asyncio.get_running_loop().call_later(0.05, server.handle_exit, signal.SIGTERM, None)
    await asyncio.wait_for(server.main_loop(), 5)  # without the wake-up it would sleep 30 s
    assert server.should_exit
    assert ticks == [0, 300]  # uvicorn's counter is in tenths of a second: one wait of 30 s is 300


async def test_each_tick_advances_uvicorn_s_counter_by_tick_s_in_tenths(monkeypatch):
    monkeypatch.setattr(http_server, "TICK_S", 0.2)
    server, ticks = _server()

    async def on_tick(counter: int) -> bool:
        ticks.append(counter)
        return len(ticks) == 4

    server.on_tick = on_tick  # type: ignore[method-assign]
    await asyncio.wait_for(server.main_loop(), 5)
    assert ticks == [0, 2, 4, 6]  # the Date header is refreshed when counter % 10 == 0: once a second
