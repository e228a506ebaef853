"""bench/pipeline_overhead: throughput of the whole uep pipeline vs. calling Triton directly.

The same N requests (the first N MMLU prompts, rendered with the benchmark's template) go to the same cheap
Triton model (``uep_bench_echo``: a fixed service time per batch, default 20 ms, like a small model on an
accelerator) at the same concurrency C:

- direct: C asyncio workers call Triton with tritonclient's gRPC client;
- pipeline: one evaluation through the gateway → scheduler → inference (C concurrent calls) → scorer →
  reporter, timed from the POST until the evaluation is completed (every item stored in PostgreSQL).

Both runs happen in this one process on a private stack (ports +20000, database ``uep_bench``), so the ratio
is measured under the same machine conditions. Target for the project: ratio ≥ 0.95.

Usage: ``python bench/pipeline_overhead.py [--n 400] [--concurrency 8] [--service-ms 20]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy" / "local"))


async def direct(grpc_url: str, prompts: list[str], concurrency: int) -> float:
    """Seconds to answer every prompt with ``concurrency`` workers calling Triton directly."""
    import numpy as np
    import tritonclient.grpc.aio as g

    client = g.InferenceServerClient(grpc_url)
    queue: asyncio.Queue[str] = asyncio.Queue()
    for p in prompts:
        queue.put_nowait(p)

    async def worker() -> None:
        while not queue.empty():
            prompt = queue.get_nowait()
            t = g.InferInput("text_input", [1, 1], "BYTES")
            t.set_data_from_numpy(np.array([[prompt.encode()]], dtype=np.object_))
            m = g.InferInput("max_tokens", [1, 1], "INT32")
            m.set_data_from_numpy(np.array([[32]], dtype=np.int32))
            r = await client.infer("uep_bench_echo", [t, m])
            assert r.as_numpy("text_output").reshape(-1)[0] == b"ok"

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - t0
    await client.close()
    return elapsed


AUTH: dict[str, str] = {}
"""Authorization header of the bench stack's admin key (set once the stack is up)."""


def pipeline(gateway_url: str, n: int, in_flight: int) -> float:
    """Seconds from POST /v1/evaluations to status completed for ``n`` MMLU items on uep-bench-echo."""
    import httpx

    with httpx.Client(base_url=gateway_url, timeout=30, headers=AUTH) as c:
        t0 = time.perf_counter()
        r = c.post(
            "/v1/evaluations",
            json={
                "benchmark": "mmlu",
                "model": "uep-bench-echo",
                "sample_limit": n,
                "max_in_flight": in_flight,
                "sampling": "first",
            },
        )
        r.raise_for_status()
        eid = r.json()["id"]
        while True:
            body = c.get(f"/v1/evaluations/{eid}").json()
            if body["status"] in ("completed", "failed", "cancelled"):
                break
            time.sleep(0.05)
        elapsed = time.perf_counter() - t0
    assert body["status"] == "completed" and body["summary"]["n"] == n and body["summary"]["errors"] == 0, body
    return elapsed


def _set_capacity(database_url: str, concurrency: int) -> None:
    """Registry capacity of uep-bench-echo = the direct run's concurrency (calls in flight per replica)."""
    from sqlalchemy import text

    from uep_common.db.session import make_sync_engine

    engine = make_sync_engine(database_url)
    with engine.begin() as c:
        c.execute(text("UPDATE models SET max_in_flight = :c WHERE name = 'uep-bench-echo'"), {"c": concurrency})
    engine.dispose()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--service-ms", type=int, default=20)
    ap.add_argument("--in-flight", type=int, default=0, help="scheduler window per evaluation (default 16 × concurrency)")
    args = ap.parse_args()
    window = args.in_flight or 16 * args.concurrency
    os.environ.update(
        {
            "UEP_STACK_PORT_BASE": "20000",
            "UEP_STACK_RUN_DIR": str(ROOT / ".run" / "bench"),
            "UEP_DATABASE_URL": "postgresql+psycopg://postgres@127.0.0.1:5432/uep_bench",
            "UEP_REDIS_URL": "redis://127.0.0.1:6379/14",
            "UEP_TRITON_MODELS": "bench_echo",
            "UEP_BENCH_SERVICE_MS": str(args.service_ms),
            # handler workers > model slots, so decoding and publishing overlap the model calls; the model's
            # registry capacity (set below) keeps exactly `concurrency` calls in flight at Triton.
            "UEP_INFERENCE_CONCURRENCY": str(4 * args.concurrency),
            # the scheduler leases at most factor × the model's capacity across evaluations: keep the window
            "UEP_MODEL_LEASE_FACTOR": str(max(1, window // args.concurrency)),
            "UEP_OTEL_EXPORTER": "none",
            "UEP_LOG_LEVEL": "WARNING",
        }
    )
    import uep_stack
    from uep_common.builtin.catalog import BENCHMARKS
    from uep_common.builtin.datasets import load_mmlu
    from uep_common.prompts import render_prompt

    template = next(b for b in BENCHMARKS if b.slug == "mmlu").config["prompt"]["template"]
    prompts = [render_prompt(template, it.input) for it in load_mmlu()[: args.n]]
    cfg = uep_stack.config()
    uep_stack.down(cfg)
    uep_stack.up(cfg)
    AUTH.update(cfg.auth_headers())
    try:
        _set_capacity(cfg.database_url, args.concurrency)
        grpc_url = f"127.0.0.1:{cfg.triton_grpc}"
        asyncio.run(direct(grpc_url, prompts[: args.concurrency * 4], args.concurrency))  # warm-up
        pipeline(cfg.gateway_url, 20, window)  # warm-up: consumers joined, caches filled
        t_direct = asyncio.run(direct(grpc_url, prompts, args.concurrency))
        t_pipe = pipeline(cfg.gateway_url, args.n, window)
    finally:
        uep_stack.down(cfg)
    d, p = args.n / t_direct, args.n / t_pipe
    print(
        f"\nN={args.n} requests, concurrency {args.concurrency}, uep_bench_echo service time {args.service_ms} ms/batch, "
        f"scheduler window {window}"
    )
    print(f"direct tritonclient (gRPC):   {d:8.1f} req/s  ({t_direct:.2f} s)")
    print(f"whole pipeline (6 services):  {p:8.1f} req/s  ({t_pipe:.2f} s, POST → completed, all stored)")
    print(f"ratio pipeline/direct:        {p / d:8.3f}   (target ≥ 0.95)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
