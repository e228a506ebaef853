"""Retention on a constructed history in the real PostgreSQL, run by the reporter through
``POST /v1/retention/run``: what is kept (last N, pinned, running, A/B partner) and what is deleted (items,
leases, score history, artifact refs; an artifact file only when its last reference goes), summaries kept,
``details_cleaned_at`` set; the multi-replica guards (advisory lock, SKIP LOCKED)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from uep_common.admin import create_api_key
from uep_common.runtime.artifacts import ArtifactStore
from uep_common.runtime.session import make_async_engine, make_sessionmaker
from uep_reporter import retention_policy as retention

from .helpers import register_model

T0 = datetime(2025, 6, 1, tzinfo=UTC)
N = 25  # evaluations of (benchmark, model M): i = 0 (oldest) … 24 (newest); recency = N - i


def _summary(k: int, n: int = 3) -> dict:
    return {
        "n": n,
        "scored": n,
        "correct": k,
        "errors": 0,
        "accuracy": k / n,
        "ci_low": None,
        "ci_high": None,
        "latency_ms_p50": None,
        "latency_ms_p90": None,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "metric_name": "exact_match",
    }


class History:
    """The constructed history: ids by index, the samples, the artifact files."""

    def __init__(self, stack, db):
        self.db = db
        self.slug = f"ret-{uuid.uuid4().hex[:8]}"
        ep = f"grpc://127.0.0.1:{stack.triton_grpc}"
        self.model, self.arm_model = (
            register_model(db, ep, "uep_oracle", "ret-m"),
            register_model(db, ep, "uep_oracle", "ret-arm"),
        )
        self.store = ArtifactStore(stack.run_dir / "artifacts")  # the reporter's UEP_ARTIFACT_DIR in the stack
        self.bench = uuid.uuid4()
        self.samples = [uuid.uuid4() for _ in range(3)]
        self.experiment = uuid.uuid4()
        with db.begin() as c:
            c.execute(
                text(
                    "INSERT INTO benchmarks (id, slug, name, description, version, category, status, is_builtin, evaluation_type, "
                    "capability_dimensions, config, sample_count) VALUES (:id, :s, :s, '', :v, 'custom', 'active', false, "
                    "'automatic', '[]', '{}', 3)"
                ),
                {"id": self.bench, "s": self.slug, "v": uuid.uuid4().hex},
            )
            for i, sid in enumerate(self.samples):
                c.execute(
                    text(
                        "INSERT INTO samples (id, benchmark_id, ordinal, input, reference, metadata) "
                        "VALUES (:id, :b, :o, '{}', '{}', '{}')"
                    ),
                    {"id": sid, "b": self.bench, "o": i},
                )
            self.ev = [self._evaluation(c, self.model, i) for i in range(N)]
            self.partner = self._evaluation(c, self.arm_model, 100, experiment=self.experiment, arm="b")
            # Items of the evaluations that matter: i=3 has 3 results + leases + a replaced score; others 1 result.
            for i in (0, 1, 2, 4, 10):
                self._results(c, self.ev[i], 1)
            self._results(c, self.ev[3], 3, leases=True)
            self._leases(c, self.ev[1], 1, state="leased")
            rescore = uuid.uuid4()
            c.execute(
                text(
                    "INSERT INTO rescores (id, evaluation_id, status, total_items, done_items, flipped_items, to_correct, "
                    "to_incorrect, old_metric_versions, new_metric_versions) VALUES (:id, :e, 'completed', 3, 3, 0, 0, 0, "
                    "'{}', '{}')"
                ),
                {"id": rescore, "e": self.ev[3]},
            )
            c.execute(
                text(
                    "INSERT INTO score_history (result_id, evaluation_id, replaced_by_rescore_id, metric_name, metric_version, "
                    "is_correct, score, metrics, scored_at) SELECT id, evaluation_id, :r, 'exact_match', '0', false, 0, '{}', now() "
                    "FROM sample_results WHERE evaluation_id = :e LIMIT 1"
                ),
                {"r": rescore, "e": self.ev[3]},
            )
            # Artifacts: U only referenced by i=3; S shared by i=3 and i=10.
            self.unique = self._artifact(c, b"<html>unique " + uuid.uuid4().bytes.hex().encode() + b"</html>", [self.ev[3]])
            self.shared = self._artifact(
                c, b"<html>shared " + uuid.uuid4().bytes.hex().encode() + b"</html>", [self.ev[3], self.ev[10]]
            )

    def _evaluation(self, c, model: str, i: int, experiment=None, arm="main") -> uuid.UUID:
        eid = uuid.uuid4()
        status = {1: "running", 4: "failed"}.get(i, "completed") if model == self.model else "completed"
        c.execute(
            text(
                "INSERT INTO evaluations (id, tenant_id, benchmark_id, model_id, status, priority, repeats, total_items, dispatched_items, "
                "completed_items, error_items, config, summary, trace_context, created_at, completed_at, pinned, experiment_id, arm) "
                "VALUES (:id, (SELECT id FROM tenants WHERE slug = 'default'), :b, (SELECT id FROM models WHERE name = :m), :st, 'normal', 1, "
                "3, 3, 3, 0, '{}', CAST(:s AS jsonb), '{}', :t, :done, :pin, :x, :arm)"
            ),
            {
                "id": eid,
                "b": self.bench,
                "m": model,
                "st": status,
                "s": json.dumps(_summary(i % 4)),
                "t": T0 + timedelta(minutes=i),
                "done": None if status == "running" else T0 + timedelta(minutes=i, seconds=30),
                "pin": i == 0 and model == self.model,
                "x": self.experiment if (i == 2 and model == self.model) else experiment,
                "arm": "a" if (i == 2 and model == self.model) else arm,
            },
        )
        return eid

    def _results(self, c, eid, n: int, leases: bool = False) -> None:
        for sid in self.samples[:n]:
            c.execute(
                text(
                    "INSERT INTO sample_results (evaluation_id, sample_id, repeat, arm, is_correct, score, metric_name, metrics, "
                    "score_event_id, attempt) VALUES (:e, :s, 0, 'main', true, 1, 'exact_match', '{}', :u, 1)"
                ),
                {"e": eid, "s": sid, "u": uuid.uuid4()},
            )
        if leases:
            self._leases(c, eid, n)

    def _leases(self, c, eid, n: int, state: str = "released") -> None:
        for sid in self.samples[:n]:
            c.execute(
                text(
                    "INSERT INTO sample_leases (evaluation_id, sample_id, repeat, arm, state, attempt, leased_at, lease_expires_at) "
                    "VALUES (:e, :s, 0, 'main', :st, 1, now(), now() + interval '1 hour')"
                ),
                {"e": eid, "s": sid, "st": state},
            )

    def _artifact(self, c, data: bytes, evaluations) -> tuple[uuid.UUID, str]:
        sha, rel = self.store.write_file(data, "text/html")
        aid = uuid.uuid4()
        c.execute(
            text("INSERT INTO artifacts (id, sha256, path, bytes, media_type) VALUES (:id, :h, :p, :n, 'text/html')"),
            {"id": aid, "h": sha, "p": rel, "n": len(data)},
        )
        for eid in evaluations:
            c.execute(
                text("INSERT INTO artifact_refs (artifact_id, evaluation_id, kind) VALUES (:a, :e, 'report_html')"),
                {"a": aid, "e": eid},
            )
        return aid, rel

    def count(self, table: str, eid) -> int:
        with self.db.connect() as c:
            return c.execute(text(f"SELECT count(*) FROM {table} WHERE evaluation_id = :e"), {"e": eid}).scalar()

    def artifact_alive(self, artifact) -> tuple[bool, bool]:
        aid, rel = artifact
        with self.db.connect() as c:
            row = c.execute(text("SELECT 1 FROM artifacts WHERE id = :a"), {"a": aid}).first()
        return row is not None, (self.store.root / rel).exists()

    def cleaned(self) -> set[int]:
        with self.db.connect() as c:
            rows = c.execute(
                text("SELECT id FROM evaluations WHERE benchmark_id = :b AND details_cleaned_at IS NOT NULL"), {"b": self.bench}
            )
            ids = {r[0] for r in rows}
        return {i for i, e in enumerate(self.ev) if e in ids} | ({100} if self.partner in ids else set())


SITE = {"X-UEP-Site-Admin": "true"}  # retention is site administration: a site admin acting across tenants


@pytest.fixture(scope="module")
def tenant_admin(stack) -> dict:
    """Headers of a tenant admin's key (not a site admin)."""
    return {"Authorization": f"Bearer {create_api_key(stack.database_url, 'default', 'admin', 'retention test')}"}


def run_api(gateway, **body) -> dict:
    r = gateway.post("/v1/retention/run", json=body, params={"wait_s": 30}, headers=SITE)
    assert r.status_code == 200, r.text
    run = r.json()
    assert run["status"] == "completed", run
    again = gateway.get(f"/v1/retention/runs/{run['id']}", headers=SITE).json()
    assert again["result"] == run["result"]
    return run["result"]


def test_retention_keeps_last_n_pinned_running_ab_partner_and_counts_artifact_refs(stack, db, gateway):
    h = History(stack, db)
    idx = {str(e): i for i, e in enumerate(h.ev)} | {str(h.partner): 100}

    # Dry run with the reporter's default keep_last (20): recency <= 20 is i >= 5. Of the older ones, i=0 is
    # pinned, i=1 still running, i=2 an A/B arm whose partner (the newest of its own model) is kept: kept.
    # i=3 (completed) and i=4 (failed) would go.
    plan = run_api(gateway, dry_run=True, benchmark=h.slug)
    assert plan["keep_last"] == 20 and plan["dry_run"] is True
    assert {idx[d["evaluation_id"]] for d in plan["to_clean"]} == {3, 4}
    reasons = {idx[d["evaluation_id"]]: d["reasons"] for d in plan["kept_evaluations"]}
    assert reasons[0] == ["pinned"] and reasons[1] == ["not_finished"] and reasons[2] == ["ab_partner"]
    assert reasons[5] == ["last_n"] and reasons[100] == ["last_n"] and len(reasons) == 24
    assert plan["kept"] == {"ab_partner": 1, "last_n": 21, "not_finished": 1, "pinned": 1}
    assert h.cleaned() == set() and h.count("sample_results", h.ev[3]) == 3  # a dry run deletes nothing

    # Real run while another replica holds i=4's row (FOR UPDATE): i=4 is skipped, i=3 cleaned.
    with db.connect() as other:
        tx = other.begin()
        other.execute(text("SELECT 1 FROM evaluations WHERE id = :e FOR UPDATE"), {"e": h.ev[4]})
        res = run_api(gateway, benchmark=h.slug)
        tx.rollback()
    assert [idx[d["evaluation_id"]] for d in res["cleaned"]] == [3] and res["skipped"] == [str(h.ev[4])]
    # i=3: 3 results, 3 leases, 1 replaced score, refs to U and S; U had no other ref -> row + file deleted.
    assert res["deleted"] == {
        "artifact_refs": 2,
        "artifacts": 1,
        "files": 1,
        "sample_leases": 3,
        "sample_results": 3,
        "score_history": 1,
    }
    assert h.cleaned() == {3}
    assert (h.count("sample_results", h.ev[3]), h.count("sample_leases", h.ev[3]), h.count("score_history", h.ev[3])) == (0, 0, 0)
    assert h.artifact_alive(h.unique) == (False, False)
    assert h.artifact_alive(h.shared) == (True, True)  # still referenced by i=10
    with db.connect() as c:
        ev3 = c.execute(text("SELECT status, summary, details_cleaned_at FROM evaluations WHERE id = :e"), {"e": h.ev[3]}).one()
        board = c.execute(text("SELECT score, n FROM leaderboard_scores WHERE evaluation_id = :e"), {"e": h.ev[3]}).one()
    assert ev3.status == "completed" and ev3.summary == _summary(3) and ev3.details_cleaned_at is not None  # summary kept
    assert tuple(board) == (1.0, 3)  # its leaderboard score was recorded before the items went (3/3 correct)
    for i in (0, 1, 2, 10):
        assert h.count("sample_results", h.ev[i]) == 1, i
    assert h.count("sample_leases", h.ev[1]) == 1

    # Keep only the last 13 (i >= 12): i=4 (no longer locked) and i=5..11 go; i=10 held the last reference to
    # the shared artifact S, so S's row and file go now. Pinned, running and the A/B arm still stay.
    res = run_api(gateway, benchmark=h.slug, keep_last=13)
    assert sorted(idx[d["evaluation_id"]] for d in res["cleaned"]) == [4, 5, 6, 7, 8, 9, 10, 11]
    assert res["already_cleaned"] == 1 and res["kept"]["pinned"] == 1 and res["kept"]["ab_partner"] == 1
    assert res["deleted"]["sample_results"] == 2 and res["deleted"]["artifact_refs"] == 1 and res["deleted"]["artifacts"] == 1
    assert h.artifact_alive(h.shared) == (False, False)
    assert h.cleaned() == {3, 4, 5, 6, 7, 8, 9, 10, 11}
    with db.connect() as c:
        running = c.execute(text("SELECT status, details_cleaned_at FROM evaluations WHERE id = :e"), {"e": h.ev[1]}).one()
    assert (
        tuple(running) == ("running", None) and h.count("sample_leases", h.ev[1]) == 1 and h.count("sample_results", h.ev[1]) == 1
    )
    assert h.count("sample_results", h.ev[0]) == 1 and h.count("sample_results", h.ev[2]) == 1

    # Nothing left to do: a second identical run cleans nothing.
    assert run_api(gateway, benchmark=h.slug, keep_last=13)["cleaned"] == []


async def test_retention_skips_while_another_replica_holds_the_lock(stack, db, gateway):
    engine = make_async_engine(stack.database_url, pool_size=2)
    try:
        with db.connect() as other:
            other.execute(text("SELECT pg_advisory_lock(hashtext(:k))"), {"k": retention.LOCK_KEY})
            try:
                res = await retention.run(make_sessionmaker(engine), 20, dry_run=True, benchmark="none")
            finally:
                other.execute(text("SELECT pg_advisory_unlock(hashtext(:k))"), {"k": retention.LOCK_KEY})
                other.commit()
        assert res["status"] == "skipped"
        res = await retention.run(make_sessionmaker(engine), 20, dry_run=True, benchmark="none")
        assert res["status"] == "completed" and res["considered"] == 0
    finally:
        await engine.dispose()


def test_retention_request_errors(gateway, tenant_admin):
    # site administration only: a tenant's admin, and a site admin not acting across tenants, are refused
    for headers in (tenant_admin, {}):
        for body in ({"dry_run": False}, {"dry_run": True}):
            r = gateway.post("/v1/retention/run", json=body, headers=headers)
            assert r.status_code == 403 and r.json()["detail"][0]["loc"] == ["header", "X-UEP-Site-Admin"], r.text
        r = gateway.get(f"/v1/retention/runs/{uuid.uuid4()}", headers=headers)
        assert r.status_code == 403 and r.json()["detail"][0]["loc"] == ["header", "X-UEP-Site-Admin"], r.text
    r = gateway.post("/v1/retention/run", json={"keep_last": 0}, headers=SITE)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "keep_last"]
    r = gateway.post("/v1/retention/run", json={"benchmark": "no-such-benchmark", "dry_run": True}, headers=SITE)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "benchmark"]
    r = gateway.get(f"/v1/retention/runs/{uuid.uuid4()}", headers=SITE)
    assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["path", "run_id"]
