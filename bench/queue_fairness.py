"""bench/queue_fairness: what the queue at inference (``UEP_MODEL_QUEUE_SECONDS``) costs fairness and priority.

The scheduler's fair queue decides every lease; with a queue, up to ``UEP_MODEL_QUEUE_SECONDS`` of a model's work
is leased ahead of its slots, so a newcomer's first item waits behind it (uep_scheduler.capacity). This bench
measures that where it shows most: one saturated model (``uep-bench-echo`` with 2 slots), tenant A runs 4
evaluations of 300 items, tenant B joins 3 s later with one of 300, and 3 s after that tenant A posts an urgent
evaluation of 10. Measured from PostgreSQL (``sample_results.created_at``, when each result was stored):

- B's wait: its POST to its first stored result; B's share of the results stored in the 10 s after that (fair
  queuing between two tenants: 50 %);
- the urgent evaluation's wait: its POST to its first and to its last stored result;
- the whole run's items/s.

Each variant (``--queue-seconds``, default ``0,1``) restarts the scheduler and inference with that setting and
runs a 100-item warm-up first (the scheduler learns the model's call time from scores; without one there is no
queue); variants are interleaved A,B,B,A for ``--rounds`` (2) rounds, and the medians are printed.

Usage: ``python bench/queue_fairness.py [--queue-seconds 0,1] [--rounds 2] [--port-base 20000]
[--database uep_bench_fair] [--redis-db 14] [--run-dir .run/bench-fair]``
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy" / "local"))

MODEL = "uep-bench-echo"
SLOTS = 2


def _post(cfg, headers: dict[str, str], n: int, **extra) -> tuple[str, float]:
    import httpx

    body = {"benchmark": "mmlu", "model": MODEL, "sample_limit": n, "sampling": "first", **extra}
    with httpx.Client(base_url=cfg.gateway_url, timeout=30, headers=headers) as c:
        t = time.time()
        r = c.post("/v1/evaluations", json=body)
        r.raise_for_status()
        return r.json()["id"], t


def _wait(engine, ids: list[str], timeout_s: float = 600) -> None:
    from sqlalchemy import text

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with engine.connect() as c:
            left = c.execute(
                text(
                    "SELECT count(*) FROM evaluations WHERE id = ANY(CAST(:ids AS uuid[])) AND status IN ('pending', 'running')"
                ),
                {"ids": ids},
            ).scalar()
        if not left:
            return
        time.sleep(0.2)
    raise TimeoutError(f"evaluations not done after {timeout_s} s")


def _stored(engine, evaluation_id: str) -> list[float]:
    """Epoch seconds at which each result of the evaluation was stored, sorted."""
    from sqlalchemy import text

    with engine.connect() as c:
        rows = c.execute(
            text("SELECT extract(epoch FROM created_at) FROM sample_results WHERE evaluation_id = :e ORDER BY created_at"),
            {"e": evaluation_id},
        ).all()
    return [float(r[0]) for r in rows]


def scenario(cfg, engine, keys: dict[str, dict[str, str]]) -> dict[str, float]:
    """One run of the scenario of the module docstring; its figures."""
    a = [_post(cfg, keys["a"], 300) for _ in range(4)]
    time.sleep(3.0)
    b = _post(cfg, keys["b"], 300)
    time.sleep(3.0)
    urgent = _post(cfg, keys["a"], 10, priority="urgent")
    everything = [x for x, _t in [*a, b, urgent]]
    _wait(engine, everything)
    b_times, u_times = _stored(engine, b[0]), _stored(engine, urgent[0])
    first_b = b_times[0]
    window = [t for e in everything for t in _stored(engine, e) if first_b <= t < first_b + 10.0]
    in_b = sum(1 for t in b_times if first_b <= t < first_b + 10.0)
    all_times = [t for e in everything for t in _stored(engine, e)]
    return {
        "b_wait_s": first_b - b[1],
        "b_share": in_b / len(window),
        "urgent_first_s": u_times[0] - urgent[1],
        "urgent_all_s": u_times[-1] - urgent[1],
        "items_per_s": len(all_times) / (max(all_times) - a[0][1]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queue-seconds", default="0,1", help="UEP_MODEL_QUEUE_SECONDS of each variant")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--port-base", type=int, default=20000, help="UEP_STACK_PORT_BASE of the bench's private stack")
    ap.add_argument("--database", default="uep_bench_fair", help="PostgreSQL database of the bench's stack")
    ap.add_argument("--redis-db", type=int, default=14, help="Redis database number of the bench's stack")
    ap.add_argument("--run-dir", default=str(ROOT / ".run" / "bench-fair"), help="run directory of the bench's stack")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the stack (finally) on kill too
    variants = [v.strip() for v in args.queue_seconds.split(",") if v.strip()]
    order = [v for r in range(args.rounds) for v in (variants if r % 2 == 0 else variants[::-1])]
    from free_ports import echo_stack_env, start_fresh

    os.environ.update(echo_stack_env(args.port_base, args.run_dir, args.database, args.redis_db))
    from sqlalchemy import text

    import uep_stack
    from uep_common.admin import create_api_key, create_tenant
    from uep_common.runtime.session import make_sync_engine

    cfg = uep_stack.config()
    start_fresh(cfg)
    engine = make_sync_engine(cfg.database_url)
    results: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    try:
        with engine.begin() as c:
            c.execute(text("UPDATE models SET max_in_flight = :s WHERE name = :m"), {"s": SLOTS, "m": MODEL})
        keys = {}
        for name in ("a", "b"):
            slug = f"fair-{name}-{os.getpid()}"
            create_tenant(cfg.database_url, slug)
            keys[name] = {"Authorization": f"Bearer {create_api_key(cfg.database_url, slug, 'builder', 'bench')}"}
        for i, v in enumerate(order):
            if i == 0 or order[i - 1] != v:
                uep_stack.stop(cfg, ["scheduler", "inference"])
                env = {**cfg.extra_env, "UEP_MODEL_QUEUE_SECONDS": v}
                for name in ("scheduler", "inference"):
                    uep_stack.start_service(dataclasses.replace(cfg, extra_env=env), name)
                warm, _t = _post(cfg, keys["a"], 100)  # call times learned
                _wait(engine, [warm])
            results[v].append(scenario(cfg, engine, keys))
            r = results[v][-1]
            print(
                f"  queue {v:>4} s: B waits {r['b_wait_s']:5.2f} s, B's share {r['b_share']:4.0%}, urgent first "
                f"{r['urgent_first_s']:5.2f} s / all {r['urgent_all_s']:5.2f} s, {r['items_per_s']:6.1f} items/s",
                flush=True,
            )
    finally:
        engine.dispose()
        uep_stack.down(cfg)
    print(f"\nmedians over {args.rounds} runs; echo model with {SLOTS} slots, tenants A (4 × 300) and B (300), A's urgent 10")
    print(f"{'queue s':>8} {'B waits s':>10} {'B share':>8} {'urgent first s':>15} {'urgent all s':>13} {'items/s':>8}")
    for v, runs in results.items():

        def med(k: str, runs: list[dict[str, float]] = runs) -> float:
            return statistics.median(r[k] for r in runs)

        print(
            f"{v:>8} {med('b_wait_s'):>10.2f} {med('b_share'):>8.0%} {med('urgent_first_s'):>15.2f} "
            f"{med('urgent_all_s'):>13.2f} {med('items_per_s'):>8.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
