"""bench/cpu_share: CPU per item from /proc snapshots, and the items/s that cost allows."""

from __future__ import annotations

import importlib.util
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str) -> ModuleType:
    """A module of bench/ loaded by path (bench/ is not put on sys.path: its module names are generic)."""
    spec = importlib.util.spec_from_file_location(name, BENCH_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


idle_cost = _load("idle_cost")
cpu_share = _load("cpu_share")
TICKS = idle_cost.TICKS


def test_per_item_ms_divides_the_ticks_spent_by_the_items() -> None:
    before = {"scheduler": 100, "broker": 50, "gone": 7}
    after = {"scheduler": 100 + 4 * TICKS, "broker": 50 + TICKS}  # 4 s and 1 s of CPU
    # 4000 ms / 1000 items = 4 ms per item; a part missing from one snapshot is left out
    assert cpu_share.per_item_ms(before, after, 1000) == {"scheduler": pytest.approx(4.0), "broker": pytest.approx(1.0)}
    with pytest.raises(ValueError, match="items must be at least 1"):
        cpu_share.per_item_ms(before, after, 0)


def test_ceiling_is_cores_times_a_second_over_the_cpu_per_item() -> None:
    # 2 cores, 4 ms of CPU per item in all: 2 × 1000 / 4 = 500 items/s
    assert cpu_share.ceiling({"a": 3.0, "b": 1.0}, cores=2) == pytest.approx(500.0)
    assert cpu_share.ceiling({"a": 4.0}) == pytest.approx(len(os.sched_getaffinity(0)) * 250.0)
    with pytest.raises(ValueError, match="no CPU time measured"):
        cpu_share.ceiling({"a": 0.0}, cores=2)


SPIN = "i=0; while [ $i -lt 2000000 ]; do i=$((i+1)); done"
"""A fixed amount of shell work (about 1–2 s of CPU)."""


def _spin_cpu_ticks() -> float:
    """Ticks of CPU one run of :data:`SPIN` takes on this machine (measured as a reaped child's rusage)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(["sh", "-c", SPIN], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * TICKS


def _wait_for(predicate: Callable[[], object], timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_a_stack_process_counts_its_children_alive_and_reaped(tmp_path: Path) -> None:
    # a parent shell that runs a spinning child shell, waits for it, then sleeps
    reference = _spin_cpu_ticks()
    parent = subprocess.Popen(["sh", "-c", f"sh -c '{SPIN}'; sleep 30"], start_new_session=True)
    try:
        (tmp_path / "pids").mkdir()
        (tmp_path / "pids" / "svc.pid").write_text(str(parent.pid))
        before = cpu_share.snapshot(tmp_path)
        assert set(before) == {"svc", cpu_share.POSTGRES, cpu_share.REDIS}
        # while the child runs, its time shows in the parent's tree; once reaped, in the parent's cutime
        assert _wait_for(lambda: not [p for p in _children(parent.pid) if _comm(p) == "sh"] and _children(parent.pid))
        after = cpu_share.snapshot(tmp_path)
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
    spent = after["svc"] - before["svc"]
    assert 0.5 * reference <= spent <= 1.6 * reference  # the child's work, counted once (twice would be 2×)


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def test_named_ticks_keeps_the_time_of_exited_children(tmp_path: Path) -> None:
    # a server-like parent under a command name of its own that runs, waits for and outlives a spinning worker
    # of the same name, as PostgreSQL's postmaster does its backends
    shell = tmp_path / "uepspin"
    shutil.copy(shutil.which("sh") or "/bin/sh", shell)
    reference = _spin_cpu_ticks()
    before = cpu_share.named_ticks("uepspin")
    parent = subprocess.Popen([str(shell), "-c", f"{shell} -c '{SPIN}'; sleep 30"], start_new_session=True)
    try:
        assert _wait_for(lambda: _children(parent.pid) and not [p for p in _children(parent.pid) if _comm(p) == "uepspin"])
        after = cpu_share.named_ticks("uepspin")  # the worker has exited: only the parent is alive
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
    assert before == 0
    assert 0.5 * reference <= after <= 1.6 * reference


def test_the_bench_share_is_this_process_alone() -> None:
    own = cpu_share.snapshot(None, own=True)[cpu_share.BENCH]
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    assert abs(own - (int(fields[11]) + int(fields[12]))) <= 2  # utime + stime, in ticks, read a moment apart


def test_table_prints_a_row_per_run_with_its_total_and_ceiling() -> None:
    lines = cpu_share.table([("1,000", {"scheduler": 1.5, "broker": 0.5, "judge": 0.001})], cores=2)
    assert lines[0].split() == ["broker", "scheduler", "total", "ceiling/s"]  # judge is under 0.01 ms: no column
    assert lines[1].split() == ["1,000", "0.50", "1.50", "2.00", f"{2 * 1000 / 2.001:.0f}"]
