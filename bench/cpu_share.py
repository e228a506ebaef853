"""bench/cpu_share: the CPU time each part of a local stack spends per item over a run, from /proc.

A run on a machine of C usable cores whose processes are all busy can go no faster than
``C × 1000 / (ms of CPU per item, summed over every part)`` items a second; :func:`ceiling` is that bound.
Printed by ``bench/scale`` and ``bench/classifier_throughput`` beside their items/s, it says where a run's time
goes and how far a cut in one part could take it.

The parts:

- each stack process (the ``<run dir>/pids/*.pid`` files, as ``bench/idle_cost`` reads them) with its live
  descendants;
- PostgreSQL's server (:data:`POSTGRES`): every process of that command name, and Redis (:data:`REDIS`). The
  servers are shared with other databases, so measure on an otherwise idle machine;
- optionally the bench's own process (:data:`BENCH`): a direct client's cost.

A process's CPU time is ``utime + stime`` of ``/proc/<pid>/stat`` plus ``cutime + cstime``, the time of the
children it has waited for. So a backend that PostgreSQL's postmaster started and reaped during the run, or a
sandbox process a service ran, still counts. Times are in ``SC_CLK_TCK`` ticks, so a window should hold at least
a few seconds of work. The bench's own share counts this process alone: its children are the stack's processes,
counted under their own names.
"""

from __future__ import annotations

import os
from pathlib import Path

from idle_cost import TICKS, descendants, processes, stack_pids

POSTGRES = "postgres"
"""Command name of PostgreSQL's processes, and the name of their share in a snapshot."""
REDIS = "redis-server"
"""Command name of the Redis server, and the name of its share in a snapshot."""
BENCH = "bench"
"""Name of the bench process's own share (``snapshot(..., own=True)``)."""


def _comm(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def tree_ticks(roots: dict[str, int], procs: dict[int, tuple[int, int, int]] | None = None) -> dict[str, int]:
    """CPU ticks so far of each root PID and its live descendants, with the children each has reaped.
    ``procs``: ``idle_cost.processes()`` when the caller has read it already."""
    procs = processes() if procs is None else procs
    out = {}
    for name, root in roots.items():
        tree = [procs[pid] for pid in descendants(root, procs) if pid in procs]
        out[name] = sum(own + reaped for _ppid, own, reaped in tree)
    return out


def named_ticks(comm: str, procs: dict[int, tuple[int, int, int]] | None = None) -> int:
    """CPU ticks so far of every live process whose command name is ``comm``, with the children each has reaped
    (a server's exited backends)."""
    procs = processes() if procs is None else procs
    return sum(own + reaped for pid, (_ppid, own, reaped) in procs.items() if _comm(pid) == comm)


def snapshot(run_dir: Path | None, *, own: bool = False) -> dict[str, int]:
    """CPU ticks so far of each stack process under ``run_dir`` (none when it is None), of PostgreSQL's server
    (:data:`POSTGRES`), of Redis (:data:`REDIS`) and, with ``own``, of this process alone (:data:`BENCH`)."""
    procs = processes()
    out = tree_ticks(stack_pids(run_dir), procs) if run_dir else {}
    out[POSTGRES] = named_ticks(POSTGRES, procs)
    out[REDIS] = named_ticks(REDIS, procs)
    if own:
        st = procs.get(os.getpid())
        out[BENCH] = st[1] if st else 0
    return out


def per_item_ms(before: dict[str, int], after: dict[str, int], items: int) -> dict[str, float]:
    """Milliseconds of CPU per item of each part present in both snapshots: ``(after - before) / TICKS × 1000 /
    items``. Raises ValueError when ``items`` < 1."""
    if items < 1:
        raise ValueError(f"items must be at least 1, not {items}")
    return {k: (after[k] - before[k]) * 1000 / TICKS / items for k in before if k in after}


def usable_cores() -> int:
    """CPUs this process may run on (its affinity mask), which the stack it started inherits."""
    return len(os.sched_getaffinity(0))


def ceiling(ms_per_item: dict[str, float], cores: int | None = None) -> float:
    """Items a second that ``cores`` (default :func:`usable_cores`) could give if they did nothing but this work:
    ``cores × 1000 / sum(ms_per_item)``. Raises ValueError when the sum is not positive (no CPU measured)."""
    total = sum(ms_per_item.values())
    if total <= 0:
        raise ValueError(f"no CPU time measured ({total:.3f} ms per item)")
    return (cores if cores is not None else usable_cores()) * 1000 / total


def table(rows: list[tuple[str, dict[str, float]]], cores: int | None = None, skip_below: float = 0.01) -> list[str]:
    """Lines of a table, one row per ``(label, ms per item by part)``: a column per part that reaches
    ``skip_below`` ms in some row, then the total (every part) and :func:`ceiling` on ``cores``."""
    names = sorted({k for _, r in rows for k, v in r.items() if v >= skip_below})
    width = max([10, *(len(label) for label, _ in rows)])
    lines = [" " * (width + 2) + "".join(f"{k:>11}" for k in names) + f"{'total':>9}{'ceiling/s':>11}"]
    for label, r in rows:
        cells = "".join(f"{r.get(k, 0.0):11.2f}" for k in names)
        total = sum(r.values())
        limit = f"{ceiling(r, cores):11.0f}" if total > 0 else f"{'—':>11}"
        lines.append(f"  {label:>{width}}{cells}{total:9.2f}{limit}")
    return lines
