"""bench/chaos: kill services under a running evaluation and check that every sample is scored exactly once.

On a private stack (oracle model), one clean run of a ``--n``-sample MMLU evaluation gives the reference
verdicts. Then, ``--runs`` times, an evaluation of the same samples runs while, one at a time with a gap:

1. ``kill -9`` inference, restart it;
2. ``kill -9`` the scorer, restart it; then start a second scorer (``scorer-2``) and ``kill -9`` it as soon as
   it answers ``/readyz``, while its consumer group rebalances;
3. ``kill -9`` the scheduler, restart it — the evaluation is now ``interrupted`` — and resume it with
   ``POST /v1/evaluations/{id}/retry``;
4. ``kill -9`` the broker and start it on the same log (topics, records and committed offsets survive on
   disk; the services reconnect and rejoin their groups);
5. ``kill -9`` the reporter, restart it.

The reporter comes last: while it is down the rest of the pipeline keeps dispatching and scoring, and on its
restart it stores the backlog at once, so a fault after it could find the evaluation already finished; an
evaluation cannot finish while its reporter is down, so the last fault always lands.

A run is *clean* when the evaluation completes with exactly ``n`` rows in ``sample_results``, one per item,
no errors, counters equal to the rows, and verdicts equal to the clean run's. Prints each run's timings and
``clean runs: x/N``.

Usage: ``python bench/chaos.py [--runs 5] [--n 500] [--in-flight 2]``. Stack location from
``UEP_CHAOS_PORT_BASE`` (default 25000), ``UEP_CHAOS_DB`` (uep_chaos), ``UEP_CHAOS_REDIS_DB`` (13),
``UEP_CHAOS_RUN_NAME`` (chaos).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from uep_common.records.lifecycle import TERMINAL

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy" / "local"))
from servers import PG_SERVER, REDIS_SERVER  # noqa: E402 - deploy/local is on the path from here

STEPS = [(0.04, "inference"), (0.10, "scorer"), (0.13, "scorer-2"), (0.16, "scheduler"), (0.0, "broker"), (0.0, "reporter")]
"""(fraction of items stored before the fault, process) in order; 0 = right after the previous fault (while a
service is down the rest of the pipeline runs ahead, so a later fraction could land after the end)."""


def _env(args) -> dict[str, str]:
    db = os.environ.get("UEP_CHAOS_DB", "uep_chaos")
    return {
        "UEP_STACK_PORT_BASE": os.environ.get("UEP_CHAOS_PORT_BASE", "25000"),
        "UEP_STACK_RUN_DIR": str(ROOT / ".run" / os.environ.get("UEP_CHAOS_RUN_NAME", "chaos")),
        "UEP_DATABASE_URL": f"{PG_SERVER}/{db}",
        "UEP_REDIS_URL": f"{REDIS_SERVER}/{os.environ.get('UEP_CHAOS_REDIS_DB', '13')}",
        "UEP_TRITON_MODELS": "oracle",
        "UEP_OTEL_EXPORTER": "none",
        "UEP_LOG_LEVEL": "WARNING",
        "UEP_LEASE_SECONDS": str(args.lease_seconds),  # a lost item is dispatched again this long after
        # a lost ScoreComputed (seen by the scheduler, never stored) is dispatched again this long after
        "UEP_ORPHAN_GRACE_SECONDS": str(args.lease_seconds),
        "UEP_ORPHAN_SWEEP_SECONDS": "5",
        "UEP_MAX_LEASE_ATTEMPTS": "20",  # faults must never turn an item into a failure here
    }


class Run:
    """One evaluation through the stack, with helpers to watch it."""

    def __init__(self, client, engine, n: int, in_flight: int) -> None:
        self.c, self.engine, self.n = client, engine, n
        r = client.post(
            "/v1/evaluations",
            json={"benchmark": "mmlu", "model": "uep-oracle", "sample_limit": n, "max_in_flight": in_flight, "sampling": "first"},
        )
        r.raise_for_status()
        self.id = r.json()["id"]

    def body(self) -> dict:
        return self.c.get(f"/v1/evaluations/{self.id}").json()

    def stored(self) -> int:
        from sqlalchemy import text

        with self.engine.connect() as c:
            return c.execute(text("SELECT count(*) FROM sample_results WHERE evaluation_id = :e"), {"e": self.id}).scalar()

    def wait(self, pred, what: str, timeout_s: float) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            b = self.body()
            if pred(b):
                return b
            time.sleep(0.25)
        raise TimeoutError(f"{what} not reached within {timeout_s:.0f} s: {b['status']} {b['progress']}")

    def verdicts(self) -> dict[int, bool | None]:
        from sqlalchemy import text

        with self.engine.connect() as c:
            rows = c.execute(
                text(
                    "SELECT s.ordinal, r.is_correct FROM sample_results r JOIN samples s ON s.id = r.sample_id "
                    "WHERE r.evaluation_id = :e"
                ),
                {"e": self.id},
            ).all()
        return dict(rows)

    def check(self, reference: dict[int, bool | None]) -> list[str]:
        """Why this run is not clean (empty when it is)."""
        from sqlalchemy import text

        problems = []
        with self.engine.connect() as c:
            rows, items, errors, ev = c.execute(
                text(
                    "SELECT (SELECT count(*) FROM sample_results WHERE evaluation_id = :e), "
                    "(SELECT count(DISTINCT (sample_id, repeat, arm)) FROM sample_results WHERE evaluation_id = :e), "
                    "(SELECT count(*) FROM sample_results WHERE evaluation_id = :e AND error IS NOT NULL), "
                    "(SELECT row(status, completed_items, error_items)::text FROM evaluations WHERE id = :e)"
                ),
                {"e": self.id},
            ).one()
        if rows != self.n or items != self.n:
            problems.append(f"{rows} rows for {items} items (want {self.n})")
        if errors:
            problems.append(f"{errors} error rows")
        if ev != f"(completed,{self.n},0)":
            problems.append(f"evaluation (status, completed, errors) = {ev}")
        got = self.verdicts()
        diff = [o for o in reference if got.get(o, "missing") != reference[o]]
        if diff:
            problems.append(f"{len(diff)} verdicts differ from the clean run (first ordinals {diff[:5]})")
        return problems


def chaos_run(stack, uep_stack, client, engine, args, reference) -> dict:
    """One chaos run; returns its record (timings in seconds, problems)."""
    t0 = time.monotonic()
    run = Run(client, engine, args.n, args.in_flight)
    rec: dict = {"evaluation_id": run.id, "faults": [], "problems": []}
    for fraction, name in STEPS:
        b = run.wait(
            lambda b, f=fraction: b["progress"]["completed"] >= f * args.n or b["status"] in TERMINAL,
            f"{fraction:.0%} stored",
            args.step_timeout,
        )
        if b["status"] in TERMINAL:
            rec["problems"].append(f"finished before the {name} fault")
            break
        t = time.monotonic()
        if name == "scorer-2":  # a second scorer joins, and is killed while its group rebalances
            uep_stack.start_service(stack, name, timeout_s=300)
            uep_stack.kill(stack, name)
            rec["faults"].append(
                {"process": name, "at_items": b["progress"]["completed"], "joined_and_killed_s": round(time.monotonic() - t, 2)}
            )
            continue
        if name == "broker":
            down = uep_stack.restart_broker(stack)
            rec["faults"].append({"process": name, "at_items": b["progress"]["completed"], "down_s": round(down, 2)})
            continue
        uep_stack.kill(stack, name)
        time.sleep(args.gap)
        uep_stack.start_service(stack, name, timeout_s=300)
        fault = {"process": name, "at_items": b["progress"]["completed"], "restart_s": round(time.monotonic() - t, 2)}
        if name == "scheduler":
            b = run.wait(lambda b: b["status"] in ("interrupted", *TERMINAL), "interrupted", 60)
            fault["status_after_restart"] = b["status"]
            if b["status"] == "interrupted":
                r = client.post(f"/v1/evaluations/{run.id}/retry")
                fault["retry"] = {k: r.json().get(k) for k in ("failed_items", "unfinished_items", "undispatched_items")}
        rec["faults"].append(fault)
        time.sleep(args.gap)
    final = run.wait(lambda b: b["status"] in TERMINAL, "the end", args.finish_timeout)
    time.sleep(args.gap)  # late duplicates, if any, have time to (not) land
    rec["status"] = final["status"]
    rec["seconds"] = round(time.monotonic() - t0, 1)
    rec["problems"] += run.check(reference)
    rec["clean"] = not rec["problems"]
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument(
        "--in-flight", type=int, default=2, help="items in flight per evaluation (slows the run so faults land mid-way)"
    )
    ap.add_argument("--lease-seconds", type=float, default=10.0)
    ap.add_argument("--gap", type=float, default=2.0, help="seconds between a kill and the restart, and between faults")
    ap.add_argument("--step-timeout", type=float, default=600.0)
    ap.add_argument("--finish-timeout", type=float, default=900.0)
    args = ap.parse_args()
    os.environ.update(_env(args))

    import httpx
    import redis
    from sqlalchemy import text

    import uep_stack
    from uep_common.runtime.session import make_sync_engine

    stack = uep_stack.config()
    uep_stack.down(stack)
    admin = make_sync_engine(f"{PG_SERVER}/postgres")
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(text(f"DROP DATABASE IF EXISTS {stack.database_url.rsplit('/', 1)[1]} WITH (FORCE)"))
    admin.dispose()
    redis.Redis.from_url(stack.redis_url).flushdb()
    records = []
    t_up = time.monotonic()
    uep_stack.up(stack)
    engine = make_sync_engine(stack.database_url)
    try:
        with httpx.Client(base_url=stack.gateway_url, timeout=30, headers=stack.auth_headers()) as client:
            print(f"stack up in {time.monotonic() - t_up:.1f} s", flush=True)
            t = time.monotonic()
            clean = Run(client, engine, args.n, args.in_flight)
            b = clean.wait(lambda b: b["status"] in TERMINAL, "the clean run", args.finish_timeout)
            assert b["status"] == "completed" and clean.check(clean.verdicts()) == [], b
            reference = clean.verdicts()
            clean_s = time.monotonic() - t
            print(
                f"clean run: {args.n} items in {clean_s:.1f} s, {sum(v is True for v in reference.values())} correct", flush=True
            )
            for i in range(args.runs):
                try:
                    rec = chaos_run(stack, uep_stack, client, engine, args, reference)
                except Exception as exc:  # noqa: BLE001 - a run that hangs or breaks counts as not clean
                    rec = {"clean": False, "problems": [repr(exc)[:500]]}
                records.append(rec)
                print(f"run {i + 1}: {json.dumps(rec)}", flush=True)
    finally:
        engine.dispose()
        uep_stack.down(stack)
    ok = sum(r["clean"] for r in records)
    print(
        f"\nclean runs: {ok}/{len(records)}  (n={args.n}, clean run {clean_s:.1f} s; chaos runs "
        f"{', '.join(str(r.get('seconds', '-')) for r in records)} s)"
    )
    return 0 if ok == len(records) else 1


if __name__ == "__main__":
    sys.exit(main())
