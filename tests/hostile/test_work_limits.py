"""Work limits per tenant on the real stack: items per evaluation, items queued, evaluations created per
minute, the minimum interval of a schedule; refused with a 4xx naming the field and the numbers, nothing
written. Site defaults are the ``UEP_*`` settings; a tenant's own values are its ``tenants`` columns."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from integration.helpers import row_counts, tenant_headers, wait_done

TABLES = ("evaluations", "schedules", "budget_accounts")


def _tenant(db, **limits) -> str:
    """A fresh tenant with its own work limits (``tenants`` columns); returns its slug."""
    slug = f"lim-{uuid.uuid4().hex[:10]}"
    cols = ", ".join(["id", "slug", "name", *limits])
    vals = ", ".join(["gen_random_uuid()", ":slug", ":slug", *(f":{k}" for k in limits)])
    with db.begin() as c:
        c.execute(text(f"INSERT INTO tenants ({cols}) VALUES ({vals})"), {"slug": slug, **limits})
    return slug


def _detail(r, status: int) -> dict:
    assert r.status_code == status, r.text
    (d,) = r.json()["detail"]
    return d


def test_repeats_past_the_items_per_evaluation_limit_is_a_422_naming_repeats(gateway, db):
    before = row_counts(db, TABLES)
    d = _detail(gateway.post("/v1/evaluations", json={"benchmark": "mmlu", "model": "uep-oracle", "repeats": 100}), 422)
    assert d["loc"] == ["body", "repeats"] and d["type"] == "too_many_items"
    assert "1,404,200 items" in d["msg"] and "100,000" in d["msg"], d  # the numbers: asked and allowed (site default)
    assert row_counts(db, TABLES) == before


def test_tenant_items_per_evaluation_override(gateway, db, stack):
    tenant = _tenant(db, max_items_per_evaluation=50)
    h = tenant_headers(stack, tenant, "builder")
    before = row_counts(db, TABLES)
    d = _detail(
        gateway.post("/v1/evaluations", headers=h, json={"benchmark": "gsm8k", "model": "uep-oracle", "sample_limit": 60}), 422
    )
    assert d["loc"] == ["body", "sample_limit"] and d["type"] == "too_many_items" and "at most 50 items" in d["msg"], d
    d = _detail(
        gateway.post(
            "/v1/evaluations", headers=h, json={"benchmark": "gsm8k", "model": "uep-oracle", "sample_limit": 20, "repeats": 3}
        ),
        422,
    )
    assert d["loc"] == ["body", "repeats"] and "60 items" in d["msg"], d
    assert row_counts(db, TABLES) == before
    r = gateway.post(
        "/v1/evaluations", headers=h, json={"benchmark": "gsm8k", "model": "uep-oracle", "sample_limit": 10, "repeats": 5}
    )
    assert r.status_code == 202 and r.json()["total_items"] == 50, r.text
    wait_done(gateway, r.json()["id"], headers=h)


def test_items_queued_across_the_tenants_evaluations(gateway, db, stack):
    tenant = _tenant(db, max_queued_items=10)
    h = tenant_headers(stack, tenant, "builder")
    # 8 items queued: an interrupted evaluation (unfinished; nothing dispatches it until a retry)
    with db.begin() as c:
        c.execute(
            text(
                "INSERT INTO evaluations (id, tenant_id, benchmark_id, model_id, status, priority, sample_limit, repeats, total_items, "
                "dispatched_items, completed_items, error_items, config, trace_context, arm) "
                "SELECT gen_random_uuid(), t.id, b.id, m.id, 'interrupted', 'normal', 9, 1, 9, 1, 1, 0, '{}'::jsonb, '{}'::jsonb, 'main' "
                "FROM tenants t, benchmarks b, models m WHERE t.slug = :t AND b.slug = 'gsm8k' AND m.name = 'uep-oracle' LIMIT 1"
            ),
            {"t": tenant},
        )
    before = row_counts(db, TABLES)
    d = _detail(
        gateway.post("/v1/evaluations", headers=h, json={"benchmark": "gsm8k", "model": "uep-oracle", "sample_limit": 3}), 409
    )
    assert d["loc"] == ["body", "sample_limit"] and d["type"] == "too_many_queued_items", d
    assert "8 items queued" in d["msg"] and "limit of 10" in d["msg"], d
    # two arms of 2 items each: 4 more than 8 is over 10 too
    d = _detail(
        gateway.post(
            "/v1/evaluations",
            headers=h,
            json={"benchmark": "gsm8k", "model": "uep-oracle", "sample_limit": 2, "arms": [{"name": "a"}, {"name": "b"}]},
        ),
        409,
    )
    assert d["type"] == "too_many_queued_items"
    assert row_counts(db, TABLES) == before
    r = gateway.post("/v1/evaluations", headers=h, json={"benchmark": "gsm8k", "model": "uep-oracle", "sample_limit": 2})
    assert r.status_code == 202, r.text
    wait_done(gateway, r.json()["id"], headers=h)


def test_evaluations_per_minute_is_a_429_with_retry_after(gateway, db, stack):
    tenant = _tenant(db, max_evaluations_per_minute=3)
    h = tenant_headers(stack, tenant, "builder")
    body = {"benchmark": "gsm8k", "model": "uep-oracle", "sample_limit": 1}
    ids = []
    for _ in range(3):
        r = gateway.post("/v1/evaluations", headers=h, json=body)
        assert r.status_code == 202, r.text
        ids.append(r.json()["id"])
    before = row_counts(db, TABLES)
    r = gateway.post("/v1/evaluations", headers=h, json=body)
    d = _detail(r, 429)
    assert d["loc"] == ["header", "X-UEP-Tenant"] and d["type"] == "rate_limited" and "at most 3" in d["msg"], d
    assert 1 <= int(r.headers["Retry-After"]) <= 60
    # a batch of 4 can never fit in a minute of 3
    d = _detail(gateway.post("/v1/evaluations", headers=h, json={**body, "model": None, "models": ["uep-oracle"] * 4}), 422)
    assert d["loc"] == ["body", "models"] and d["type"] == "too_many_evaluations", d
    assert row_counts(db, TABLES) == before
    # another tenant is not limited by this one's rate
    assert gateway.post("/v1/evaluations", json=body).status_code == 202
    for ev in ids:
        wait_done(gateway, ev, headers=h)


@pytest.mark.parametrize("cron", ["* * * * * *", "* * * * *", "*/4 * * * *", "0,1 * * * *", "0 2 * * * */30"])
def test_schedule_closer_than_the_minimum_interval_is_a_422_naming_cron(gateway, db, cron):
    before = row_counts(db, TABLES)
    d = _detail(gateway.post("/v1/schedules", json={"cron": cron, "model": "uep-oracle", "benchmark": "gsm8k"}), 422)
    assert d["loc"] == ["body", "cron"] and d["type"] == "schedule_too_frequent" and "300 s" in d["msg"], d
    assert row_counts(db, TABLES) == before


def test_schedule_at_the_minimum_interval_is_accepted(gateway):
    r = gateway.post(
        "/v1/schedules", json={"cron": "*/5 * * * *", "model": "uep-oracle", "benchmark": "gsm8k", "options": {"sample_limit": 1}}
    )
    assert r.status_code == 201, r.text
    assert gateway.delete(f"/v1/schedules/{r.json()['id']}").status_code == 204


@pytest.mark.parametrize(
    ("options", "loc", "type_"),
    [
        ({"repeats": 1_622_542}, ["body", "options", "repeats"], "too_many_repeats"),
        ({"sample_limit": 5 * 10**10}, ["body", "options", "sample_limit"], "less_than_equal"),
        ({"repeats": 50}, ["body", "options", "repeats"], "too_many_items"),  # MMLU: 702,100 items per run
        ({"max_parallel": 0}, ["body", "options", "max_parallel"], "greater_than_equal"),
        ({"sample_timeout_s": 7200}, ["body", "options", "sample_timeout_s"], "less_than_equal"),
    ],
)
def test_schedule_options_are_checked_as_a_create(gateway, db, options, loc, type_):
    before = row_counts(db, TABLES)
    r = gateway.post("/v1/schedules", json={"cron": "0 2 * * *", "model": "uep-oracle", "benchmark": "mmlu", "options": options})
    d = r.json()["detail"][0]
    assert r.status_code == 422 and d["loc"] == loc and d["type"] == type_, r.text
    # the same option on the create path: the same answer (one model, one set of rules)
    body = {"benchmark": "mmlu", "model": "uep-oracle", **options}
    d2 = gateway.post("/v1/evaluations", json=body).json()["detail"][0]
    assert d2["loc"] == ["body", *loc[2:]] and d2["type"] == type_, d2
    assert row_counts(db, TABLES) == before


def _insert_schedule(db, tenant: str, cron: str, options: dict) -> uuid.UUID:
    import json

    sid = uuid.uuid4()
    with db.begin() as c:  # straight into the table: a schedule stored before the interval rule
        c.execute(
            text(
                "INSERT INTO schedules (id, tenant_id, name, cron, model, benchmark, options, active, next_run_at) "
                "SELECT :id, id, 'hostile', :cron, 'uep-oracle', 'gsm8k', CAST(:o AS jsonb), true, :at FROM tenants WHERE slug = :t"
            ),
            {"id": sid, "cron": cron, "o": json.dumps(options), "at": datetime.now(UTC) - timedelta(seconds=1), "t": tenant},
        )
    return sid


def _runs(db, sid) -> list:
    with db.connect() as c:
        return c.execute(
            text("SELECT scheduled_for, evaluation_id, error FROM schedule_runs WHERE schedule_id = :s ORDER BY scheduled_for"),
            {"s": sid},
        ).all()


def _stop_schedule(gateway, db, sid) -> None:
    with db.begin() as c:
        c.execute(text("UPDATE schedules SET active = false, deleted_at = now() WHERE id = :s"), {"s": sid})
    for _at, ev, _err in _runs(db, sid):
        if ev:
            gateway.post(f"/v1/evaluations/{ev}/cancel", headers={"X-UEP-Site-Admin": "true"})  # another tenant's


def test_scheduler_never_creates_runs_closer_than_the_interval(gateway, db):
    tenant = _tenant(db)  # the site default: 300 s
    sid = _insert_schedule(db, tenant, "* * * * * *", {"sample_limit": 1})  # every second
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not _runs(db, sid):
            time.sleep(0.5)
        time.sleep(6)  # six more due times of the cron pass
        runs = _runs(db, sid)
        assert len(runs) == 1 and runs[0][1] is not None and runs[0][2] is None, runs
        with db.connect() as c:
            nxt = c.execute(text("SELECT next_run_at FROM schedules WHERE id = :s"), {"s": sid}).scalar()
        assert nxt >= runs[0][0] + timedelta(seconds=300), (nxt, runs[0][0])
    finally:
        _stop_schedule(gateway, db, sid)


def test_scheduled_run_is_checked_against_the_work_limits(gateway, db):
    tenant = _tenant(db, max_items_per_evaluation=2)
    sid = _insert_schedule(db, tenant, "0 2 * * *", {"sample_limit": 5})
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not _runs(db, sid):
            time.sleep(0.5)
        runs = _runs(db, sid)
        assert len(runs) == 1 and runs[0][1] is None, runs
        assert "too_many_items" in runs[0][2] and "5 items" in runs[0][2] and "at most 2" in runs[0][2], runs[0][2]
        with db.connect() as c:
            n = c.execute(
                text("SELECT count(*) FROM evaluations e JOIN tenants t ON t.id = e.tenant_id WHERE t.slug = :t"), {"t": tenant}
            ).scalar()
        assert n == 0
    finally:
        _stop_schedule(gateway, db, sid)
