"""bench/report: time to build the report (and the leaderboard) of an evaluation of 100,000 items.

Synthetic rows are inserted straight into a bench database (``uep_bench_report``, dropped and migrated at
start; override with ``UEP_BENCH_REPORT_DB``): one benchmark of 100,000 items in 57 subjects, a baseline
evaluation and the evaluation under test, each with 100,000 results (verdict, a continuous per-item metric,
latency, tokens, extraction kind, 1 % errors). Both are completed, so the report includes the paired
comparison (2×2 table, McNemar, paired bootstrap over 100,000 pairs) and the trend.

Measured (wall clock, one process): ``collect`` (every query and statistic), ``render`` (charts + HTML),
``json``, total = the report's build time (target < 5 s), then the leaderboard (record the score + load
the ranked board), and separately the PDF (headless Chromium, not part of the target). Peak memory:
tracemalloc's peak of Python allocations during the build, and the process's max RSS.

Usage: ``make bench-report`` (starts the checkout's PostgreSQL where it does not run; ``--items N`` to change the size).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import time
import tracemalloc
import uuid
from pathlib import Path

from sqlalchemy import text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy" / "local"))
from servers import PG_SERVER  # noqa: E402 - deploy/local is on the path from here

DB = os.environ.get("UEP_BENCH_REPORT_DB", "uep_bench_report")
URL = f"{PG_SERVER}/{DB}"
SUBJECTS = 57


def prepare(n: int) -> tuple[uuid.UUID, uuid.UUID]:
    """Fresh database with the synthetic benchmark, model and two completed evaluations; returns their ids
    (baseline, current)."""
    from uep_common.admin import create_database, migrate
    from uep_common.runtime.session import make_sync_engine

    admin = make_sync_engine(f"{PG_SERVER}/postgres")
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(text(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)"))
    admin.dispose()
    create_database(URL)
    migrate(URL)
    engine = make_sync_engine(URL)
    tenant, bench, model = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    base_id, cur_id = uuid.uuid4(), uuid.uuid4()
    with engine.begin() as c:
        c.execute(text("SELECT setseed(0.42)"))
        c.execute(text("INSERT INTO tenants (id, slug, name) VALUES (:t, 'bench', 'bench')"), {"t": tenant})
        c.execute(
            text(
                "INSERT INTO benchmarks (id, slug, name, description, version, category, status, is_builtin, evaluation_type, "
                "capability_dimensions, config, sample_count) VALUES (:b, 'synth-mc', 'Synthetic MC', '', 'v1', 'reasoning', "
                "'active', false, 'automatic', '[\"knowledge\", \"reasoning\", \"math\"]', "
                '\'{"prompt": {"template": "{{ question }}", "max_tokens": 16}, "metric": {"name": "multiple_choice_letter", "params": {}}}\', :n)'
            ),
            {"b": bench, "n": n},
        )
        c.execute(
            text(
                "INSERT INTO samples (id, benchmark_id, ordinal, external_id, input, reference, metadata) "
                "SELECT gen_random_uuid(), :b, i, 'synth/' || i, jsonb_build_object('question', 'Question number ' || i || '?', "
                "'subject', 'subject_' || lpad((i % :s)::text, 2, '0'), 'choices', jsonb_build_array('a', 'b', 'c', 'd')), "
                "jsonb_build_object('answer', chr(65 + i % 4)), '{}' FROM generate_series(0, :n - 1) i"
            ),
            {"b": bench, "n": n, "s": SUBJECTS},
        )
        c.execute(
            text(
                "INSERT INTO models (id, name, version, description, backend, endpoint, decoding_defaults, supports_logprobs) "
                "VALUES (:m, 'bench-model', '2', '', 'triton', '127.0.0.1:1', '{}', false)"
            ),
            {"m": model},
        )
        for k, (eid, p_ok, minutes_ago) in enumerate(((base_id, 0.55, 60), (cur_id, 0.6, 1))):
            c.execute(
                text(
                    "INSERT INTO evaluations (id, tenant_id, benchmark_id, model_id, status, priority, repeats, total_items, "
                    "dispatched_items, completed_items, error_items, config, trace_context, created_at, started_at, completed_at) VALUES "
                    "(:e, :t, :b, :m, 'completed', 'normal', 1, :n, :n, :n, 0, '{}', '{}', now() - make_interval(mins => :ago), "
                    "now() - make_interval(mins => :ago), now() - make_interval(mins => :ago - 1))"
                ),
                {"e": eid, "t": tenant, "b": bench, "m": model, "n": n, "ago": minutes_ago},
            )
            # per subject a different accuracy; 1 % errors (no verdict); 2 % extraction failures
            c.execute(
                text("""
                INSERT INTO sample_results (evaluation_id, sample_id, repeat, arm, output, extracted, is_correct, score,
                    metric_name, metric_version, metrics, latency_ms, prompt_tokens, completion_tokens, error, attempt, score_event_id)
                SELECT :e, s.id, 0, 'main',
                    CASE WHEN x.err THEN NULL ELSE 'The answer is (' || chr(65 + (s.ordinal + x.wrong::int) % 4) || ').' END,
                    CASE WHEN x.err OR x.noext THEN NULL ELSE chr(65 + (s.ordinal + x.wrong::int) % 4) END,
                    CASE WHEN x.err THEN NULL ELSE NOT x.wrong END,
                    CASE WHEN x.err THEN NULL WHEN x.wrong THEN 0.0 ELSE 1.0 END,
                    'multiple_choice_letter', '1',
                    CASE WHEN x.err THEN '{}'::jsonb ELSE jsonb_build_object('extraction', CASE WHEN x.noext THEN 'no_answer' ELSE 'explicit' END,
                        'f1', round((random())::numeric, 4)) END,
                    20 + 200 * random() * random(), 300 + (random() * 200)::int, 5 + (random() * 20)::int,
                    CASE WHEN x.err THEN jsonb_build_object('stage', 'inference', 'type', 'timeout', 'message', 'deadline exceeded') END,
                    1, gen_random_uuid()
                FROM samples s,
                LATERAL (SELECT random() < 0.01 AS err, random() < 0.02 AS noext,
                                random() > :p + 0.2 * ((s.ordinal % :subjects)::float / :subjects - 0.5) AS wrong) x
                WHERE s.benchmark_id = :b
                """),
                {"e": eid, "b": bench, "p": p_ok, "subjects": SUBJECTS},
            )
            assert k in (0, 1)
    # stored summaries (as the reporter writes them), for the trend and the leaderboard
    import asyncio as _a

    from uep_common.analytics.summary import compute_summary
    from uep_common.runtime.session import make_async_engine, make_sessionmaker

    async def summaries() -> None:
        eng = make_async_engine(URL)
        sm = make_sessionmaker(eng)
        async with sm() as s, s.begin():
            for eid in (base_id, cur_id):
                summ = await compute_summary(s, eid)
                await s.execute(
                    text("UPDATE evaluations SET summary = CAST(:s AS jsonb) WHERE id = :e"),
                    {"s": summ.model_dump_json(), "e": eid},
                )
        await eng.dispose()

    _a.run(summaries())
    with engine.begin() as c:  # planner statistics, as autovacuum would gather them after a bulk insert
        c.execute(text("ANALYZE"))
    engine.dispose()
    return base_id, cur_id


async def _build(sm, evaluation_id: uuid.UUID) -> tuple[dict[str, float], str]:
    from uep_reporter.report import collect, render_html, render_json

    t0, c0 = time.perf_counter(), time.process_time()
    async with sm() as s:
        report = await collect(s, evaluation_id)
    t1 = time.perf_counter()
    html = render_html(report)
    t2 = time.perf_counter()
    body = render_json(report)
    t3 = time.perf_counter()
    return {
        "cpu_s": time.process_time() - c0,
        "collect_s": t1 - t0,
        "render_s": t2 - t1,
        "json_s": t3 - t2,
        "report_s": t3 - t0,
        "html_bytes": len(html),
        "json_bytes": len(body),
        "n": report.summary.n,
        "metric": report.summary.metric_name,
        "paired": report.comparison.comparison.n_paired if report.comparison else 0,
    }, html


async def _leaderboard(sm, evaluation_id: uuid.UUID, metric: str | None) -> int | None:
    """Record the evaluation's leaderboard score and load the ranked board (workstream T's module); None
    when the module is not there (hook)."""
    try:
        from uep_common.analytics.leaderboards import load_board, record_evaluation, score_type_of
    except ImportError:
        return None
    async with sm() as s, s.begin():
        await record_evaluation(s, evaluation_id)
    async with sm() as s:
        return len(await load_board(s, "synth-mc", score_type_of("automatic", metric)))


async def measure(evaluation_id: uuid.UUID, pdf: bool) -> dict[str, float]:
    """Build the report (and the leaderboard) of ``evaluation_id``: once timed, once more under tracemalloc
    for the peak of Python allocations (tracemalloc slows allocation-heavy code several times, so its run
    is not timed). Returns timings in seconds and memory in MiB."""
    from uep_common.runtime.session import make_async_engine, make_sessionmaker

    engine = make_async_engine(URL)
    sm = make_sessionmaker(engine)
    async with sm() as s:  # warm-up: imports, connection pool (not measured)
        await s.execute(text("SELECT 1"))
    out, html = await _build(sm, evaluation_id)
    t4 = time.perf_counter()
    entries = await _leaderboard(sm, evaluation_id, out["metric"])
    out["leaderboard_s"] = time.perf_counter() - t4 if entries is not None else float("nan")
    out["leaderboard_entries"] = entries or 0
    out["max_rss_after_build_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tracemalloc.start()
    await _build(sm, evaluation_id)
    out["report_tracemalloc_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.reset_peak()
    await _leaderboard(sm, evaluation_id, out["metric"])
    out["leaderboard_tracemalloc_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    if pdf:
        from uep_reporter.pdf import PdfUnavailable, html_to_pdf

        t5 = time.perf_counter()
        try:
            data = await html_to_pdf(html)
            out["pdf_s"] = time.perf_counter() - t5
            out["pdf_bytes"] = len(data)
        except PdfUnavailable as exc:
            print(f"PDF skipped: {exc}")
    out["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    await engine.dispose()
    return out


def _existing() -> uuid.UUID:
    from uep_common.runtime.session import make_sync_engine

    engine = make_sync_engine(URL)
    with engine.connect() as c:
        eid = c.execute(text("SELECT id FROM evaluations ORDER BY created_at DESC LIMIT 1")).scalar_one()
    engine.dispose()
    return eid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--no-pdf", action="store_true")
    parser.add_argument("--reuse", action="store_true", help="measure the database of the last run again (no insert)")
    args = parser.parse_args()
    t = time.perf_counter()
    current = prepare(args.items)[1] if not args.reuse else _existing()
    print(
        f"{'reused' if args.reuse else 'prepared'} {args.items:,} items × 2 evaluations in {time.perf_counter() - t:.1f} s (database {DB})"
    )
    r = asyncio.run(measure(current, not args.no_pdf))
    print(f"report of {int(r['n']):,} items ({int(r['paired']):,} pairs compared with the baseline):")
    print(f"  collect (queries + statistics)   {r['collect_s']:7.2f} s")
    print(f"  render HTML (charts + template)  {r['render_s']:7.2f} s   ({r['html_bytes'] / 1024:.0f} KiB)")
    print(f"  JSON                             {r['json_s']:7.2f} s   ({r['json_bytes'] / 1024:.0f} KiB)")
    print(
        f"  total                            {r['report_s']:7.2f} s   target < 5 s: {'PASS' if r['report_s'] < 5 else 'FAIL'}"
        f"   (CPU time of this process {r['cpu_s']:.2f} s; load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    )
    print(
        f"  peak Python memory (tracemalloc, separate run) {r['report_tracemalloc_peak_mb']:.1f} MiB; "
        f"max RSS after the build {r['max_rss_after_build_mb']:.0f} MiB"
    )
    if r["leaderboard_s"] == r["leaderboard_s"]:
        print(
            f"leaderboard (record + load, {int(r['leaderboard_entries'])} entries) {r['leaderboard_s']:.2f} s, "
            f"peak {r['leaderboard_tracemalloc_peak_mb']:.1f} MiB"
        )
    else:
        print("leaderboard: uep_common.analytics.leaderboards not available (hook in bench/report.py:measure)")
    if "pdf_s" in r:
        print(f"PDF (headless Chromium, not in the target) {r['pdf_s']:.2f} s ({r['pdf_bytes'] / 1024:.0f} KiB)")
    print(f"max RSS of the process {r['max_rss_mb']:.0f} MiB")


if __name__ == "__main__":
    main()
