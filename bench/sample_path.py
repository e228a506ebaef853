"""bench/sample_path: which of our source files one evaluation's path runs through, per service.

A private stack (its own ports, run directory, database and Redis db; Triton with the echo model only) starts
with a profile hook in every service (``bench/path_trace/sitecustomize.py``: ``sys.setprofile`` and
``threading.setprofile`` record the file of each Python function called in ``libs/`` and ``services/``). After the
stack has been idle for ``--settle`` seconds, each service is told to forget what it recorded (SIGUSR1), one
``--items``-item echo evaluation of MMLU runs from ``POST /v1/evaluations`` to ``completed``, and each service
writes what it ran since (SIGUSR2). An idle window of the same length is recorded the same way, so the files the
background loops run anyway (heartbeats, backstop polls) are shown apart.

Prints, per service and in total: the files on the path, how many of them are in the shared library, and the
files of the idle window; with ``--list`` every file. The shared library never calls back into a service
(import-linter's ``library-below-services`` contract in ``make check``), so no call climbs back up.

Usage: ``python bench/sample_path.py [--items 1] [--settle 20] [--list]``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy" / "local"))

TRACE_DIR = Path(__file__).resolve().parent / "path_trace"
ENDED = ("completed", "failed", "cancelled", "stopped", "budget_exhausted")


def signal_services(cfg, services: list[str], sig: int) -> None:
    """Send ``sig`` to each service's process (PID files of the stack's run directory)."""
    import processes

    for name in services:
        pid = processes.read_pid(cfg, name)
        if pid is not None:
            os.kill(pid, sig)


def collect(out_dir: Path, services: list[str], wait_s: float = 10.0) -> dict[str, set[str]]:
    """The files each service wrote after a SIGUSR2 (``<out_dir>/<service>.json``), relative to the repository."""
    deadline = time.monotonic() + wait_s
    files: dict[str, set[str]] = {}
    while time.monotonic() < deadline and len(files) < len(services):
        for name in services:
            p = out_dir / f"{name}.json"
            if name not in files and p.exists():
                try:
                    files[name] = {str(Path(f).relative_to(ROOT)) for f in json.loads(p.read_text())}
                except json.JSONDecodeError:  # still being written
                    continue
        time.sleep(0.2)
    return files


def window(cfg, services: list[str], out_dir: Path, action) -> dict[str, set[str]]:
    """Files run by each service while ``action()`` runs (forget, act, dump, collect)."""
    for p in out_dir.glob("*.json"):
        p.unlink()
    signal_services(cfg, services, signal.SIGUSR1)
    time.sleep(0.5)
    action()
    signal_services(cfg, services, signal.SIGUSR2)
    return collect(out_dir, services)


def run_evaluation(cfg, engine, n: int) -> float:
    """Post an ``n``-item echo evaluation of MMLU and wait until it ends; returns its seconds."""
    from sqlalchemy import text

    body = {"benchmark": "mmlu", "model": "uep-bench-echo", "sample_limit": n, "sampling": "first"}
    t0 = time.perf_counter()
    with httpx.Client(base_url=cfg.gateway_url, timeout=60, headers=cfg.auth_headers()) as c:
        r = c.post("/v1/evaluations", json=body)
        r.raise_for_status()
        eid = r.json()["id"]
    while True:
        with engine.connect() as c:
            status = c.execute(text("SELECT status FROM evaluations WHERE id = :e"), {"e": eid}).scalar_one()
        if status in ENDED:
            break
        time.sleep(0.2)
    assert status == "completed", status
    time.sleep(2.0)  # the reporter's summary, the outbox's last events
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=1, help="items of the traced evaluation")
    ap.add_argument("--settle", type=float, default=20.0, help="idle seconds before the first window")
    ap.add_argument("--list", action="store_true", help="print every file")
    ap.add_argument("--port-base", type=int, default=24500, help="UEP_STACK_PORT_BASE of the bench's private stack")
    ap.add_argument("--database", default="uep_bench_path")
    ap.add_argument("--redis-db", type=int, default=4)
    ap.add_argument("--run-dir", default=str(ROOT / ".run" / "bench-path"))
    args = ap.parse_args()

    out_dir = Path(args.run_dir) / "path-trace"
    out_dir.mkdir(parents=True, exist_ok=True)
    from free_ports import echo_stack_env, start_fresh

    os.environ.update(echo_stack_env(args.port_base, args.run_dir, args.database, args.redis_db))
    import uep_stack
    from uep_common.runtime.session import make_sync_engine

    cfg = uep_stack.config()
    services = cfg.instances()
    start_fresh(cfg)
    engine = make_sync_engine(cfg.database_url)
    try:
        uep_stack.stop(cfg, uep_stack.SERVICES)  # again, with the profile hook
        env = {
            "PYTHONPATH": os.pathsep.join(filter(None, [str(TRACE_DIR), os.environ.get("PYTHONPATH")])),
            "UEP_PATH_TRACE_DIR": str(out_dir),
            "UEP_PATH_TRACE_ROOT": str(ROOT),
        }
        uep_stack.start_services(dataclasses.replace(cfg, extra_env={**cfg.extra_env, **env}))
        run_evaluation(cfg, engine, args.items)  # warm-up: consumers joined, caches filled
        time.sleep(args.settle)
        seconds = 0.0

        def traced() -> None:
            nonlocal seconds
            seconds = run_evaluation(cfg, engine, args.items)

        path = window(cfg, services, out_dir, traced)
        idle = window(cfg, services, out_dir, lambda: time.sleep(seconds))
    finally:
        engine.dispose()
        uep_stack.down(cfg)

    lib = "libs/common/"
    print(f"one {args.items}-item echo evaluation, POST → completed in {seconds:.1f} s (traced), per service:")
    print(f"  {'service':<12}{'files':>7}{'in uep_common':>15}{'idle window':>13}")
    union: set[str] = set()
    for name in services:
        on_path = path.get(name, set())
        union |= on_path
        in_lib = sum(f.startswith(lib) for f in on_path)
        print(f"  {name:<12}{len(on_path):>7}{in_lib:>15}{len(idle.get(name, set())):>13}")
    in_lib = sum(f.startswith(lib) for f in union)
    print(f"  {'all':<12}{len(union):>7}{in_lib:>15}   (distinct files; goal ≤ 18)")
    if args.list:
        for name in services:
            print(f"\n{name}:")
            for f in sorted(path.get(name, set())):
                mark = "" if f in idle.get(name, set()) else "  (not in the idle window)"
                print(f"  {f}{mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
