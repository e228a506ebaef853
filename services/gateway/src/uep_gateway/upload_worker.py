"""Bounded worker processes for the gateway's CPU-heavy request work (parsing and validating benchmark
uploads, rendering their prompt templates), so that the event loop keeps answering while they run.

Built on the standard library's :class:`concurrent.futures.ProcessPoolExecutor`: each worker slot is a
one-process executor started through a ``forkserver`` (forked from a server that has already imported
pyarrow and Jinja2, so a replacement is ready in milliseconds). Its initializer sets ``RLIMIT_AS`` (the
memory budget, address space in bytes), so an allocation past it fails inside the worker (``MemoryError``)
instead of growing the gateway, and lowers its scheduling priority (nice 10) below the event loop's. The parent gives each job a wall-clock budget; past it the worker is killed
(``SIGKILL``) and replaced. A job that needs a slot waits until one is free.

A job tells the parent which phase it is in (:func:`set_phase`: ``"parse"`` or ``"render"``) through shared
memory, so that a job killed for its budget can be blamed on the right field (the file, or the template).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import multiprocessing
import os
import resource
import signal
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

log = logging.getLogger(__name__)

PHASES = ("idle", "parse", "render")
_PRELOAD = ["pyarrow", "pyarrow.parquet", "pyarrow.compute", "jinja2", "uep_gateway.uploads"]

# Set in a worker process by its initializer: a shared int array [pid, phase index].
_shared = None


class BudgetExceeded(Exception):  # noqa: N818 - a public name that callers and tests catch; renaming it breaks them
    """A job ran past its budget and its worker was stopped (and replaced).

    Attributes:
        kind: ``"time"`` (wall-clock budget, ``limit`` in seconds) or ``"memory"`` (address-space budget,
            ``limit`` in bytes; also a worker that died of an allocation failure).
        phase: what the job was doing: ``"parse"``, ``"render"`` or ``"idle"`` (not told).
        elapsed_s: seconds from the job's start to its refusal.
    """

    def __init__(self, kind: str, phase: str, limit: float, elapsed_s: float) -> None:
        self.kind, self.phase, self.limit, self.elapsed_s = kind, phase, limit, elapsed_s
        what = f"{limit:g} s of wall-clock time" if kind == "time" else f"{int(limit)} bytes of memory"
        super().__init__(f"the work needed more than {what} (stopped after {elapsed_s:.1f} s while in {phase})")


def set_phase(phase: str) -> None:
    """Record the phase (one of :data:`PHASES`) of the job running in this worker; a no-op outside one."""
    if _shared is not None:
        _shared[1] = PHASES.index(phase)


def _init_worker(shared: ctypes.Array[Any], memory_bytes: int) -> None:
    global _shared
    _shared = shared
    shared[0] = os.getpid()
    shared[1] = 0
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when a worker stops
    os.nice(10)  # on a busy machine the gateway's event loop gets the CPU before its workers
    try:
        import pyarrow as pa

        pa.set_cpu_count(1)  # fewer threads: less address space taken by their stacks
        pa.set_io_thread_count(1)
    except Exception:  # noqa: BLE001 - pyarrow is optional for the jobs that do not read Parquet
        pass
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


def _ready() -> int:
    return os.getpid()


def _run_job(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[str, Any]:
    """Run ``fn(*args)`` in the worker: ``("ok", result)``, ``("error", exception)`` or ``("memory", phase)``."""
    try:
        return "ok", fn(*args)
    except MemoryError:
        return "memory", PHASES[_shared[1]] if _shared is not None else "idle"
    except Exception as exc:  # noqa: BLE001 - handed to the caller, which raises it
        return "error", exc
    finally:
        set_phase("idle")


STARTUP_TIMEOUT_S = 300.0
"""Longest wait for a new worker process to report ready."""


class _Slot:
    """One worker: a one-process executor, and its shared ``[pid, phase]``."""

    def __init__(self, ctx: multiprocessing.context.BaseContext, memory_bytes: int) -> None:
        self.shared = ctx.RawArray("i", 2)
        self.executor = ProcessPoolExecutor(1, mp_context=ctx, initializer=_init_worker, initargs=(self.shared, memory_bytes))
        # A fresh worker imports pyarrow and the template sandbox: seconds when idle, a minute or more on a
        # saturated 2-core machine.
        self.pid = self.executor.submit(_ready).result(timeout=STARTUP_TIMEOUT_S)

    @property
    def phase(self) -> str:
        i = self.shared[1]
        return PHASES[i] if 0 <= i < len(PHASES) else "idle"

    def stop_process(self) -> None:
        """SIGKILL the worker process (a syscall: safe on the event loop)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def kill(self) -> None:
        """Stop the process and shut its executor down. The shutdown takes the executor's lock, which its
        manager thread holds while it tears down a broken pool: call it off the event loop."""
        self.stop_process()
        self.executor.shutdown(wait=False, cancel_futures=True)


class WorkerPool:
    """``workers`` bounded worker processes; :meth:`run` runs one job in a free one.

    Args:
        workers: number of worker processes (jobs beyond it wait for a free one).
        timeout_s: default wall-clock budget of a job, seconds.
        memory_bytes: ``RLIMIT_AS`` of each worker, bytes (the interpreter and its libraries included).
    """

    def __init__(self, workers: int, timeout_s: float, memory_bytes: int) -> None:
        self.workers, self.timeout_s, self.memory_bytes = workers, timeout_s, memory_bytes
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(_PRELOAD)
        self._free: asyncio.Queue[_Slot] | None = None
        self._slots: set[_Slot] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self.replaced = 0  # workers killed and replaced so far (for tests and logs)

    async def start(self) -> None:
        """Start the worker processes (in a thread: the forkserver's first start imports libraries)."""
        if self._free is not None:
            return
        self._free = asyncio.Queue()
        slots = await asyncio.gather(*(asyncio.to_thread(_Slot, self._ctx, self.memory_bytes) for _ in range(self.workers)))
        for s in slots:
            self._slots.add(s)
            self._free.put_nowait(s)

    async def run(self, fn: Callable[..., Any], *args: Any, timeout_s: float | None = None) -> Any:
        """``fn(*args)`` in a worker process (``fn`` and its arguments and result must pickle).

        Raises:
            BudgetExceeded: the job ran past ``timeout_s`` (default: the pool's) or the memory budget; the
                worker was stopped and is being replaced.
            Exception: whatever ``fn`` raised (passed through).
        """
        if self._closed:
            raise RuntimeError("the worker pool is closed")
        await self.start()
        free = self._free
        assert free is not None  # set by start()
        budget = self.timeout_s if timeout_s is None else timeout_s
        slot = await free.get()
        t0 = time.monotonic()
        healthy = False
        try:
            try:
                cfut = slot.executor.submit(_run_job, fn, args)
            except BrokenProcessPool:
                raise BudgetExceeded("memory", "idle", self.memory_bytes, 0.0) from None
            afut = asyncio.wrap_future(cfut)
            afut.add_done_callback(lambda f: f.cancelled() or f.exception())
            done, _ = await asyncio.wait({afut}, timeout=budget)
            elapsed = time.monotonic() - t0
            if not done:
                raise BudgetExceeded("time", slot.phase, budget, elapsed)
            try:
                status, value = afut.result()
            except BrokenProcessPool:  # the worker died (e.g. killed by the kernel, or aborted on an allocation)
                raise BudgetExceeded("memory", slot.phase, self.memory_bytes, elapsed) from None
            if status == "memory":
                raise BudgetExceeded("memory", value, self.memory_bytes, elapsed)
            healthy = True
            if status == "error":
                raise value
            return value
        finally:
            if healthy:
                free.put_nowait(slot)
            else:  # timed out, out of memory, died, or the caller was cancelled mid-job: never reuse it
                self._replace(slot)

    def _replace(self, slot: _Slot) -> None:
        free = self._free
        assert free is not None  # the slot came from it (run, after start())
        slot.stop_process()  # at once; the executor's shutdown runs in a thread below
        self._slots.discard(slot)
        self.replaced += 1
        if not self._closed:
            log.warning("upload worker %s stopped (budget); starting a replacement", slot.pid)

        async def replace() -> None:
            await asyncio.to_thread(slot.kill)
            while not self._closed:
                try:
                    new = await asyncio.to_thread(_Slot, self._ctx, self.memory_bytes)
                except Exception:
                    log.exception("could not start an upload worker; retrying")
                    await asyncio.sleep(1.0)
                    continue
                if self._closed:
                    new.kill()
                    return
                self._slots.add(new)
                free.put_nowait(new)
                return

        task = asyncio.get_running_loop().create_task(replace())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        """Stop every worker (running jobs are abandoned) and the replacements being started."""
        self._closed = True
        for t in list(self._tasks):
            t.cancel()
        for s in list(self._slots):
            s.kill()
        self._slots.clear()
