"""bench/scheduler: admission latency and dispatch throughput of the scheduler.

On a private stack (ports +31500, database ``uep_bench_sched``, Redis db 13, Triton with ``bench_echo``):

1. latency: ``--posts`` evaluations (1 MMLU item each, on ``uep-bench-echo``) are POSTed one after another;
   for each, the time from just before the POST to its first SampleDispatched — leased (the allocation pass
   that leased it: ``sample_leases.leased_at``) and published to the broker (``outbox.published_at``, the
   broker's acknowledgement of the scheduler's own publish after the pass commits, or a relay's). Target: p50 < 50 ms.
2. end-to-end throughput with ``--queued`` queued samples: ``--evaluations`` evaluations in two tenants
   (10,000 items in all by default) posted at once; items leased per second from the first lease to the
   last, and the time until all are completed (bounded by the whole pipeline, not only the scheduler).
3. allocation-pass throughput: with the stack stopped, the same number of queued items in running
   evaluations, passes run back to back in this process, every lease released between passes (as if
   every item were scored at once): items leased per second of pass time — what one scheduler replica
   can dispatch when the rest of the pipeline keeps up.

Usage: ``python bench/scheduler.py [--posts 50] [--queued 10000] [--evaluations 10]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy" / "local"))
from servers import PG_SERVER, REDIS_SERVER  # noqa: E402 - deploy/local is on the path from here

DB = "uep_bench_sched"
DB_URL = f"{PG_SERVER}/{DB}"


AUTH: dict[str, str] = {}
"""Authorization header of the bench stack's admin key (set once the stack is up)."""


def _pct(xs: list[float], q: float) -> float:
    """Percentile by linear interpolation (numpy's default method)."""
    import numpy as np

    return float(np.percentile(xs, q))


def latency(gateway_url: str, engine, posts: int) -> dict[str, list[float]]:
    """ms from just before the POST to each stage of the first dispatch, per evaluation: ``response`` (the
    POST answered), ``admitted`` (``evaluations.started_at``: the scheduler admitted it), ``leased`` (the
    allocation pass that leased the first item: ``sample_leases.leased_at``) and ``published`` (its
    SampleDispatched acknowledged by the broker: ``outbox.published_at``); ``after_response``: from the 202 to
    ``published``."""
    import httpx
    from sqlalchemy import text

    t_post: dict[str, float] = {}
    t_resp: dict[str, float] = {}
    with httpx.Client(base_url=gateway_url, timeout=30, headers=AUTH) as c:
        for _ in range(posts):
            t0 = time.time()
            r = c.post("/v1/evaluations", json={"benchmark": "mmlu", "model": "uep-bench-echo", "sample_limit": 1})
            r.raise_for_status()
            t_post[r.json()["id"]] = t0
            t_resp[r.json()["id"]] = time.time()
            time.sleep(0.15)  # one at a time: each admission sees an idle scheduler
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with engine.connect() as c:
            rows = c.execute(
                text(
                    "SELECT x.eid, x.pub, (SELECT min(l.leased_at) FROM sample_leases l WHERE l.evaluation_id = x.eid::uuid), "
                    "       (SELECT e.started_at FROM evaluations e WHERE e.id = x.eid::uuid) "
                    "FROM (SELECT o.payload->>'evaluation_id' AS eid, min(o.published_at) AS pub FROM outbox o "
                    "      WHERE o.event_type = 'SampleDispatched' AND o.payload->>'evaluation_id' = ANY(:ids) GROUP BY 1) x"
                ),
                {"ids": list(t_post)},
            ).all()
        if len(rows) == len(t_post) and all(r[1] for r in rows):
            break
        time.sleep(0.5)
    return {
        "response": [(t_resp[r[0]] - t_post[r[0]]) * 1000 for r in rows],
        "admitted": [(r[3].timestamp() - t_post[r[0]]) * 1000 for r in rows],
        "leased": [(r[2].timestamp() - t_post[r[0]]) * 1000 for r in rows],
        "published": [(r[1].timestamp() - t_post[r[0]]) * 1000 for r in rows if r[1]],
        "after_response": [(r[1].timestamp() - t_resp[r[0]]) * 1000 for r in rows if r[1]],
    }


def throughput(gateway_url: str, engine, queued: int, n_evals: int) -> tuple[float, float, int]:
    """(items leased/s first→last lease, seconds POST → all completed, items) for ``queued`` items."""
    import httpx
    from sqlalchemy import text

    slugs = []
    with engine.begin() as c:
        for name in ("bench-a", "bench-b"):
            slug = f"{name}-{uuid.uuid4().hex[:6]}"
            c.execute(text("INSERT INTO tenants (id, slug, name) VALUES (:i, :s, :s)"), {"i": uuid.uuid4(), "s": slug})
            slugs.append(slug)
    per = queued // n_evals
    ids = []
    t0 = time.perf_counter()
    with httpx.Client(base_url=gateway_url, timeout=30, headers=AUTH) as c:
        for i in range(n_evals):
            r = c.post(
                "/v1/evaluations",
                json={"benchmark": "mmlu", "model": "uep-bench-echo", "sample_limit": per, "max_parallel": 256},
                headers={"X-UEP-Tenant": slugs[i % 2]},
            )
            r.raise_for_status()
            ids.append(r.json()["id"])
        while True:
            st = [c.get(f"/v1/evaluations/{e}").json()["status"] for e in ids]
            if all(s in ("completed", "failed", "cancelled") for s in st):
                break
            time.sleep(0.5)
    elapsed = time.perf_counter() - t0
    assert all(s == "completed" for s in st), st
    with engine.connect() as c:
        first, last, n = c.execute(
            text(
                "SELECT min(leased_at), max(leased_at), count(*) FROM sample_leases WHERE evaluation_id = ANY(:ids) AND attempt = 1"
            ),
            {"ids": ids},
        ).one()
    return (n - 1) / max(1e-9, (last - first).total_seconds()), elapsed, n


async def pass_throughput(queued: int, n_evals: int) -> tuple[float, int, float]:
    """(items leased per second of pass time, passes, mean ms per pass) with the stack stopped."""
    from sqlalchemy import select, text, update

    from uep_common.runtime.session import make_async_engine, make_sessionmaker
    from uep_common.tables.models import Benchmark, Evaluation, Model, SampleLease, Tenant
    from uep_scheduler.allocation import allocate
    from uep_scheduler.settings import SchedulerSettings

    engine = make_async_engine(DB_URL)
    sm = make_sessionmaker(engine)
    async with sm() as s, s.begin():
        await s.execute(text("UPDATE evaluations SET status = 'completed' WHERE status IN ('pending', 'running')"))
        tenants = list(await s.scalars(select(Tenant.id).limit(2)))
        bench = await s.scalar(select(Benchmark).where(Benchmark.slug == "mmlu"))
        model = await s.scalar(select(Model).where(Model.name == "uep-bench-echo"))
        per = queued // n_evals
        for i in range(n_evals):
            s.add(
                Evaluation(
                    tenant_id=tenants[i % len(tenants)],
                    benchmark_id=bench.id,
                    model_id=model.id,
                    status="running",
                    priority="normal",
                    repeats=1,
                    total_items=per,
                    config={"max_in_flight": 256},
                    trace_context={},
                )
            )
    cfg = SchedulerSettings(database_url=DB_URL, max_in_flight_global=512, adaptive_concurrency=False)
    leased, passes, busy = 0, 0, 0.0
    while leased < queued:
        t = time.perf_counter()
        async with sm() as s, s.begin():
            r = await allocate(s, cfg)
        busy += time.perf_counter() - t
        passes += 1
        n = sum(r.leased.values())
        if n == 0:
            break
        leased += n
        async with sm() as s, s.begin():
            await s.execute(update(SampleLease).where(SampleLease.state == "leased").values(state="released"))
    await engine.dispose()
    return leased / busy, passes, busy / passes * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--posts", type=int, default=50)
    ap.add_argument("--queued", type=int, default=10_000)
    ap.add_argument("--evaluations", type=int, default=10)
    ap.add_argument("--skip-e2e", action="store_true", help="only the latency and pass measurements")
    args = ap.parse_args()
    os.environ.update(
        {
            "UEP_STACK_PORT_BASE": "31500",
            "UEP_STACK_RUN_DIR": str(ROOT / ".run" / "bench-sched"),
            "UEP_DATABASE_URL": DB_URL,
            "UEP_REDIS_URL": f"{REDIS_SERVER}/13",
            "UEP_TRITON_MODELS": "bench_echo",
            "UEP_BENCH_SERVICE_MS": "2",
            "UEP_INFERENCE_CONCURRENCY": "128",
            "UEP_OTEL_EXPORTER": "none",
            "UEP_LOG_LEVEL": "WARNING",
            # each completed evaluation would otherwise launch Chromium for its report's PDF (seconds of CPU on
            # these 2 cores, measured as 3-5x slower passes): this bench measures the scheduler, not reports
            "UEP_REPORTS_ENABLED": "false",
        }
    )
    import redis
    from sqlalchemy import text

    import uep_stack
    from uep_common.runtime.session import make_sync_engine

    cfg = uep_stack.config()
    uep_stack.down(cfg)
    admin = make_sync_engine(f"{PG_SERVER}/postgres")
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(text(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)"))
    admin.dispose()
    redis.Redis.from_url(os.environ["UEP_REDIS_URL"]).flushdb()
    uep_stack.up(cfg)
    AUTH.update(cfg.auth_headers())
    engine = make_sync_engine(DB_URL)
    try:
        with engine.begin() as c:
            c.execute(text("UPDATE models SET max_in_flight = 256 WHERE name = 'uep-bench-echo'"))
        latency(cfg.gateway_url, engine, 5)  # warm-up: consumers joined, caches filled
        stages = latency(cfg.gateway_url, engine, args.posts)
        e2e = None if args.skip_e2e else throughput(cfg.gateway_url, engine, args.queued, args.evaluations)
    finally:
        uep_stack.down(cfg)
    rate, passes, ms_per_pass = asyncio.run(pass_throughput(args.queued, args.evaluations))
    engine.dispose()
    print(f"\nPOST → first SampleDispatched over {len(stages['leased'])} evaluations (target p50 < 50 ms):")
    for stage, label in (
        ("response", "POST answered"),
        ("admitted", "admitted (scheduler)"),
        ("leased", "leased (allocation pass)"),
        ("published", "published to the broker"),
    ):
        xs = stages[stage]
        print(f"  {label + ':':<30} p50 {statistics.median(xs):7.1f} ms   p99 {_pct(xs, 99):7.1f} ms")
    after = stages["after_response"]
    print(f"  {'published, from the 202:':<30} p50 {statistics.median(after):7.1f} ms   p99 {_pct(after, 99):7.1f} ms")
    if e2e:
        print(f"end to end, {e2e[2]} queued samples in {args.evaluations} evaluations of 2 tenants (bench_echo, 2 ms):")
        print(f"  dispatch throughput:           {e2e[0]:8.1f} items leased/s   (all completed in {e2e[1]:.1f} s)")
    print(f"allocation passes alone, {args.queued} queued samples, global bound 512:")
    print(f"  dispatch throughput:           {rate:8.1f} items leased/s   ({passes} passes, {ms_per_pass:.1f} ms each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
