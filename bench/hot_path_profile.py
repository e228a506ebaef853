"""bench/hot_path_profile: where each service spends its CPU on an instant model, sampled with py-spy.

Starts a private stack serving ``uep-bench-echo`` with no service time (``UEP_BENCH_SERVICE_MS=0``: a model that
answers at once, so the pipeline's own cost is all there is), runs a warm-up evaluation, then one of ``--items``
items at ``--parallel`` items in flight while ``py-spy record --format raw`` samples each of the six services for
``--seconds``. Prints, per service, its busy samples (those not waiting in the event loop's selector) and the functions holding
the most of them: inclusive (uep's function or anything it called was running) and own (the innermost frame), as
a share of that service's busy samples, with each path shortened to its package.

Needs ``py-spy`` (PyPI; ``--py-spy PATH``) and permission to trace the services (same user, ptrace allowed).

Usage: ``python bench/hot_path_profile.py [--items 3000] [--parallel 8] [--seconds 15] [--top 12]
[--py-spy py-spy] [--port-base 20000] [--database uep_bench_profile] [--redis-db 14] [--run-dir .run/bench-profile]
[--out DIR]``
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy" / "local"))
sys.path.insert(0, str(ROOT / "bench"))

SERVICES = ("gateway", "scheduler", "inference", "scorer", "judge", "reporter")


def short(frame: str) -> str:
    """``function (path:line)`` from py-spy's raw format, with the path cut to its package and no line."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rpartition(":")[0]
    for marker in ("site-packages/", "/src/", "/lib/python3.11/"):
        if marker in path:
            path = path.rpartition(marker)[2]
            break
    return f"{name} ({path})"


IDLE = "EpollSelector.select"
"""The innermost frame of an event loop waiting for work: such samples are idle, left out of the shares."""


ENTRY = frozenset({"main", "run", "serve", "_default"})
"""uep's entry points (a service's ``main``, the HTTP server's ``run``, ``serve``): they hold every busy sample."""


def summarize(raw: Path, top: int) -> tuple[int, int, list[tuple[str, float]], list[tuple[str, float]]]:
    """``(samples, busy samples, [(uep function, inclusive share)], [(function, own share)])`` of a py-spy raw
    file; shares are of the busy samples (those not waiting in the event loop's selector), inclusive ones of uep's
    own functions only (the frames of packages ``uep_*``: the framework's frames hold every sample)."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = busy = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [short(f) for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        total += n
        if frames[-1].startswith(IDLE):
            continue
        busy += n
        own[frames[-1]] += n
        for f in {f for f in frames if "(uep_" in f and f.partition(" ")[0] not in ENTRY}:
            inclusive[f] += n

    def share(c: Counter[str]) -> list[tuple[str, float]]:
        return [(k, v / busy) for k, v in c.most_common(top)] if busy else []

    return total, busy, share(inclusive), share(own)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=3000, help="items of the profiled evaluation")
    ap.add_argument("--parallel", type=int, default=8, help="items in flight (the evaluation's max_parallel)")
    ap.add_argument("--seconds", type=float, default=15.0, help="sampling window, started with the evaluation")
    ap.add_argument("--top", type=int, default=12, help="functions listed per service")
    ap.add_argument("--py-spy", default="py-spy", help="the py-spy executable")
    ap.add_argument("--port-base", type=int, default=20000, help="UEP_STACK_PORT_BASE of the bench's private stack")
    ap.add_argument("--database", default="uep_bench_profile", help="PostgreSQL database of the bench's stack")
    ap.add_argument("--redis-db", type=int, default=14, help="Redis database number of the bench's stack")
    ap.add_argument("--run-dir", default=str(ROOT / ".run" / "bench-profile"), help="run directory of the bench's stack")
    ap.add_argument("--out", type=Path, default=None, help="keep the raw py-spy files here")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the stack (finally) on kill too
    from free_ports import echo_stack_env, start_fresh

    os.environ.update(
        echo_stack_env(args.port_base, args.run_dir, args.database, args.redis_db)
        | {"UEP_BENCH_SERVICE_MS": "0", "UEP_MAX_ITEMS_PER_EVALUATION": str(max(100_000, args.items))}
    )
    import httpx

    import uep_stack
    from idle_cost import stack_pids
    from uep_common.runtime.session import make_sync_engine

    cfg = uep_stack.config()
    start_fresh(cfg)
    engine = make_sync_engine(cfg.database_url)
    out = args.out or Path(tempfile.mkdtemp(prefix="uep-profile-"))
    out.mkdir(parents=True, exist_ok=True)

    def evaluate(n: int) -> None:
        from sqlalchemy import text

        body = {
            "benchmark": "mmlu",
            "model": "uep-bench-echo",
            "sample_limit": n,
            "sampling": "first",
            "max_parallel": args.parallel,
        }
        with httpx.Client(base_url=cfg.gateway_url, timeout=60, headers=cfg.auth_headers()) as c:
            r = c.post("/v1/evaluations", json=body)
            r.raise_for_status()
            eid = r.json()["id"]
        while True:
            time.sleep(0.5)
            with engine.connect() as c:
                status = c.execute(text("SELECT status FROM evaluations WHERE id = :e"), {"e": eid}).scalar_one()
            if status not in ("pending", "running"):
                return

    try:
        evaluate(500)  # warm-up
        pids = {k: v for k, v in stack_pids(cfg.run_dir).items() if k in SERVICES}
        runner = threading.Thread(target=evaluate, args=(args.items,))
        runner.start()
        time.sleep(1.0)
        spies = {
            name: subprocess.Popen(
                [
                    args.py_spy,
                    "record",
                    "--pid",
                    str(pid),
                    "--duration",
                    str(int(args.seconds)),
                    "--rate",
                    "200",
                    "--format",
                    "raw",
                    "--nonblocking",
                    "--output",
                    str(out / f"{name}.txt"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )  # fmt: skip
            for name, pid in pids.items()
        }
        for spy in spies.values():
            spy.wait()
        runner.join()
    finally:
        uep_stack.down(cfg)
        engine.dispose()
    for name in SERVICES:
        raw = out / f"{name}.txt"
        if not raw.exists():
            print(f"\n{name}: no samples (py-spy failed)")
            continue
        total, busy, inclusive, own = summarize(raw, args.top)
        print(
            f"\n{name}: {busy} busy samples of {total} over {args.seconds:.0f} s at 200/s ({busy / args.seconds / 2:.0f} % of one core)"
        )
        print("  inclusive (uep's functions):")
        for fn, s in inclusive:
            print(f"    {100 * s:5.1f} %  {fn}")
        print("  own:")
        for fn, s in own:
            print(f"    {100 * s:5.1f} %  {fn}")
    print(f"\nraw py-spy files in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
