"""bench/cpu_share: CPU per item from /proc snapshots, and the items/s that cost allows."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import cpu_share
from idle_cost import TICKS


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
    assert cpu_share.ceiling({}, cores=2) == float("inf")


def test_snapshot_counts_a_stack_process_with_its_children(tmp_path: Path) -> None:
    # a parent that only waits, whose child spins for up to 5 s of CPU
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 5: pass\n"
    parent = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {spin!r}])"],
        start_new_session=True,
    )
    try:
        (tmp_path / "pids").mkdir()
        (tmp_path / "pids" / "svc.pid").write_text(str(parent.pid))
        before = cpu_share.snapshot(tmp_path, own=True)
        assert set(before) == {"svc", cpu_share.POSTGRES, cpu_share.BENCH}
        deadline, spent = time.monotonic() + 20, 0
        while spent < TICKS // 2 and time.monotonic() < deadline:  # the child's time shows in the parent's tree
            time.sleep(0.05)
            now = cpu_share.snapshot(tmp_path)
            spent = now["svc"] - before["svc"]
    finally:
        os.killpg(parent.pid, signal.SIGKILL)  # the parent and its child
        parent.wait()
    assert spent >= TICKS // 2
    assert cpu_share.BENCH not in now


def test_table_prints_a_row_per_run_with_its_total_and_ceiling() -> None:
    lines = cpu_share.table([("1,000", {"scheduler": 1.5, "broker": 0.5, "judge": 0.001})])
    assert lines[0].split() == ["broker", "scheduler", "total", "ceiling/s"]  # judge is under 0.01 ms: no column
    cores = cpu_share.os.cpu_count() or 1
    assert lines[1].split() == ["1,000", "0.50", "1.50", "2.00", f"{cores * 1000 / 2.001:.0f}"]
