"""uvicorn for uep's processes, with its housekeeping loop woken once a second instead of ten times.

uvicorn's ``Server.main_loop`` sleeps 0.1 s between checks of its exit flag, so an idle process wakes ten times
a second for nothing. :class:`QuietServer` runs the same check (``on_tick``: the ``Date`` header, the request
limit, the exit flag) once every :data:`TICK_S` seconds, and the exit signal wakes it at once, so shutdown is as
prompt as before. :func:`run` is ``uvicorn.run`` with this server (the gateway and the FastStream services).
"""

from __future__ import annotations

import asyncio
import contextlib
from types import FrameType
from typing import Any

import uvicorn

TICK_S = 1.0
"""Seconds between two housekeeping checks of an idle server (uvicorn's own: 0.1)."""


class QuietServer(uvicorn.Server):
    """``uvicorn.Server`` whose main loop waits on an exit event for up to :data:`TICK_S` (see the module
    docstring); ``on_tick`` keeps uvicorn's meaning of its counter (tenths of a second)."""

    _exit_event: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None

    async def main_loop(self) -> None:
        """Until the exit flag is set: wait for the exit signal or :data:`TICK_S`, then uvicorn's ``on_tick``."""
        self._loop = asyncio.get_running_loop()
        self._exit_event = asyncio.Event()
        ticks_per_wait = round(TICK_S * 10)
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + ticks_per_wait) % 864000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(TICK_S):
                    await self._exit_event.wait()
            should_exit = await self.on_tick(counter)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """Run Uvicorn's signal handler (it sets the exit flag), then wake the main loop."""
        super().handle_exit(sig, frame)
        loop, event = self._loop, self._exit_event
        if loop is not None and event is not None and not loop.is_closed():
            loop.call_soon_threadsafe(event.set)


def run(app: Any, **config: Any) -> None:
    """``uvicorn.run(app, **config)`` with :class:`QuietServer`."""
    QuietServer(uvicorn.Config(app, **config)).run()
