"""Scheduling through the gateway API on the real stack: batch, A/B arms, cron schedules, fairness between
tenants and urgent priority on a saturated model, validation errors.

The deterministic ``uep-oracle`` answers built-in items correctly iff ``ordinal % 3 != 2`` when the prompt
contains the item's question verbatim, else "I do not know." (deploy/model-server/README.md): so GSM8K's
first 6 items score [T, T, F, T, T, F] with the benchmark's template, and all wrong with a template that
upper-cases the question.
"""

from __future__ import annotations

import os
import time
import uuid

from sqlalchemy import text

from .helpers import all_results, register_model, submit, tenant_headers, wait_done

VERDICTS_6 = [True, True, False, True, True, False]


def _bench_echo_endpoint(db) -> str:
    with db.connect() as c:
        return c.execute(text("SELECT endpoint FROM models WHERE name = 'uep-bench-echo'")).scalar_one()


def test_batch_creates_one_evaluation_per_model(gateway, db):
    other = register_model(db, _bench_echo_endpoint(db), "uep_oracle", "oracle-copy", max_in_flight=4)
    r = gateway.post("/v1/evaluations", json={"benchmark": "gsm8k", "models": ["uep-oracle", other], "sample_limit": 6})
    assert r.status_code == 202, r.text
    body = r.json()
    assert body["batch_id"] and len(body["evaluations"]) == 2
    assert [e["model"] for e in body["evaluations"]] == ["uep-oracle", other]
    for e in body["evaluations"]:
        final = wait_done(gateway, e["id"])
        assert final["status"] == "completed" and final["batch_id"] == body["batch_id"]
        assert [x["is_correct"] for x in all_results(gateway, e["id"])] == VERDICTS_6


def test_ab_arms_stay_paired_and_keep_their_arm(gateway, db):
    r = gateway.post(
        "/v1/evaluations",
        json={
            "benchmark": "gsm8k",
            "model": "uep-oracle",
            "sample_limit": 6,
            "max_parallel": 2,
            "arms": [{"name": "base"}, {"name": "shouting", "prompt_template": "{{ question | upper }}"}],
        },
    )
    assert r.status_code == 202, r.text
    body = r.json()
    exp = body["experiment_id"]
    arms = {e["arm"]: e["id"] for e in body["evaluations"]}
    assert set(arms) == {"base", "shouting"}
    finals = {a: wait_done(gateway, i) for a, i in arms.items()}
    assert all(f["status"] == "completed" and f["experiment_id"] == exp for f in finals.values())
    base, shouting = (all_results(gateway, arms[a]) for a in ("base", "shouting"))
    assert [x["is_correct"] for x in base] == VERDICTS_6
    assert [x["output"] for x in shouting] == ["I do not know."] * 6  # the arm's own template reached the model
    assert {x["arm"] for x in base} == {"base"} and {x["arm"] for x in shouting} == {"shouting"}
    with db.connect() as c:
        rows = c.execute(
            text(
                "SELECT s.ordinal, l.arm, l.leased_at FROM sample_leases l JOIN samples s ON s.id = l.sample_id "
                "WHERE l.evaluation_id IN (:a, :b) ORDER BY s.ordinal, l.arm"
            ),
            {"a": arms["base"], "b": arms["shouting"]},
        ).all()
    assert sorted((o, a) for o, a, _t in rows) == sorted((o, a) for o in range(6) for a in ("base", "shouting"))
    # the arms stay paired: after every allocation pass (one transaction, one timestamp) neither arm has been
    # dispatched more than one item ahead of the other (uep_scheduler.flows.arm_packet)
    done = {"base": 0, "shouting": 0}
    for t in sorted({t for _o, _a, t in rows}):
        for _o, a, _t in (r for r in rows if r[2] == t):
            done[a] += 1
        assert abs(done["base"] - done["shouting"]) <= 1, (t, done)


def _fast_schedule_tenant(stack) -> dict:
    """A tenant whose own minimum schedule interval is 1 s (the site default is minutes): a builder key's
    header."""
    return tenant_headers(stack, f"sched-{uuid.uuid4().hex[:8]}", "builder", min_schedule_interval_s=1)


def _schedule_runs(db, schedule_id: str) -> list[tuple[str, str | None]]:
    """(evaluation id, its status) of each run of a schedule, read from the database."""
    with db.connect() as c:
        rows = c.execute(
            text(
                "SELECT r.evaluation_id, e.status FROM schedule_runs r LEFT JOIN evaluations e ON e.id = r.evaluation_id "
                "WHERE r.schedule_id = :s"
            ),
            {"s": schedule_id},
        ).all()
    return [(str(ev), status) for ev, status in rows]


def test_schedule_runs_create_linked_evaluations_until_deleted(gateway, stack, db):
    hdr = _fast_schedule_tenant(stack)
    r = gateway.post(
        "/v1/schedules",
        json={
            "name": "every 2 s",
            "cron": "* * * * * */2",
            "model": "uep-oracle",
            "benchmark": "gsm8k",
            "options": {"sample_limit": 3},
        },
        headers=hdr,
    )
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    try:
        assert any(s["id"] == sid for s in gateway.get("/v1/schedules", headers=hdr).json())
        deadline = time.monotonic() + 60
        runs = []
        while time.monotonic() < deadline:
            runs = gateway.get(f"/v1/schedules/{sid}", headers=hdr).json()["runs"]  # newest first
            if len(runs) >= 2 and runs[-1]["status"] == "completed":
                break
            time.sleep(0.5)
        assert len(runs) >= 2, runs
        assert len({x["scheduled_for"] for x in runs}) == len(runs)  # one run per due time
        first = gateway.get(f"/v1/evaluations/{runs[-1]['evaluation_id']}", headers=hdr).json()
        assert first["schedule_id"] == sid and first["summary"]["correct"] == 2  # [T, T, F]
    finally:  # a schedule left behind would start a run every 2 s for the rest of the test session
        assert gateway.delete(f"/v1/schedules/{sid}", headers=hdr).status_code == 204
    n = len(_schedule_runs(db, sid))
    time.sleep(3)
    after = _schedule_runs(db, sid)
    assert len(after) == n
    # a deleted schedule is gone from the API, as an unknown one; its runs stay (linked evaluations)
    gone = gateway.get(f"/v1/schedules/{sid}", headers=hdr)
    assert gone.status_code == 404, gone.text
    assert gone.json()["detail"][0]["loc"] == ["path", "schedule_id"]
    assert gone.json()["detail"][0]["type"] == "unknown_schedule"
    assert all(s["id"] != sid for s in gateway.get("/v1/schedules", headers=hdr).json())
    assert gateway.get(f"/v1/evaluations/{after[-1][0]}", headers=hdr).json()["schedule_id"] == sid
    # its runs still in progress are cancelled so that they do not load the stack for later tests
    for evaluation_id, status in after:
        if status in ("pending", "running"):
            gateway.post(f"/v1/evaluations/{evaluation_id}/cancel", headers=hdr)


def test_a_deleted_schedule_is_a_404_like_an_unknown_one(gateway):
    r = gateway.post("/v1/schedules", json={"cron": "0 2 * * *", "model": "uep-oracle", "benchmark": "gsm8k"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    assert gateway.get(f"/v1/schedules/{sid}").status_code == 200
    assert gateway.delete(f"/v1/schedules/{sid}").status_code == 204
    gone, unknown = gateway.get(f"/v1/schedules/{sid}"), gateway.get(f"/v1/schedules/{uuid.uuid4()}")
    assert gone.status_code == unknown.status_code == 404, gone.text
    assert gone.json()["detail"][0]["loc"] == unknown.json()["detail"][0]["loc"] == ["path", "schedule_id"]
    assert gone.json()["detail"][0]["type"] == unknown.json()["detail"][0]["type"] == "unknown_schedule"
    assert gone.json()["detail"][0]["msg"] == f"unknown schedule {sid}"
    assert gateway.delete(f"/v1/schedules/{sid}").status_code == 204  # deleting stays idempotent


def _model_queue_seconds() -> float:
    """The stack's scheduler setting: ``UEP_MODEL_QUEUE_SECONDS`` from the environment the stack inherits, else
    the setting's default (uep_scheduler.settings)."""
    from uep_scheduler.settings import SchedulerSettings

    default = SchedulerSettings.model_fields["model_queue_seconds"].default
    return float(os.environ.get("UEP_MODEL_QUEUE_SECONDS", default))


def test_tenants_share_a_saturated_model_fairly_and_urgent_goes_first(gateway, db, stack):
    """Tenant A posts 4 evaluations, tenant B 1, on a model with capacity 2 (the bottleneck); 1 s later A posts
    an urgent one. Measured on what reaches the model (stored results), not on a window of lease ids: with a
    queue at inference (UEP_MODEL_QUEUE_SECONDS, uep_scheduler.capacity) A fills the queue before B arrives, and
    one allocation pass gives many leases at one timestamp.

    - Fairness: B's share of the results stored while both tenants are backlogged, from the moment A's head
      start (its items leased before B's first lease) is stored until the first tenant's last lease, is 50 %.
    - Priority: no allocation pass after the urgent evaluation's admission gives a lease to anyone else before
      it gets its own; in the pass that gives it its first, it takes the first slots; its first result is stored
      before that of any item leased after it; and it is done within ``model_queue_seconds`` (the work queued
      ahead of it) plus 3 s of pipeline after its admission.
    """
    queue_s = _model_queue_seconds()
    model = register_model(db, _bench_echo_endpoint(db), "uep_bench_echo", "echo-cap2", max_in_flight=2)
    keys = {name: tenant_headers(stack, f"{name}-{uuid.uuid4().hex[:6]}", "builder") for name in ("fair-a", "fair-b")}

    def post(tenant, n, **kw):
        r = gateway.post(
            "/v1/evaluations",
            json={"benchmark": "mmlu", "model": model, "sample_limit": n, **kw},
            headers=keys[tenant],
        )
        assert r.status_code == 202, r.text
        return r.json()["id"], tenant

    # warm-up: the scheduler learns the model's call time from its scores (no queue before that), so that A's
    # evaluations fill the queue at once, before B arrives
    warm = post("fair-a", 20)
    assert wait_done(gateway, warm[0], timeout_s=60, headers=keys["fair-a"])["status"] == "completed"
    a = [post("fair-a", 60) for _ in range(4)]
    b = post("fair-b", 120)
    time.sleep(1.0)
    urgent = post("fair-a", 2, priority="urgent")
    for e, tenant in [*a, b, urgent]:
        assert wait_done(gateway, e, timeout_s=180, headers=keys[tenant])["status"] == "completed"
    a_ids, b_id, urgent_id = {x for x, _t in a}, b[0], urgent[0]
    with db.connect() as c:
        params = {"ids": [*a_ids, b_id, urgent_id]}
        leases = c.execute(
            text(
                "SELECT id, evaluation_id::text AS ev, leased_at FROM sample_leases "
                "WHERE evaluation_id = ANY(CAST(:ids AS uuid[])) ORDER BY id"
            ),
            params,
        ).all()
        results = c.execute(
            text(
                "SELECT r.evaluation_id::text AS ev, r.created_at, l.leased_at FROM sample_results r JOIN sample_leases l "
                "USING (evaluation_id, sample_id, repeat, arm) WHERE r.evaluation_id = ANY(CAST(:ids AS uuid[]))"
            ),
            params,
        ).all()
        admitted = c.execute(text("SELECT started_at FROM evaluations WHERE id = :u"), {"u": urgent_id}).scalar_one()
    assert len(results) == 4 * 60 + 120 + 2

    def tenant_of(ev: str) -> str:
        return "b" if ev == b_id else "a"  # the urgent evaluation is A's, charged to A's fair share

    # fairness on stored results while both are backlogged: from when A's head start is stored to the first
    # tenant's last lease (each has items left to lease until then, so the fair queue alternates them)
    b_first_lease = min(x.leased_at for x in leases if x.ev == b_id)
    head_stored = max(r.created_at for r in results if tenant_of(r.ev) == "a" and r.leased_at < b_first_lease)
    last_lease = min(max(x.leased_at for x in leases if x.ev in a_ids), max(x.leased_at for x in leases if x.ev == b_id))
    window = [tenant_of(r.ev) for r in results if head_stored < r.created_at <= last_lease]
    # the window holds most of B's 120 items; a FIFO scheduler (B only after A's 240) would leave it nearly empty
    assert len(window) >= 80, (len(window), head_stored, last_lease)
    # ± 10 %: each pass gives the two tenants equal leases ± 1 (start-time fair queuing); what the window adds is
    # its edges, the items in flight at either end (at most a queue's worth, half each) finishing in a slightly
    # different order than leased (inference takes the evaluations' partitions in turn)
    share = window.count("b") / len(window)
    assert abs(share - 0.5) <= 0.10, (share, len(window))

    # priority: strict before every other flow from its admission on (one pass at a time, under the allocation
    # lock: a pass whose clock is after the admission reads the admitted evaluation)
    u_first_lease = min(x.leased_at for x in leases if x.ev == urgent_id)
    jumped = [x for x in leases if x.ev != urgent_id and admitted < x.leased_at < u_first_lease]
    assert not jumped, (admitted, u_first_lease, jumped[:5])
    # that pass's first slots are its items (a pass stages its leases in slot order: they have its first ids)
    first_pass = [x.ev for x in leases if x.leased_at == u_first_lease]  # in id order
    assert first_pass[:2] == [urgent_id] * 2 or set(first_pass) == {urgent_id}, first_pass
    # what reaches the model: its first result is stored before that of any item leased in a later pass (those
    # are queued at inference behind it), and it is done within the queued work ahead of it (model_queue_seconds
    # of calls, by the scheduler's call-time estimate) plus 3 s of pipeline: the scheduler's wait for a free lease
    # (a score's way back, 0.3-1 s per pass on this stack) and the results' way to the reporter
    u_first = min(r.created_at for r in results if r.ev == urgent_id)
    overtook = [r for r in results if r.ev != urgent_id and r.leased_at > u_first_lease and r.created_at < u_first]
    assert not overtook, (u_first, overtook[:5])
    u_done = max(r.created_at for r in results if r.ev == urgent_id)
    assert (u_done - admitted).total_seconds() <= queue_s + 3.0, (admitted, u_first_lease, u_done)


def test_create_errors_name_the_field(gateway):
    def err(body):
        r = gateway.post("/v1/evaluations", json=body)
        return r.status_code, r.json()["detail"][0]["loc"]

    assert err({"benchmark": "gsm8k", "models": ["uep-oracle", "nope"]}) == (422, ["body", "models", 1])
    assert err({"benchmark": "gsm8k", "model": "uep-oracle", "models": ["uep-oracle"]}) == (422, ["body", "models"])
    assert err({"benchmark": "gsm8k", "model": "uep-oracle", "arms": [{"name": "a"}, {"name": "a"}]}) == (
        422,
        ["body", "arms", 1, "name"],
    )
    assert err(
        {"benchmark": "gsm8k", "model": "uep-oracle", "arms": [{"name": "a"}, {"name": "b", "prompt_template": "{{ x"}]}
    ) == (422, ["body", "arms", 1, "prompt_template"])
    assert err({"benchmark": "gsm8k"}) == (422, ["body", "model"])
    r = gateway.post("/v1/schedules", json={"cron": "61 * * * *", "model": "uep-oracle", "benchmark": "gsm8k"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "cron"]
    # the old field name still works
    eid = submit(gateway, benchmark="gsm8k", model="uep-oracle", sample_limit=1, max_in_flight=3)
    assert gateway.get(f"/v1/evaluations/{eid}").json()["max_parallel"] == 3
