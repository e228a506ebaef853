"""bench/cpu_share: the CPU time each part of a local stack spends per item over a run, from /proc.

A run on a machine of C cores whose processes are all busy can go no faster than
``C × 1000 / (ms of CPU per item, summed over every process)`` items a second; :func:`ceiling` is that bound.
Printed by ``bench/scale`` and ``bench/classifier_throughput`` beside their items/s, it says where a run's time
goes and how far a cut in one process could take it.

The parts are the stack's processes with their descendants (the ``<run dir>/pids/*.pid`` files, as
``bench/idle_cost`` reads them) and PostgreSQL's server (every process named ``postgres``: the server is shared
with other databases, so measure on an otherwise idle machine) and, optionally, the bench's own process (a
direct client's cost). CPU time is ``utime + stime`` of ``/proc/<pid>/stat``, in clock ticks (1/100 s here), so
a window should hold at least a few seconds of work.
"""

from __future__ import annotations

import os
from pathlib import Path

from idle_cost import TICKS, _stat, stack_pids, tree_ticks

POSTGRES = "postgres"
"""Name of the PostgreSQL server's share in a snapshot."""
BENCH = "bench"
"""Name of the bench process's own share (``snapshot(..., own=True)``)."""


def postgres_ticks() -> int:
    """CPU ticks of every live process whose command name is ``postgres`` (the postmaster and its backends)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm") as f:
                if f.read().strip() != POSTGRES:
                    continue
        except OSError:
            continue
        st = _stat(int(entry))
        if st is not None:
            total += st[1]
    return total


def snapshot(run_dir: Path | None, *, own: bool = False) -> dict[str, int]:
    """CPU ticks so far of each stack process under ``run_dir`` (with descendants; none when ``run_dir`` is None),
    of PostgreSQL's server (:data:`POSTGRES`) and, with ``own``, of this process (:data:`BENCH`)."""
    out = {name: ticks for name, (ticks, _switches) in tree_ticks(stack_pids(run_dir)).items()} if run_dir else {}
    out[POSTGRES] = postgres_ticks()
    if own:
        t = os.times()
        out[BENCH] = round((t.user + t.system) * TICKS)
    return out


def per_item_ms(before: dict[str, int], after: dict[str, int], items: int) -> dict[str, float]:
    """Milliseconds of CPU per item of each part present in both snapshots: ``(after - before) / TICKS × 1000 /
    items``. Raises ValueError when ``items`` < 1."""
    if items < 1:
        raise ValueError(f"items must be at least 1, not {items}")
    return {k: (after[k] - before[k]) * 1000 / TICKS / items for k in before if k in after}


def ceiling(ms_per_item: dict[str, float], cores: int | None = None) -> float:
    """Items a second that ``cores`` (default: this machine's) could give if they did nothing but this work:
    ``cores × 1000 / sum(ms_per_item)``; infinite for no CPU at all."""
    total = sum(ms_per_item.values())
    n = cores if cores is not None else (os.cpu_count() or 1)
    return float("inf") if total <= 0 else n * 1000 / total


def table(rows: list[tuple[str, dict[str, float]]], skip_below: float = 0.01) -> list[str]:
    """Lines of a table, one row per ``(label, ms per item by part)``: a column per part that reaches
    ``skip_below`` ms in some row, then the total and :func:`ceiling`."""
    names = sorted({k for _, r in rows for k, v in r.items() if v >= skip_below})
    width = max([10, *(len(label) for label, _ in rows)])
    lines = [" " * (width + 2) + "".join(f"{k:>11}" for k in names) + f"{'total':>9}{'ceiling/s':>11}"]
    for label, r in rows:
        cells = "".join(f"{r.get(k, 0.0):11.2f}" for k in names)
        lines.append(f"  {label:>{width}}{cells}{sum(r.values()):9.2f}{ceiling(r):11.0f}")
    return lines
