"""A pool of sandboxes (or harness processes) started ahead of time, so start-up is off the critical path.

Every worker serves exactly one run and is then destroyed. All workers are started by one long-lived spawner
thread: bwrap's ``--die-with-parent`` is ``PR_SET_PDEATHSIG``, which fires when the *thread* that started the
process ends, so starting them from short-lived worker threads would kill them early.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, Protocol, TypeVar


class Worker(Protocol):
    """What the pool needs of a started worker."""

    def alive(self) -> bool:
        """True while the worker can still take a run."""
        ...

    def discard(self) -> None:
        """Kill it and release everything it holds; idempotent."""
        ...


W = TypeVar("W", bound=Worker)


class WarmPool(Generic[W]):
    """Keeps ``size`` idle workers made by ``spawn`` (``size=0``: each run waits for its own start).

    ``spawn`` raises ``OSError`` when a worker cannot be started; :meth:`take` re-raises it.
    """

    def __init__(self, spawn: Callable[[], W], size: int, name: str = "sandbox-spawner") -> None:
        self.size = max(0, size)
        self._spawn = spawn
        self._name = name
        self._idle: list[W] = []
        self._waiters: collections.deque[Future[W]] = collections.deque()
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def take(self, timeout_s: float = 60.0) -> W:
        """An idle live worker, else one started for this call (waits up to ``timeout_s``).

        Raises:
            OSError: the worker could not be started (the spawner's error), or the pool is closed.
            TimeoutError: no worker within ``timeout_s``.
        """
        dead: list[W] = []
        try:
            with self._cv:
                if self._closed:
                    raise OSError("sandbox pool is closed")
                self._ensure_thread()
                while self._idle:
                    worker = self._idle.pop(0)
                    if worker.alive():
                        self._cv.notify_all()
                        return worker
                    dead.append(worker)
                future: Future[W] = Future()
                self._waiters.append(future)
                self._cv.notify_all()
        finally:
            for worker in dead:
                worker.discard()
        return future.result(timeout=timeout_s)

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._closed and not self._waiters and len(self._idle) >= self.size:
                    self._cv.wait()
                if self._closed:
                    return
            error: OSError | None = None
            worker: W | None = None
            try:
                worker = self._spawn()
            except OSError as exc:
                error = exc
            future = None
            with self._cv:
                if self._waiters:
                    future = self._waiters.popleft()
                elif worker is not None and not self._closed:
                    self._idle.append(worker)
                    worker = None
            if future is not None:
                if error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(worker)  # type: ignore[arg-type]
            else:
                if worker is not None:
                    worker.discard()
                if error is not None:
                    time.sleep(0.5)  # nobody waits for it: do not spin on a failing start

    def close(self) -> None:
        """Destroy the idle workers and stop the spawner (at interpreter exit or on reconfiguration)."""
        with self._cv:
            self._closed = True
            idle, self._idle = self._idle, []
            waiters, self._waiters = list(self._waiters), collections.deque()
            self._cv.notify_all()
        for future in waiters:
            future.set_exception(OSError("sandbox pool is closed"))
        for worker in idle:
            worker.discard()
