"""One background loop for the services' periodic work (outbox relay, allocation and reconcile passes,
lease exhaustion, heartbeats, leaderboard reconciliation, retention).

A :class:`BackgroundLoop` runs ``step()`` as an asyncio task on the running event loop, then waits
``interval_s`` seconds or until :meth:`BackgroundLoop.wake` is called, and repeats. An exception from a
step (the database or the broker is down) is logged and the loop carries on at the next interval; only
cancellation ends it. :meth:`BackgroundLoop.stop` cancels the task and waits for it to finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)


class BackgroundLoop:
    """``step()`` every ``interval_s`` seconds, or sooner when woken.

    Args:
        name: the task's name (also used in log lines).
        step: coroutine function run once per round; its result is ignored.
        interval_s: seconds to wait after a round, or a zero-argument function returning them (evaluated
            after each round, so the wait may depend on state; a value <= 0 starts the next round at once).
        error_delay_s: if set, the wait after a failed round is at least this (so a failing step does not
            spin when woken often).
    """

    def __init__(
        self,
        name: str,
        step: Callable[[], Awaitable[Any]],
        interval_s: float | Callable[[], float],
        *,
        error_delay_s: float | None = None,
    ) -> None:
        self.name = name
        self._step = step
        self._interval = interval_s
        self._error_delay = error_delay_s
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.rounds = 0
        self.failures = 0

    @property
    def running(self) -> bool:
        """True while the task exists and has not finished."""
        return self._task is not None and not self._task.done()

    def wake(self) -> None:
        """Start the next round now (or as soon as the current one ends)."""
        self._wake.set()

    def start(self) -> None:
        """Create the task on the running event loop (a second call while running does nothing)."""
        if not self.running:
            self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        """Cancel the task and wait for it to end (a round in progress is cancelled at its next await)."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    def _next_wait(self) -> float:
        return float(self._interval() if callable(self._interval) else self._interval)

    async def _run(self) -> None:
        while True:
            failed = False
            try:
                await self._step()
            except asyncio.CancelledError:
                raise
            except Exception:
                failed = True
                self.failures += 1
                log.exception("%s: round failed", self.name)
            self.rounds += 1
            wait = self._next_wait()
            if failed and self._error_delay is not None:
                await asyncio.sleep(self._error_delay)
                wait = max(0.0, wait - self._error_delay)
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=wait)
            self._wake.clear()
