"""bench/classifier_throughput: a classifier's and a ranker's throughput through the whole uep pipeline vs.
calling Triton directly.

Models (the local model server's, :mod:`uep_model_server.classifiers` and :mod:`uep_model_server.ranker`):

- classifier: ``breast-cancer-logreg`` (``uep_breast_cancer``) on the ``breast-cancer`` benchmark, its 143 rows
  ``--repeats`` times (default 3: 429 items);
- ranker: ``e5-small-ranker`` (``uep_e5_rank``) on ``humaneval-retrieval``, 164 queries × 10 candidates.

For each, the same items at the same concurrency C, interleaved direct, pipeline, direct, pipeline, …
(``--rounds`` of each, so drift of the machine weighs on both alike):

- direct: C asyncio workers send each item's tensors with tritonclient's gRPC client;
- pipeline: one evaluation through the gateway → scheduler → inference (C calls in flight: the model's
  registry capacity) → scorer → reporter, timed from the POST until the evaluation is completed (every item
  scored and stored in PostgreSQL).

After each run the bench waits until the stack is quiet (``bench/idle_cost.wait_quiet``): a pipeline run's
evaluation has its report rendered after it completes, which would otherwise weigh on the next run. The CPU of
a run is counted over the run and, for a pipeline run, again until that quiet point (the run and its report:
what a steady stream of evaluations costs per item). The ranker's passage cache (every candidate embedded once)
is warmed before the first round, so both kinds of run embed only the queries. Prints each run's items/s and,
per model, the ratio of the medians pipeline/direct (target ≥ 0.9), then the CPU each side spends per item, by
process (``bench/cpu_share``: the stack's processes, PostgreSQL and this process, which is the direct client),
with the items/s the machine's cores would give at that cost. Everything runs in this process on a private
stack (ports ``--port-base``, database ``--database``, Redis db ``--redis-db``).

Usage: ``python bench/classifier_throughput.py [--concurrency 8] [--rounds 2] [--repeats 3] [--port-base 21000]
[--database uep_bench_classifier] [--redis-db 14]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy" / "local"))
from servers import PG_SERVER, REDIS_SERVER  # noqa: E402 - deploy/local is on the path from here

AUTH: dict[str, str] = {}
"""Authorization header of the bench stack's admin key (set once the stack is up)."""


def _features_inputs(g: Any, item: Any) -> list[Any]:
    import numpy as np

    t = g.InferInput("features", [1, 30], "FP32")
    t.set_data_from_numpy(np.array([item.input["features"]], dtype=np.float32))
    return [t]


def _ranking_inputs(g: Any, item: Any) -> list[Any]:
    import numpy as np

    texts = [c["text"].encode() for c in item.input["candidates"]]
    q = g.InferInput("query", [1, 1], "BYTES")
    q.set_data_from_numpy(np.array([[item.input["query"].encode()]], dtype=np.object_))
    c = g.InferInput("candidates", [1, len(texts)], "BYTES")
    c.set_data_from_numpy(np.array([texts], dtype=np.object_))
    return [q, c]


async def direct(grpc_url: str, model: str, items: list[Any], build: Callable[[Any, Any], list[Any]], concurrency: int) -> float:
    """Seconds to answer every item with ``concurrency`` workers calling Triton directly."""
    import tritonclient.grpc.aio as g

    client = g.InferenceServerClient(grpc_url)
    queue: asyncio.Queue[Any] = asyncio.Queue()
    for it in items:
        queue.put_nowait(it)

    async def worker() -> None:
        while not queue.empty():
            await client.infer(model, build(g, queue.get_nowait()))

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - t0
    await client.close()
    return elapsed


QUIET_TIMEOUT_S = 120.0
"""Longest wait for the stack to go quiet after a run."""


def _quiet_note(waited_s: float, busiest: str | None) -> str:
    """How long the stack took to go quiet after a run, and whether it did (``wait_quiet``'s result)."""
    if waited_s >= QUIET_TIMEOUT_S:
        return f"the stack did NOT go quiet within {QUIET_TIMEOUT_S:.0f} s (busiest: {busiest})"
    return f"then {waited_s:.1f} s for the stack to go quiet{f', mostly {busiest}' if busiest else ''}"


def _median_parts(runs: list[dict[str, float]]) -> dict[str, float]:
    """Per part, the median over ``runs`` of its ms per item."""
    return {k: statistics.median(r.get(k, 0.0) for r in runs) for k in runs[0]}


POLL_S = 0.05
"""Seconds between two reads of a pipeline run's status: a primary-key SELECT in PostgreSQL (and the pool's
pre-ping), as bench/scale reads it. (A GET of the evaluation through the gateway 20 times a second cost the
gateway ~6 ms of CPU each, about 7 % of the CPU the stack spent per item of a classifier run: the bench's load,
not a user's.)"""


ENDED = ("completed", "failed", "cancelled", "interrupted", "stopped", "budget_exhausted")
"""Statuses after which an evaluation does no more work (the lifecycle's end states)."""
RUN_TIMEOUT_S = 600.0
"""Longest a pipeline run may take before the bench gives up on it."""


def pipeline(gateway_url: str, engine: Any, benchmark: str, model: str, n: int, repeats: int, in_flight: int) -> float:
    """Seconds from POST /v1/evaluations to status completed for ``benchmark`` × ``repeats`` on ``model``: the
    status is read from ``engine`` (the stack's database) every :data:`POLL_S`, and the summary once through
    the gateway at the end (asserted: every item scored, no error)."""
    import httpx
    from sqlalchemy import text

    with httpx.Client(base_url=gateway_url, timeout=30, headers=AUTH) as c:
        t0 = time.perf_counter()
        r = c.post(
            "/v1/evaluations",
            json={"benchmark": benchmark, "model": model, "repeats": repeats, "max_in_flight": in_flight, "sampling": "first"},
        )
        r.raise_for_status()
        eid = r.json()["id"]
        while True:
            with engine.connect() as conn:
                status = conn.execute(text("SELECT status FROM evaluations WHERE id = :e"), {"e": eid}).scalar_one()
            if status in ENDED:
                break
            if time.perf_counter() - t0 > RUN_TIMEOUT_S:
                raise TimeoutError(f"evaluation {eid} still {status} after {RUN_TIMEOUT_S:.0f} s")
            time.sleep(POLL_S)
        elapsed = time.perf_counter() - t0
        body = c.get(f"/v1/evaluations/{eid}").json()
    assert body["status"] == "completed" and body["summary"]["n"] == n * repeats and body["summary"]["errors"] == 0, body
    return elapsed


def _set_capacity(database_url: str, names: list[str], concurrency: int) -> None:
    """Registry capacity of the benched models = the direct runs' concurrency (calls in flight per replica)."""
    from sqlalchemy import text

    from uep_common.runtime.session import make_sync_engine

    engine = make_sync_engine(database_url)
    with engine.begin() as c:
        c.execute(text("UPDATE models SET max_in_flight = :c WHERE name = ANY(:n)"), {"c": concurrency, "n": names})
    engine.dispose()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="passes over the 143 breast-cancer rows per classifier run")
    ap.add_argument("--port-base", type=int, default=21000, help="UEP_STACK_PORT_BASE of the bench's private stack")
    ap.add_argument(
        "--database", default="uep_bench_classifier", help="PostgreSQL database of the bench's stack (dropped and made)"
    )
    ap.add_argument("--redis-db", type=int, default=14)
    args = ap.parse_args()
    window = 16 * args.concurrency
    os.environ.update(
        {
            "UEP_STACK_PORT_BASE": str(args.port_base),
            "UEP_STACK_RUN_DIR": str(ROOT / ".run" / "bench-classifier"),
            "UEP_DATABASE_URL": f"{PG_SERVER}/{args.database}",
            "UEP_REDIS_URL": f"{REDIS_SERVER}/{args.redis_db}",
            "UEP_TRITON_MODELS": "breast_cancer,e5_rank",
            # handler workers > model slots, so decoding and publishing overlap the model calls; the models'
            # registry capacity (set below) keeps exactly `concurrency` calls in flight at Triton.
            "UEP_INFERENCE_CONCURRENCY": str(4 * args.concurrency),
            "UEP_MODEL_LEASE_FACTOR": str(max(1, window // args.concurrency)),
            "UEP_OTEL_EXPORTER": "none",
            "UEP_LOG_LEVEL": "WARNING",
        }
    )
    import cpu_share
    import uep_stack
    from idle_cost import wait_quiet
    from uep_common.builtin.labelled import load_breast_cancer_test, load_humaneval_retrieval
    from uep_common.runtime.session import make_sync_engine

    cases = [
        (
            "classifier",
            "breast-cancer-logreg",
            "uep_breast_cancer",
            "breast-cancer",
            load_breast_cancer_test(),
            _features_inputs,
            args.repeats,
        ),
        ("ranker", "e5-small-ranker", "uep_e5_rank", "humaneval-retrieval", load_humaneval_retrieval(), _ranking_inputs, 1),
    ]
    cfg = uep_stack.config()
    uep_stack.down(cfg)
    uep_stack.up(cfg)
    AUTH.update(cfg.auth_headers())
    engine = make_sync_engine(cfg.database_url)
    results: dict[str, dict[str, list[float]]] = {}
    cpu_rows: dict[str, list[tuple[str, dict[str, float]]]] = {}
    try:
        _set_capacity(cfg.database_url, [c[1] for c in cases], args.concurrency)
        grpc_url = f"127.0.0.1:{cfg.triton_grpc}"
        for label, name, triton_name, benchmark, items, build, repeats in cases:
            work = items * repeats
            asyncio.run(direct(grpc_url, triton_name, items, build, args.concurrency))  # warm-up (and the ranker's cache)
            pipeline(cfg.gateway_url, engine, benchmark, name, len(items), 1, window)  # warm-up: consumers joined, caches filled
            runs: dict[str, list[float]] = {"direct": [], "pipeline": []}
            cpu: dict[str, list[dict[str, float]]] = {"direct": [], "pipeline": [], "sustained": []}
            wait_quiet(cfg.run_dir)  # the warm-up's report rendered first
            for r in range(args.rounds):
                for side in ("direct", "pipeline"):
                    before = cpu_share.snapshot(cfg.run_dir, own=True)
                    if side == "direct":
                        t = asyncio.run(direct(grpc_url, triton_name, work, build, args.concurrency))
                    else:
                        t = pipeline(cfg.gateway_url, engine, benchmark, name, len(items), repeats, window)
                    ended = cpu_share.snapshot(cfg.run_dir, own=True)
                    waited = _quiet_note(*wait_quiet(cfg.run_dir, timeout_s=QUIET_TIMEOUT_S))
                    cpu[side].append(cpu_share.per_item_ms(before, ended, len(work)))
                    if side == "pipeline":  # the run and what it left: the evaluation's report, mostly
                        cpu["sustained"].append(
                            cpu_share.per_item_ms(before, cpu_share.snapshot(cfg.run_dir, own=True), len(work))
                        )
                    runs[side].append(len(work) / t)
                    print(
                        f"  {label} round {r + 1} {side + ':':<9} {len(work) / t:8.1f} items/s ({t:.2f} s; {waited})", flush=True
                    )
            results[label] = runs
            cpu_rows[label] = [
                (f"{label} {side}", _median_parts(cpu[key]))
                for side, key in (("direct", "direct"), ("pipeline", "pipeline"), ("pipeline + report", "sustained"))
            ]
    finally:
        engine.dispose()
        uep_stack.down(cfg)
    print(f"\nconcurrency {args.concurrency}, {args.rounds} interleaved rounds (direct, pipeline), scheduler window {window}")
    for (label, name, _, benchmark, items, _, repeats), runs in zip(cases, results.values(), strict=True):
        d, p = statistics.median(runs["direct"]), statistics.median(runs["pipeline"])
        print(f"{label} {name} on {benchmark} ({len(items) * repeats} items):")
        print(f"  direct tritonclient (gRPC):   {d:8.1f} items/s (median)")
        print(f"  whole pipeline (6 services):  {p:8.1f} items/s (median, POST → completed, all stored)")
        print(f"  ratio pipeline/direct:        {p / d:8.3f}   (target ≥ 0.9)")
    print(
        "\nCPU per item, ms, over each run (medians over the rounds; each stack process with its descendants,"
        "\nPostgreSQL's server, and this process: the direct client and the pipeline runs' polls), and the items/s"
        f"\n{cpu_share.usable_cores()} cores would give at that cost (bench/cpu_share); 'pipeline + report': until the"
        "\nstack is quiet again after the evaluation completed (its report rendered), the cost of a steady stream of runs"
    )
    for line in cpu_share.table([row for rows in cpu_rows.values() for row in rows]):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
