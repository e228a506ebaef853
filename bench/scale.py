"""bench/scale: does per-item cost grow with the size of an evaluation? Echo-model evaluations of 1k, 10k and
100k items (``--million``: also 1M) through the whole pipeline, at default settings.

For each size, one evaluation of the first MMLU items on ``uep-bench-echo`` (a fixed service time per batch of up
to 8: ``--service-ms``, default 2; ``repeats`` make up sizes past the 14,042 MMLU items: 100k = 12,500 × 8) is
posted and followed in PostgreSQL (``evaluations.completed_items`` every :data:`POLL_S`) until it completes. The model must
not be what bounds the run: one Triton instance answering a batch of at most 8 per service time serves at most
8 / service time (400 items/s at the model server's default of 20 ms, below the project's 500 items/s target), so
the bench first measures the model alone — tritonclient's gRPC client at the model's registry capacity (64 calls
in flight), ``--direct-items`` MMLU prompts — and prints each size's items/s as a share of that. Printed per size:

- items/s over the whole run and per decile of it (the time between 10 % steps of ``completed_items``), and the
  last decile's rate over the first's;
- RSS of each stack process with its descendants (``/proc/<pid>/status`` VmRSS; PIDs from ``<run dir>/pids``),
  at the end of the run — the broker (its JVM; the log itself is on disk) among them;
- the broker's disk use at the end of the run (the bytes of ``<run dir>/kafka/data``: every topic's log, which
  retention bounds, see ``uep_common.runtime.messaging.topic_spec``);
- database bytes per item: the growth of ``pg_total_relation_size`` of each table the pipeline writes over the
  run, divided by the items;
- retained bytes per item: after the run, the bench waits until the reporter's compaction has finished with the
  evaluation (``evaluations.details_compacted_at``, :mod:`uep_reporter.compaction`) and the relays have pruned
  its published outbox rows, runs a plain ``VACUUM`` (not FULL) on the tables, and divides by the items the
  growth since before the run of ``pg_total_relation_size`` ("files") and of the bytes the live rows and index
  entries take (``pgstattuple``, :func:`live_bytes`: "rows"); "beyond results" is every table but
  ``sample_results``. ``VACUUM`` gives the empty pages at the end of a heap back to the file system (when it gets
  the brief exclusive lock for it) and keeps the others, and every emptied index page, for the next rows: the
  files keep what the tables' largest working set needed, the rows what each item leaves behind;
- CPU per item (:mod:`cpu_share`): each stack process's and PostgreSQL's CPU time from the POST until the
  evaluation completed, divided by the items, and the items/s the machine's cores would give at that cost. The
  work done after completion (the report, compaction) is not in it.

The stack runs at default settings except, so that retention is measured right after each run, a short
compaction grace period (``--compaction-grace-s``, 5; the service default is 600) and a short outbox retention
(``--outbox-retain-s``, 10, pruned every 5 s; the default keeps published rows 120 s, pruned every 30 s). The
work per row is the same, done sooner. The warm-up evaluation and each size are compacted and vacuumed before
the next one starts, so a run reuses the space the previous ones freed (``--sizes 1000,1000``: the second run
shows what a size costs once the tables have grown to it).

Target for the project: items/s at 100k at least 0.95 of items/s at 1k; retained bytes per item beyond results
≤ 300. Each size runs on the same stack, one after the other (the broker and the tables keep what the smaller
runs left). Takes about 7–25 minutes on 2 cores for the three default sizes.

A warm-up evaluation (``--warm-up``, 10,000 items) runs first: the consumers join, the scheduler learns the model's
call time, and the broker's JVM compiles its hot paths (with 200 items only, the 1,000-item run met a cold broker
at 1.6 ms of its CPU per item, against 0.4 ms once warm).

Usage: ``python bench/scale.py [--sizes 1000,10000,100000] [--million] [--warm-up 10000] [--service-ms 2] [--direct-items 5000]
[--port-base 20000] [--database uep_bench_scale] [--redis-db 14] [--run-dir .run/bench-scale]
[--compaction-grace-s 5] [--outbox-retain-s 10]``
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy" / "local"))
sys.path.insert(0, str(ROOT / "bench"))

MMLU_ITEMS = 14_042
TABLES = ("sample_leases", "sample_results", "outbox", "spend_ledger", "evaluations", "sched_flows")
"""Tables the pipeline writes per item or per evaluation (their growth over a run is divided by its items)."""


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_mib(run_dir: Path) -> dict[str, float]:
    """RSS (MiB) of each stack process plus its descendants."""
    from idle_cost import stack_pids

    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                raw = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(raw[raw.rindex(")") + 2 :].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    out = {}
    for name, root in stack_pids(run_dir).items():
        total, todo = 0, [root]
        while todo:
            pid = todo.pop()
            total += _rss_kib(pid)
            todo.extend(children.get(pid, ()))
        out[name] = total / 1024
    return out


def table_bytes(engine) -> dict[str, int]:
    """``pg_total_relation_size`` of each of :data:`TABLES`."""
    from sqlalchemy import text

    with engine.connect() as c:
        return {t: int(c.execute(text("SELECT pg_total_relation_size(CAST(:t AS regclass))"), {"t": t}).scalar()) for t in TABLES}


def live_bytes(engine) -> dict[str, int] | None:
    """Bytes the live rows and index entries of each of :data:`TABLES` take, from the ``pgstattuple`` extension
    (created if missing): heap and TOAST pages less their free space and dead rows, and of each B-tree index its
    meta and internal pages plus its leaf pages times their fill. None when the extension cannot be created."""
    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    page = 8192
    with engine.connect() as c:
        try:
            with c.begin():
                c.execute(text("CREATE EXTENSION IF NOT EXISTS pgstattuple"))
        except DBAPIError as exc:  # not installed on this server (PostgreSQL's contrib)
            print(f"  (no pgstattuple: {type(exc).__name__}; live bytes not measured)", flush=True)
            return None
        out = {}
        for t in TABLES:
            toast = c.execute(
                text("SELECT reltoastrelid::bigint FROM pg_class WHERE oid = CAST(:t AS regclass)"), {"t": t}
            ).scalar()
            heaps = [t] + ([str(toast)] if toast else [])
            used = 0
            for rel in heaps:
                cast = "CAST(CAST(:r AS bigint) AS oid)::regclass" if rel.isdigit() else "CAST(:r AS regclass)"
                used += int(
                    c.execute(
                        text(f"SELECT table_len - free_space - dead_tuple_len FROM pgstattuple({cast})"), {"r": rel}
                    ).scalar()
                )
            indexes = c.execute(
                text("SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = CAST(:t AS regclass)"), {"t": t}
            ).scalars()
            for index in list(indexes):
                internal, leaf, density = c.execute(
                    text("SELECT internal_pages, leaf_pages, avg_leaf_density FROM pgstatindex(CAST(:i AS regclass))"),
                    {"i": index},
                ).one()
                used += int(page * (1 + internal + (leaf * density / 100 if leaf else 0)))
            out[t] = used
    return out


def compacted_and_vacuumed(engine, evaluation_id: str, timeout_s: float) -> dict[str, int]:
    """Wait until compaction finished with ``evaluation_id`` and the outbox holds no published row of it (at most
    ``timeout_s``; a warning names what is left after it), run a plain ``VACUUM`` on :data:`TABLES`, and return
    their sizes (:func:`table_bytes`)."""
    from sqlalchemy import text

    deadline = time.monotonic() + timeout_s
    while True:
        with engine.connect() as c:
            compacted = c.execute(
                text("SELECT details_compacted_at IS NOT NULL FROM evaluations WHERE id = :e"), {"e": evaluation_id}
            ).scalar()
            outbox = c.execute(
                text("SELECT count(*) FROM outbox WHERE published_at IS NOT NULL AND payload->>'evaluation_id' = :e"),
                {"e": evaluation_id},
            ).scalar()
        if compacted and not outbox:
            break
        if time.monotonic() > deadline:
            print(f"  (after {timeout_s:.0f} s: compacted {bool(compacted)}, {outbox} published outbox rows left)", flush=True)
            break
        time.sleep(1)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(text("VACUUM " + ", ".join(TABLES)))
    return table_bytes(engine)


ECHO_CAPACITY = 64
"""Registry capacity (``max_in_flight``) of ``uep-bench-echo`` (uep_common.builtin.catalog): the direct run's
calls in flight."""


def disk_mib(path: Path) -> float:
    """MiB the files under ``path`` take on disk (allocated blocks, as ``du`` counts them)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return total / 2**20


def model_alone(cfg, n: int) -> float:
    """Items/s of the echo model called directly: ``n`` MMLU prompts as inference renders them, sent by
    :data:`ECHO_CAPACITY` tritonclient gRPC workers (bench/pipeline_overhead's direct side)."""
    import asyncio

    from pipeline_overhead import MODELS, _requests, direct

    requests = _requests(n, MODELS["echo"])
    seconds, _tokens = asyncio.run(direct(f"127.0.0.1:{cfg.triton_grpc}", MODELS["echo"], requests, ECHO_CAPACITY))
    return n / seconds


@dataclasses.dataclass(frozen=True)
class SizeRun:
    """What one size's run measured: items, seconds POST → completed, the 10 decile rates (items/s), RSS per
    process (MiB), table growth over the run, retained bytes after compaction and VACUUM (files, and live rows
    when pgstattuple is there) per table and item, and CPU ms per item by part (:mod:`cpu_share`)."""

    n: int
    seconds: float
    rates: list[float]
    rss: dict[str, float]
    grown: dict[str, float]
    retained_files: dict[str, float]
    retained_rows: dict[str, float] | None
    cpu_ms: dict[str, float]
    broker_disk_mib: float

    @property
    def rate(self) -> float:
        """Items/s over the whole run."""
        return self.n / self.seconds


POLL_S = 0.05
"""Seconds between two reads of a run's progress (a primary-key SELECT each, and the pool's pre-ping): a
1,000-item run lasts about two seconds, so a coarser poll (0.5 s before) quantised its time and let several
deciles pass within one read."""


def run(cfg, engine, auth: dict[str, str], n: int) -> tuple[str, float, list[float]]:
    """Post an n-item echo evaluation and follow it: ``(its id, seconds POST → completed, the 10 decile rates)``."""
    import httpx
    from sqlalchemy import text

    repeats = max(1, math.ceil(n / MMLU_ITEMS))
    while n % repeats:
        repeats += 1
    body = {"benchmark": "mmlu", "model": "uep-bench-echo", "sample_limit": n // repeats, "sampling": "first"}
    if repeats > 1:
        body["repeats"] = repeats
    with httpx.Client(base_url=cfg.gateway_url, timeout=60, headers=auth) as c:
        t0 = time.perf_counter()
        r = c.post("/v1/evaluations", json=body)
        r.raise_for_status()
        eid = r.json()["id"]
    marks = [t0]
    step = n / 10
    while True:
        with engine.connect() as c:
            done, status = c.execute(text("SELECT completed_items, status FROM evaluations WHERE id = :e"), {"e": eid}).one()
        now = time.perf_counter()
        while len(marks) <= 10 and done >= step * len(marks) - 1e-9:
            marks.append(now)
        if status in ("completed", "failed", "cancelled", "stopped", "budget_exhausted"):
            break
        time.sleep(POLL_S)
    assert status == "completed" and done == n, (status, done, n)
    while len(marks) <= 10:
        marks.append(marks[-1])
    # deciles passed within one poll have no time of their own at this resolution: NaN, printed as "—"
    rates = [step / (b - a) if b > a else math.nan for a, b in zip(marks, marks[1:], strict=False)]
    return eid, marks[-1] - t0, rates


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000", help="items per evaluation, in order")
    ap.add_argument("--million", action="store_true", help="also a 1,000,000-item evaluation")
    ap.add_argument("--port-base", type=int, default=20000, help="UEP_STACK_PORT_BASE of the bench's private stack")
    ap.add_argument("--database", default="uep_bench_scale", help="PostgreSQL database of the bench's stack")
    ap.add_argument("--redis-db", type=int, default=14, help="Redis database number of the bench's stack")
    ap.add_argument("--run-dir", default=str(ROOT / ".run" / "bench-scale"), help="run directory of the bench's stack")
    ap.add_argument(
        "--compaction-grace-s", type=float, default=5.0, help="UEP_COMPACTION_GRACE_S of the stack (service default 600)"
    )
    ap.add_argument("--outbox-retain-s", type=float, default=10.0, help="UEP_OUTBOX_RETAIN_S of the stack (default 120)")
    ap.add_argument(
        "--service-ms", type=float, default=2.0, help="the echo model's service time per batch (UEP_BENCH_SERVICE_MS)"
    )
    ap.add_argument("--direct-items", type=int, default=5000, help="calls of the model-alone run")
    ap.add_argument(
        "--warm-up",
        type=int,
        default=10_000,
        help="items of the warm-up evaluation (the broker's JVM compiles its hot paths during the first minute of load)",
    )
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the stack (finally) on kill too
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()] + ([1_000_000] if args.million else [])
    from free_ports import echo_stack_env, start_fresh

    os.environ.update(
        echo_stack_env(args.port_base, args.run_dir, args.database, args.redis_db)
        | {
            "UEP_BENCH_SERVICE_MS": str(args.service_ms),
            # the work limits of the default tenant: one evaluation of the largest size may be created and queued
            "UEP_MAX_ITEMS_PER_EVALUATION": str(max(100_000, *sizes)),
            "UEP_MAX_QUEUED_ITEMS": str(max(1_000_000, 2 * max(sizes))),
            # retention measured right after each run (see the module docstring)
            "UEP_COMPACTION_GRACE_S": str(args.compaction_grace_s),
            "UEP_COMPACTION_INTERVAL_S": "2",
            "UEP_OUTBOX_RETAIN_S": str(args.outbox_retain_s),
            "UEP_OUTBOX_PRUNE_INTERVAL_S": "5",
        }
    )
    settle_s = 120 + args.compaction_grace_s + args.outbox_retain_s
    import cpu_share
    import uep_stack
    from uep_common.runtime.session import make_sync_engine

    cfg = uep_stack.config()
    start_fresh(cfg)
    engine = make_sync_engine(cfg.database_url)
    results: list[SizeRun] = []
    try:
        model_alone(cfg, min(args.direct_items, 500))  # warm-up of the direct client
        alone = model_alone(cfg, args.direct_items)
        print(f"  the model alone: {alone:7.1f} items/s ({ECHO_CAPACITY} calls in flight)", flush=True)
        # warm-up: consumers joined, call times learned, the broker JVM's hot paths compiled
        warm_up, *_ = run(cfg, engine, cfg.auth_headers(), args.warm_up)
        compacted_and_vacuumed(engine, warm_up, settle_s)
        live_before = live_bytes(engine)
        for n in sizes:
            before = table_bytes(engine)
            cpu_before = cpu_share.snapshot(cfg.run_dir)
            eid, seconds, rates = run(cfg, engine, cfg.auth_headers(), n)
            cpu = cpu_share.per_item_ms(cpu_before, cpu_share.snapshot(cfg.run_dir), n)
            after = table_bytes(engine)
            rss = tree_rss_mib(cfg.run_dir)
            per_item = {t: (after[t] - before[t]) / n for t in TABLES}
            print(f"  {n:>9,} items: {n / seconds:7.1f} items/s ({seconds:.1f} s)", flush=True)
            kept = compacted_and_vacuumed(engine, eid, settle_s + n / 200)
            retained = {t: (kept[t] - before[t]) / n for t in TABLES}
            live_after = live_bytes(engine)
            live = {t: (live_after[t] - live_before[t]) / n for t in TABLES} if live_before and live_after else None
            live_before = live_after
            disk = disk_mib(cfg.run_dir / "kafka" / "data")
            results.append(SizeRun(n, seconds, rates, rss, per_item, retained, live, cpu, disk))
    finally:
        engine.dispose()
        uep_stack.down(cfg)
    print(f"\nthe echo model ({args.service_ms:g} ms per batch of up to 8) alone: {alone:.1f} items/s")
    for r in results:
        print(f"  {r.n:>9,}: {r.rate:7.1f} items/s through the pipeline, {r.rate / alone:.3f} of the model alone")
    print(f"\nitems/s per decile of each run (POST → completed, polled every {POLL_S * 1000:.0f} ms)")
    for r in results:
        deciles = " ".join(f"{d:6.0f}" if not math.isnan(d) else f"{'—':>6}" for d in r.rates)
        timed = [d for d in r.rates if not math.isnan(d)]
        trend = f"{timed[-1] / timed[0]:.2f}" if len(timed) >= 2 else "—"
        print(f"  {r.n:>9,}: {r.rate:7.1f} overall | {deciles} | last/first {trend}")
    for r in results[1:]:
        print(f"  {r.n:,} vs {results[0].n:,}: items/s ratio {r.rate / results[0].rate:.3f}   (target ≥ 0.95)")
    print("\nCPU per item, ms (each stack process with its descendants, PostgreSQL and Redis; bench/cpu_share), and")
    print(f"the items/s the {cpu_share.usable_cores()} usable cores would give at that cost")
    for line in cpu_share.table([(f"{r.n:,}", r.cpu_ms) for r in results]):
        print(line)
    names = sorted({k for r in results for k in r.rss})
    print("\nRSS at the end of each run, MiB (process and its descendants)")
    print("  " + " " * 11 + "".join(f"{k:>11}" for k in names))
    for r in results:
        print(f"  {r.n:>9,}: " + "".join(f"{r.rss.get(k, 0):11.1f}" for k in names))
    print("\nthe broker's log on disk at the end of each run, MiB (every topic; retention bounds it)")
    for r in results:
        print(f"  {r.n:>9,}: {r.broker_disk_mib:9.1f}")
    print("\ndatabase bytes per item (growth of pg_total_relation_size over the run / items)")
    print("  " + " " * 11 + "".join(f"{t:>15}" for t in TABLES) + f"{'total':>10}")
    for r in results:
        print(f"  {r.n:>9,}: " + "".join(f"{r.grown[t]:15.0f}" for t in TABLES) + f"{sum(r.grown.values()):10.0f}")
    for title, column in (
        (
            "retained bytes per item, files (growth of pg_total_relation_size since before the run, after compaction and VACUUM / items)",
            "retained_files",
        ),
        (
            "retained bytes per item, rows (growth of the bytes live rows and index entries take, pgstattuple / items)",
            "retained_rows",
        ),
    ):
        print(f"\n{title}")
        print("  " + " " * 11 + "".join(f"{t:>15}" for t in TABLES) + f"{'beyond results':>16}")
        for r in results:
            retained = getattr(r, column)
            if retained is None:
                print(f"  {r.n:>9,}: not measured")
                continue
            beyond = sum(v for t, v in retained.items() if t != "sample_results")
            print(f"  {r.n:>9,}: " + "".join(f"{retained[t]:15.0f}" for t in TABLES) + f"{beyond:16.0f}   (target ≤ 300)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
