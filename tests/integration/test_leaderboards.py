"""Leaderboards on the real stack: tie groups, top-N, latest-not-best entries, rank history and the
comparison radar from constructed evaluations (recorded the way the reporter records them), and one board
built by the running services from real evaluations of the oracle model.

Expected intervals are Wilson 95 % intervals of k/n (uep_common.analytics.stats.wilson_interval = scipy's
binomtest(k, n).proportion_ci(method="wilson"); reference values in tests/unit/test_stats.py), the tie-group
rule is the one documented in uep_common.analytics.leaderboards (new group when an entry's upper bound is below the
group leader's lower bound).
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from uep_common.analytics import leaderboards as lb
from uep_common.analytics.stats import bootstrap_mean, wilson_interval
from uep_common.runtime.session import make_async_engine, make_sessionmaker

from .helpers import register_model, submit, wait_done

T0 = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
async def sessions(stack):
    engine = make_async_engine(stack.database_url, pool_size=2)
    yield make_sessionmaker(engine)
    await engine.dispose()


def make_benchmark(db, prefix: str, n_samples: int = 8) -> tuple[str, list[uuid.UUID]]:
    """A custom benchmark row with ``n_samples`` samples; returns (slug, sample ids)."""
    bench_id, slug = uuid.uuid4(), f"{prefix}-{uuid.uuid4().hex[:8]}"
    samples = [uuid.uuid4() for _ in range(n_samples)]
    with db.begin() as c:
        c.execute(
            text(
                "INSERT INTO benchmarks (id, slug, name, description, version, category, status, is_builtin, evaluation_type, "
                "capability_dimensions, config, sample_count) VALUES (:id, :s, :s, '', :v, 'custom', 'active', false, 'automatic', "
                "'[]', '{}', :n)"
            ),
            {"id": bench_id, "s": slug, "v": uuid.uuid4().hex, "n": n_samples},
        )
        for i, sid in enumerate(samples):
            c.execute(
                text(
                    "INSERT INTO samples (id, benchmark_id, ordinal, external_id, input, reference, metadata) "
                    "VALUES (:id, :b, :o, :x, '{}', '{}', '{}')"
                ),
                {"id": sid, "b": bench_id, "o": i, "x": f"s{i}"},
            )
    return slug, samples


def summary(metric: str, k: int | None, n: int) -> dict:
    ci = wilson_interval(k, n) if k is not None else None
    return {
        "n": n,
        "scored": n if k is not None else 0,
        "correct": k or 0,
        "errors": 0,
        "accuracy": k / n if k is not None else None,
        "ci_low": ci[0] if ci else None,
        "ci_high": ci[1] if ci else None,
        "latency_ms_p50": None,
        "latency_ms_p90": None,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "metric_name": metric,
    }


async def record(
    sessions,
    db,
    slug: str,
    model: str,
    metric: str,
    k: int | None,
    n: int,
    completed_at: datetime,
    scores: list[float] | None = None,
    tenant: str = "default",
    items: int | None = None,
    experiment_id: uuid.UUID | None = None,
    config: dict | None = None,
) -> uuid.UUID:
    """Insert a completed evaluation of ``tenant`` (and, for a continuous metric, its items' scores) and record
    it on the leaderboard in the same transaction, as the reporter does right after completing one. ``items``:
    its total items (default ``n``; one repeat, so its item set is the first ``items`` samples); an A/B arm
    has an ``experiment_id``."""
    eid = uuid.uuid4()
    async with sessions() as s, s.begin():
        ids = (
            await s.execute(
                text(
                    "SELECT (SELECT id FROM tenants WHERE slug = :t), (SELECT id FROM benchmarks WHERE slug = :b), "
                    "(SELECT id FROM models WHERE name = :m)"
                ),
                {"b": slug, "m": model, "t": tenant},
            )
        ).one()
        await s.execute(
            text(
                "INSERT INTO evaluations (id, tenant_id, benchmark_id, model_id, status, priority, repeats, total_items, "
                "dispatched_items, completed_items, error_items, config, summary, trace_context, created_at, completed_at, "
                "experiment_id) VALUES (:id, :t, :b, :m, 'completed', 'normal', 1, :i, :i, :i, 0, CAST(:cfg AS jsonb), "
                "CAST(:s AS jsonb), '{}', :c, :c, :x)"
            ),
            {
                "id": eid,
                "t": ids[0],
                "b": ids[1],
                "m": ids[2],
                "i": items or n,
                "cfg": json.dumps(config or {}),
                "s": json.dumps(summary(metric, k, n)),
                "c": completed_at,
                "x": experiment_id,
            },
        )
        sample_ids = (
            await s.scalars(text("SELECT id FROM samples WHERE benchmark_id = :b ORDER BY ordinal"), {"b": ids[1]})
        ).all()
        for sid, score in zip(sample_ids, scores or [], strict=False):
            await s.execute(
                text(
                    "INSERT INTO sample_results (evaluation_id, sample_id, repeat, arm, score, metric_name, metrics, score_event_id, attempt) "
                    "VALUES (:e, :s, 0, 'main', :v, :m, '{}', :u, 1)"
                ),
                {"e": eid, "s": sid, "v": score, "m": metric, "u": uuid.uuid4()},
            )
        assert await lb.record_evaluation(s, eid) == (experiment_id is None or bool((config or {}).get("release")))
    return eid


def board(gateway, slug: str, headers: dict | None = None, **params) -> dict:
    r = gateway.get(f"/v1/leaderboards/{slug}", params=params, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="module")
def tenant_b(stack) -> tuple[str, dict]:
    """A second tenant: (slug, headers of its viewer key)."""
    from uep_common.admin import create_api_key, create_tenant

    slug = f"lb-b-{uuid.uuid4().hex[:6]}"
    create_tenant(stack.database_url, slug)
    return slug, {"Authorization": f"Bearer {create_api_key(stack.database_url, slug, 'viewer', 'leaderboard tests')}"}


async def test_each_tenant_sees_and_ranks_its_own_entries(stack, db, gateway, sessions, tenant_b):
    b_slug, b_headers = tenant_b
    slug, _ = make_benchmark(db, "lb-tenants")  # a site catalogue benchmark: every tenant may evaluate it
    ep = f"grpc://127.0.0.1:{stack.triton_grpc}"
    m = {x: register_model(db, ep, "uep_oracle", f"lbt-{x}") for x in "PQR"}
    a_ids = [
        await record(sessions, db, slug, m["P"], "exact_match", 90, 100, T0),
        await record(sessions, db, slug, m["Q"], "exact_match", 60, 100, T0 + timedelta(minutes=1)),
    ]
    # tenant B: R between P and Q, and Q again (a later run: the latest over both tenants)
    b_ids = [
        await record(sessions, db, slug, m["R"], "exact_match", 75, 100, T0 + timedelta(minutes=2), tenant=b_slug),
        await record(sessions, db, slug, m["Q"], "exact_match", 20, 100, T0 + timedelta(minutes=3), tenant=b_slug),
    ]

    mine = board(gateway, slug)
    assert [(e["model"], e["evaluation_id"], e["position"], e["rank"]) for e in mine["entries"]] == [
        (m["P"], str(a_ids[0]), 1, 1),
        (m["Q"], str(a_ids[1]), 2, 2),
    ]
    theirs = board(gateway, slug, headers=b_headers)
    assert [(e["model"], e["evaluation_id"], e["position"], e["rank"]) for e in theirs["entries"]] == [
        (m["R"], str(b_ids[0]), 1, 1),
        (m["Q"], str(b_ids[1]), 2, 2),
    ]
    assert theirs["total"] == 2 and not {str(i) for i in a_ids} & {e["evaluation_id"] for e in theirs["entries"]}

    listed = {(x["benchmark"], x["score_type"]): x for x in gateway.get("/v1/leaderboards", headers=b_headers).json()}
    assert (listed[(slug, "exact_match")]["models"], listed[(slug, "exact_match")]["evaluations"]) == (2, 2)

    # history: B's snapshots only, cut down to B's entries and ranked among them
    h = gateway.get(f"/v1/leaderboards/{slug}/history", headers=b_headers).json()["snapshots"]
    assert [s["evaluation_id"] for s in h] == [str(b_ids[1]), str(b_ids[0])]
    seen = {e["evaluation_id"] for s in h for e in s["entries"]}
    assert seen == {str(i) for i in b_ids}
    assert [(e["model"], e["rank"]) for e in h[0]["entries"]] == [(m["R"], 1), (m["Q"], 2)]
    assert all("tenant_id" not in e for s in h for e in s["entries"])
    assert [(c["model"], c["from_rank"], c["to_rank"]) for c in h[0]["changes"]] == [(m["Q"], None, 2)]
    a_hist = gateway.get(f"/v1/leaderboards/{slug}/history").json()["snapshots"]
    assert [s["evaluation_id"] for s in a_hist] == [str(a_ids[1]), str(a_ids[0])]
    assert {e["evaluation_id"] for s in a_hist for e in s["entries"]} == {str(i) for i in a_ids}

    cmp = gateway.get("/v1/leaderboards/compare", params={"models": m["R"], "benchmarks": slug}).json()
    assert cmp["rows"][0]["scores"][f"{slug}:exact_match"] is None  # R is only on B's board

    # a site admin acting across tenants sees the whole board: latest run per model version over both tenants
    site = board(gateway, slug, headers={"X-UEP-Site-Admin": "true"})
    assert [(e["model"], e["evaluation_id"]) for e in site["entries"]] == [
        (m["P"], str(a_ids[0])),
        (m["R"], str(b_ids[0])),
        (m["Q"], str(b_ids[1])),
    ]

    # site-wide boards (the gateway setting): every tenant's entries, on benchmarks the reader may see
    async with sessions() as s:
        b_id = (await s.execute(text("SELECT id FROM tenants WHERE slug = :t"), {"t": b_slug})).scalar_one()
        wide = await lb.load_board(s, slug, "exact_match", scope=lb.BoardScope(viewer_tenant_id=b_id))
        assert [(e.model, e.evaluation_id, e.rank) for e in wide] == [
            (m["P"], a_ids[0], 1),
            (m["R"], b_ids[0], 2),
            (m["Q"], b_ids[1], 3),
        ]
        wide_hist = await lb.board_history(s, slug, "exact_match", scope=lb.BoardScope(viewer_tenant_id=b_id))
        assert [x["evaluation_id"] for x in wide_hist] == [str(i) for i in (b_ids[1], b_ids[0], a_ids[1], a_ids[0])]
        assert [(e["model"], e["rank"]) for e in wide_hist[0]["entries"]] == [(m["P"], 1), (m["R"], 2), (m["Q"], 3)]
        # a private benchmark of tenant A is no board of B's, even site-wide
        await s.execute(
            text("UPDATE benchmarks SET owner_tenant_id = (SELECT id FROM tenants WHERE slug = 'default') WHERE slug = :s"),
            {"s": slug},
        )
        await s.commit()
        assert await lb.load_board(s, slug, "exact_match", scope=lb.BoardScope(viewer_tenant_id=b_id)) == []
        assert slug not in {x["benchmark"] for x in await lb.list_boards(s, lb.BoardScope(viewer_tenant_id=b_id))}


async def test_tie_groups_top_n_latest_entry_and_rank_history(stack, db, gateway, sessions):
    slug, _ = make_benchmark(db, "lb-acc")
    ep = f"grpc://127.0.0.1:{stack.triton_grpc}"
    m = {x: register_model(db, ep, "uep_oracle", f"lb-{x}") for x in "ABCDE"}
    for i, (x, k) in enumerate([("A", 92), ("B", 86), ("C", 70), ("D", 60), ("E", 50)]):
        await record(sessions, db, slug, m[x], "exact_match", k, 100, T0 + timedelta(minutes=i))

    # A 92 [0.8500, 0.9589] leads group 1; B 86 [0.7786, 0.9147] reaches 0.8500 -> group 1; C 70 [0.6042, 0.7811]
    # is below 0.8500 -> group 2 (rank 3); D 60 [0.5020, 0.6906] reaches 0.6042 -> group 2; E 50 [0.4038, 0.5962]
    # is below C's 0.6042 -> group 3 (rank 5), although it overlaps D.
    b = board(gateway, slug)
    assert b["score_type"] == "exact_match" and b["score_types"] == ["exact_match"] and b["total"] == 5
    got = [(e["model"], e["position"], e["tie_group"], e["rank"]) for e in b["entries"]]
    assert got == [(m["A"], 1, 1, 1), (m["B"], 2, 1, 1), (m["C"], 3, 2, 3), (m["D"], 4, 2, 3), (m["E"], 5, 3, 5)]
    a = b["entries"][0]
    assert (a["score"], a["n"], a["method"], a["evaluations"]) == (0.92, 100, "wilson", 1)
    assert (a["ci_low"], a["ci_high"]) == pytest.approx(wilson_interval(92, 100))
    assert a["ci_low"] == pytest.approx(0.8500, abs=5e-5) and a["last_evaluated"].startswith("2026-03-01T00:00")

    top = board(gateway, slug, top=2)
    assert [e["model"] for e in top["entries"]] == [m["A"], m["B"]] and top["total"] == 5

    # E is evaluated again, 95/100 [0.88825, 0.97846]: its entry is now that latest run (2 evaluations). A 92
    # (upper 0.9589) and B 86 (upper 0.9147) reach 0.88825 -> group 1; C (upper 0.7811) starts group 2 at rank 4.
    e2 = await record(sessions, db, slug, m["E"], "exact_match", 95, 100, T0 + timedelta(hours=1))
    # An OLDER run of A that scored higher does not replace A's latest entry (latest, not best).
    await record(sessions, db, slug, m["A"], "exact_match", 99, 100, T0 - timedelta(days=1))
    b = board(gateway, slug)
    got = [(e["model"], e["position"], e["tie_group"], e["rank"], e["evaluations"]) for e in b["entries"]]
    assert got == [(m["E"], 1, 1, 1, 2), (m["A"], 2, 1, 1, 2), (m["B"], 3, 1, 1, 1), (m["C"], 4, 2, 4, 1), (m["D"], 5, 2, 4, 1)]
    assert b["entries"][0]["evaluation_id"] == str(e2) and b["entries"][1]["score"] == 0.92
    assert wilson_interval(95, 100)[0] == pytest.approx(0.88825, abs=1e-5)

    h = gateway.get(f"/v1/leaderboards/{slug}/history").json()
    snaps = h["snapshots"]
    assert len(snaps) == 7 and snaps[0]["evaluation_id"] is not None  # one snapshot per recorded evaluation
    assert snaps[0]["changes"] == []  # the old, better run of A changed nothing
    changes = {c["model"]: (c["from_position"], c["to_position"], c["from_rank"], c["to_rank"]) for c in snaps[1]["changes"]}
    assert snaps[1]["evaluation_id"] == str(e2)
    assert changes == {
        m["E"]: (5, 1, 5, 1),
        m["A"]: (1, 2, 1, 1),
        m["B"]: (2, 3, 1, 1),
        m["C"]: (3, 4, 3, 4),
        m["D"]: (4, 5, 3, 4),
    }
    first = snaps[-1]  # the board after the first evaluation: A alone, new on the board
    assert [c["model"] for c in first["changes"]] == [m["A"]] and first["changes"][0]["from_rank"] is None
    assert len(gateway.get(f"/v1/leaderboards/{slug}/history", params={"limit": 2}).json()["snapshots"]) == 2

    listed = {(x["benchmark"], x["score_type"]): x for x in gateway.get("/v1/leaderboards").json()}
    assert listed[(slug, "exact_match")]["models"] == 5 and listed[(slug, "exact_match")]["evaluations"] == 7

    # A rescore that changes nothing records nothing; recording is idempotent.
    async with sessions() as s, s.begin():
        assert not await lb.record_evaluation(s, e2)


async def test_continuous_board_compare_and_radar(stack, db, gateway, sessions):
    ep = f"grpc://127.0.0.1:{stack.triton_grpc}"
    p, q, r = (register_model(db, ep, "uep_oracle", f"cmp-{x}") for x in "pqr")
    acc, _ = make_benchmark(db, "cmp-acc")
    cont, _ = make_benchmark(db, "cmp-bleu")
    third, _ = make_benchmark(db, "cmp-third")
    await record(sessions, db, acc, p, "exact_match", 40, 50, T0)
    await record(sessions, db, acc, q, "exact_match", 30, 50, T0)
    p_scores = [0.2, 0.4, 0.6, 0.3, 0.5, 0.1, 0.7, 0.4]  # mean 0.4
    q_scores = [0.9, 0.8, 1.0, 0.7, 0.9, 1.0, 0.8, 0.9]  # mean 0.875
    await record(sessions, db, cont, p, "bleu", None, 8, T0, scores=p_scores)
    await record(sessions, db, cont, q, "bleu", None, 8, T0, scores=q_scores)
    await record(sessions, db, third, p, "exact_match", 10, 20, T0)  # q has no score here: a gap on the radar

    b = board(gateway, cont)
    assert [(e["model"], e["method"], e["n"]) for e in b["entries"]] == [(q, "bootstrap", 8), (p, "bootstrap", 8)]
    qe, pe = b["entries"]
    assert qe["score"] == pytest.approx(0.875) and pe["score"] == pytest.approx(0.4)  # hand-computed means
    ref = bootstrap_mean(p_scores)  # the shared statistics module (scipy.stats.bootstrap, fixed seed)
    assert (pe["ci_low"], pe["ci_high"]) == pytest.approx((ref.low, ref.high)) and pe["ci_low"] < 0.4 < pe["ci_high"]
    assert "bootstrap" in pe["method_detail"]
    assert qe["ci_low"] > pe["ci_high"] and (qe["tie_group"], pe["tie_group"], pe["rank"]) == (1, 2, 2)

    r1 = gateway.get(
        "/v1/leaderboards/compare", params={"models": f"{p},{q}", "benchmarks": f"{acc},{cont}:bleu,{third}"}, timeout=180
    )  # the gateway's first radar imports matplotlib (slow on a loaded CI machine)
    assert r1.status_code == 200, r1.text
    c = r1.json()
    assert [x["key"] for x in c["boards"]] == [f"{acc}:exact_match", f"{cont}:bleu", f"{third}:exact_match"]
    rows = {row["model"]: row["scores"] for row in c["rows"]}
    assert rows[p][f"{acc}:exact_match"]["score"] == 0.8 and rows[q][f"{acc}:exact_match"]["score"] == 0.6
    assert rows[q][f"{third}:exact_match"] is None
    assert c["radar_series"] == {
        p: {f"{acc}:exact_match": 0.8, f"{cont}:bleu": pytest.approx(0.4), f"{third}:exact_match": 0.5},
        q: {f"{acc}:exact_match": 0.6, f"{cont}:bleu": pytest.approx(0.875)},
    }
    svg = c["radar_svg"]
    assert svg.lstrip().startswith("<svg") and svg.rstrip().endswith("</svg>") and "<path" in svg
    img = gateway.get("/v1/leaderboards/compare", params={"models": f"{p},{q}", "benchmarks": f"{acc},{cont}", "format": "svg"})
    assert img.status_code == 200 and img.headers["content-type"].startswith("image/svg+xml") and b"<svg" in img.content

    # Without benchmarks: every benchmark on which one of the models has a score.
    allb = gateway.get("/v1/leaderboards/compare", params={"models": p}).json()
    assert {x["benchmark"] for x in allb["boards"]} == {acc, cont, third}
    # A model version never evaluated here: every cell empty, no polygon.
    assert all(
        v is None
        for v in gateway.get("/v1/leaderboards/compare", params={"models": r, "benchmarks": acc})
        .json()["rows"][0]["scores"]
        .values()
    )

    def err(path, params):
        resp = gateway.get(path, params=params)
        return resp.status_code, resp.json()["detail"][0]["loc"], resp.json()["detail"][0]["type"]

    assert err("/v1/leaderboards/compare", {"models": "no-such-model"}) == (422, ["query", "models"], "unknown_model")
    assert err("/v1/leaderboards/compare", {"models": f"{p}@9"}) == (422, ["query", "models"], "unknown_model")
    assert err("/v1/leaderboards/compare", {"models": p, "benchmarks": "no-such"}) == (
        422,
        ["query", "benchmarks"],
        "unknown_benchmark",
    )
    assert err("/v1/leaderboards/compare", {"models": p, "benchmarks": f"{acc}:judge"}) == (
        422,
        ["query", "benchmarks"],
        "unknown_score_type",
    )
    assert err("/v1/leaderboards/no-such-bench", {}) == (404, ["path", "benchmark"], "unknown_benchmark")
    assert err(f"/v1/leaderboards/{acc}", {"score_type": "judge"}) == (404, ["query", "score_type"], "unknown_score_type")
    assert err(f"/v1/leaderboards/{acc}", {"top": 0})[0:2] == (422, ["query", "top"])


async def test_a_board_ranks_one_item_set_and_leaves_out_a_b_arms(stack, db, gateway, sessions):
    slug, _ = make_benchmark(db, "lb-items", n_samples=30)
    ep = f"grpc://127.0.0.1:{stack.triton_grpc}"
    m = {x: register_model(db, ep, "uep_oracle", f"lbi-{x}") for x in ("small", "full1", "full2", "arm", "release")}
    version = await _version(sessions, slug)
    # 8/8 on the first 8 samples would lead a mixed board (Wilson [0.6756, 1.0]); 18/30 and 10/30 on all 30
    small = await record(sessions, db, slug, m["small"], "exact_match", 8, 8, T0)
    f1 = await record(sessions, db, slug, m["full1"], "exact_match", 18, 30, T0 + timedelta(minutes=1))
    f2 = await record(sessions, db, slug, m["full2"], "exact_match", 10, 30, T0 + timedelta(minutes=2))
    # two arms of one experiment: the plain one enters no board, the release run does
    exp = uuid.uuid4()
    await record(sessions, db, slug, m["arm"], "exact_match", 30, 30, T0 + timedelta(minutes=3), experiment_id=exp)
    rel = await record(
        sessions,
        db,
        slug,
        m["release"],
        "exact_match",
        5,
        30,
        T0 + timedelta(minutes=4),
        experiment_id=exp,
        config={"release": True},
    )

    b = board(gateway, slug)
    assert b["item_set"] == f"{version}:30"
    assert [(e["evaluation_id"], e["rank"], e["tie_group"], e["samples"]) for e in b["entries"]] == [
        (str(f1), 1, 1, 30),  # 18/30 [0.4232, 0.7541]
        (str(f2), 1, 1, 30),  # 10/30 [0.1923, 0.5122] reaches 0.4232: tied
        (str(rel), 3, 2, 30),  # 5/30 [0.0734, 0.3357] is below 0.4232
    ]
    assert [(s["key"], s["entries"]) for s in b["item_sets"]] == [(f"{version}:30", 3), (f"{version}:8", 1)]
    other = board(gateway, slug, item_set=f"{version}:8")
    assert [(e["evaluation_id"], e["rank"], e["tie_group"]) for e in other["entries"]] == [(str(small), 1, 1)]
    r = gateway.get(f"/v1/leaderboards/{slug}", params={"item_set": f"{version}:9"})
    assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["query", "item_set"]
    assert m["arm"] not in {e["model"] for s in (b, other) for e in s["entries"]}
    listed = {(x["benchmark"], x["score_type"]): x for x in gateway.get("/v1/leaderboards").json()}
    assert listed[(slug, "exact_match")]["evaluations"] == 4  # the plain arm is not counted
    cmp = gateway.get("/v1/leaderboards/compare", params={"models": f"{m['small']},{m['full1']}", "benchmarks": slug}).json()
    cells = {row["model"]: row["scores"][f"{slug}:exact_match"] for row in cmp["rows"]}
    assert cells[m["small"]] is None and cells[m["full1"]]["evaluation_id"] == str(f1)  # default item set only


async def _version(sessions, slug: str) -> str:
    async with sessions() as s:
        return (await s.execute(text("SELECT version FROM benchmarks WHERE slug = :s"), {"s": slug})).scalar_one()


def test_board_from_real_oracle_evaluations(stack, db, gateway):
    """Two model names served by the oracle Triton model, evaluated by the running pipeline; the reporter
    records each completion, the gateway serves the board."""
    ep = f"grpc://127.0.0.1:{stack.triton_grpc}"
    names = [register_model(db, ep, "uep_oracle", f"lb-oracle-{x}") for x in "xy"]
    ids = [submit(gateway, benchmark="gsm8k", model=n, sample_limit=6) for n in names]
    done = [wait_done(gateway, i) for i in ids]
    assert [d["status"] for d in done] == ["completed", "completed"]
    assert [d["summary"]["correct"] for d in done] == [4, 4]  # the oracle answers 4 of the first 6 GSM8K items
    deadline, entries = time.monotonic() + 60, []
    while time.monotonic() < deadline:  # the reporter records a completion right after committing it
        r = gateway.get("/v1/leaderboards/gsm8k", params={"score_type": "gsm8k_numeric_exact_match"})
        assert r.status_code in (200, 404), r.text  # 404: no gsm8k board recorded yet
        entries = []
        for item_set in [x["key"] for x in r.json().get("item_sets", []) if x["samples"] == 6]:  # ranked with 6-sample runs
            page = gateway.get("/v1/leaderboards/gsm8k", params={"score_type": "gsm8k_numeric_exact_match", "item_set": item_set})
            entries += [e for e in page.json()["entries"] if e["model"] in names]
        if len(entries) == 2:
            break
        time.sleep(0.3)
    assert len(entries) == 2, entries
    lo, hi = wilson_interval(4, 6)
    for e, d in zip(sorted(entries, key=lambda e: names.index(e["model"])), done, strict=True):
        assert e["evaluation_id"] == d["id"] and e["score"] == pytest.approx(4 / 6) and e["n"] == 6
        assert (e["ci_low"], e["ci_high"]) == pytest.approx((lo, hi)) == (d["summary"]["ci_low"], d["summary"]["ci_high"])
    assert entries[0]["tie_group"] == entries[1]["tie_group"] and entries[0]["rank"] == entries[1]["rank"]  # same interval: tied
    hist = gateway.get("/v1/leaderboards/gsm8k/history", params={"score_type": "gsm8k_numeric_exact_match"}).json()["snapshots"]
    assert {str(i) for i in ids} <= {s["evaluation_id"] for s in hist}
