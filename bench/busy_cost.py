"""bench/busy_cost: CPU the stack spends per item while an evaluation runs slowly (one slot, a slow model).

A slow model (``uep-bench-echo`` with ``--service-ms`` per call, 250 ms by default: 4 items/s, like an LLM on CPU)
and one item in flight (``max_parallel`` 1) leave the stack nearly idle between items, so what it spends is
either per item (events, statements) or per second (reconcile passes, fetch loops, timers). The bench starts a
private stack, then for each variant (``--variant NAME:K=V,…``, the services' environment; the six services are
restarted with it) runs a short warm-up evaluation and one of ``--items`` items, and reads the CPU time of each
stack process with its descendants, and of PostgreSQL and Redis, before and after it (``bench/cpu_share``; the run starts once the stack is quiet, ``idle_cost.wait_quiet``). It
prints milliseconds of CPU per item per part and the total of uep's processes (the model server and the
machine-wide PostgreSQL excluded: other work on the machine weighs on that one), then the ratio of each
variant's total to the first's. Defaults compare the reconcile period of before (``UEP_TICK_SECONDS=1``) with
the current settings.

Usage: ``python bench/busy_cost.py [--items 60] [--service-ms 250] [--variant NAME:K=V,…] [--port-base 20000]
[--database uep_bench_busy] [--redis-db 14] [--run-dir .run/bench-busy]``
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy" / "local"))
sys.path.insert(0, str(ROOT / "bench"))
from idle_cost import _variant, wait_quiet  # noqa: E402 - bench/ is on the path from here

POLL_S = 0.5
"""Seconds between the bench's reads of the evaluation's status (its own statements cost PostgreSQL a little)."""
OURS_EXCLUDED = ("triton", "postgres")
"""Parts left out of uep's total: the model, and the machine-wide PostgreSQL."""


def run(cfg, engine, n: int) -> float:
    """Post an ``n``-item echo evaluation with one item in flight, wait until it completed; returns its seconds."""
    import httpx
    from sqlalchemy import text

    body = {"benchmark": "mmlu", "model": "uep-bench-echo", "sample_limit": n, "sampling": "first", "max_parallel": 1}
    with httpx.Client(base_url=cfg.gateway_url, timeout=60, headers=cfg.auth_headers()) as c:
        t0 = time.perf_counter()
        r = c.post("/v1/evaluations", json=body)
        r.raise_for_status()
        eid = r.json()["id"]
    while True:
        time.sleep(POLL_S)
        with engine.connect() as c:
            done, status = c.execute(text("SELECT completed_items, status FROM evaluations WHERE id = :e"), {"e": eid}).one()
        if status in ("completed", "failed", "cancelled", "stopped", "budget_exhausted"):
            break
    assert status == "completed" and done == n, (status, done, n)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--items", type=int, default=60, help="items of each measured evaluation")
    ap.add_argument("--service-ms", type=float, default=250.0, help="the echo model's service time per call")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME:K=V,K=V — services' environment of one measurement (default: before:UEP_TICK_SECONDS=1 and after:)",
    )
    ap.add_argument("--settle", type=float, default=15.0, help="idle seconds after the services restart")
    ap.add_argument("--port-base", type=int, default=20000, help="UEP_STACK_PORT_BASE of the bench's private stack")
    ap.add_argument("--database", default="uep_bench_busy", help="PostgreSQL database of the bench's stack")
    ap.add_argument("--redis-db", type=int, default=14, help="Redis database number of the bench's stack")
    ap.add_argument("--run-dir", default=str(ROOT / ".run" / "bench-busy"), help="run directory of the bench's stack")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the stack (finally) on kill too
    from free_ports import echo_stack_env, start_fresh

    os.environ.update(
        echo_stack_env(args.port_base, args.run_dir, args.database, args.redis_db)
        | {"UEP_BENCH_SERVICE_MS": str(args.service_ms)}
    )
    import cpu_share
    import uep_stack
    from uep_common.runtime.session import make_sync_engine

    variants = [_variant(v) for v in args.variant] or [("before", {"UEP_TICK_SECONDS": "1"}), ("after", {})]
    cfg = uep_stack.config()
    start_fresh(cfg)
    engine = make_sync_engine(cfg.database_url)
    rows: list[tuple[str, dict[str, float]]] = []
    try:
        for name, env in variants:
            uep_stack.stop(cfg, uep_stack.SERVICES)
            uep_stack.start_services(dataclasses.replace(cfg, extra_env={**cfg.extra_env, **env}))
            time.sleep(args.settle)
            run(cfg, engine, 8)  # warm-up: consumers joined, the model's call time learned
            wait_quiet(cfg.run_dir)  # the warm-up's report is written after it completed: not in the measured run
            before = cpu_share.snapshot(cfg.run_dir)
            seconds = run(cfg, engine, args.items)
            after = cpu_share.snapshot(cfg.run_dir)
            ms = cpu_share.per_item_ms(before, after, args.items)
            rows.append((name, ms))
            ours = sum(v for k, v in ms.items() if k not in OURS_EXCLUDED)
            print(
                f"[{name}] {args.items} items in {seconds:.1f} s ({args.items / seconds:.2f}/s); uep {ours:.1f} ms CPU/item",
                flush=True,
            )
    finally:
        uep_stack.down(cfg)
        engine.dispose()
    print(f"\nCPU per item (ms) at one slot, {args.service_ms:.0f} ms per call")
    print("\n".join(cpu_share.table(rows)))
    totals = [(name, sum(v for k, v in ms.items() if k not in OURS_EXCLUDED)) for name, ms in rows]
    for name, total in totals:
        print(
            f"  uep (without triton, postgres) [{name}]: {total:.1f} ms/item  ratio to [{totals[0][0]}] {total / totals[0][1]:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
