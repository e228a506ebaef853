"""Budgets on the real stack: caps stop dispatch at the right item and end the evaluation budget_exhausted with
reserved = settled; roles gate cap changes (a builder may only lower, an admin may raise); an over-budget
create is refused with 402 and stores nothing; the spend ledger groups by tenant, day, evaluation and role;
a redelivered score never settles twice.

Costs are made computable with a model row that calls the oracle Triton model at a fixed price per call
(cost unit ``call``, 1.00 USD), so an evaluation of n items costs exactly n USD (estimate = actual).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid

import pytest
from sqlalchemy import text

from uep_common.admin import create_api_key, create_tenant
from uep_common.records.lifecycle import TERMINAL

from .helpers import all_results, register_model


def wait_terminal(gateway, evaluation_id: str, headers: dict, timeout_s: float = 90) -> dict:
    deadline = time.monotonic() + timeout_s
    body: dict = {}
    while time.monotonic() < deadline:
        body = gateway.get(f"/v1/evaluations/{evaluation_id}", headers=headers).json()
        if body["status"] in TERMINAL:
            return body
        time.sleep(0.2)
    raise AssertionError(f"evaluation {evaluation_id} not finished after {timeout_s} s: {body}")


def bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def keys(stack):
    """Tenants budget-a..d and, for each, an admin, a builder and a viewer key."""
    out = {}
    for t in ("budget-a", "budget-b", "budget-c", "budget-d"):
        create_tenant(stack.database_url, t)
        out[t] = {r: create_api_key(stack.database_url, t, r, f"test {r}") for r in ("admin", "builder", "viewer")}
    return out


SITE = {"X-UEP-Site-Admin": "true"}


@pytest.fixture(scope="module")
def priced_model(gateway, db, stack, keys):
    """A model row on the oracle Triton model at 1.00 USD per call (set through the API by the site admin:
    prices are site administration, refused to a tenant's builder and admin alike)."""
    name = register_model(db, f"grpc://127.0.0.1:{stack.triton_grpc}", "uep_oracle", "budget-oracle", max_in_flight=4)
    price = {"cost_unit": "call", "price_per_call": 1.0}
    for role in ("builder", "admin"):
        r = gateway.put(f"/v1/costs/models/{name}", json=price, headers=bearer(keys["budget-a"][role]))
        assert r.status_code == 403 and r.json()["detail"][0]["loc"] == ["header", "X-UEP-Site-Admin"], r.text
    assert gateway.put(f"/v1/costs/models/{name}", json=price).status_code == 403  # the site admin, not acting as one
    with db.connect() as c:
        assert c.execute(text("SELECT cost_unit FROM models WHERE name = :n"), {"n": name}).scalar() != "call"
    r = gateway.put(f"/v1/costs/models/{name}", json=price, headers=SITE)
    assert r.status_code == 200, r.text
    assert r.json()["models"][0]["cost_unit"] == "call" and r.json()["models"][0]["price_per_call"] == 1.0
    return name


def test_api_key_cli_prints_the_key_once_and_stores_its_hash(stack, db):
    env = {**os.environ, "UEP_DATABASE_URL": stack.database_url}
    bin_ = os.path.join(os.path.dirname(sys.executable), "uep-admin")
    out = subprocess.run(
        [bin_, "create-api-key", "--tenant", "default", "--role", "viewer"], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out.startswith("uep_") and len(out) == 4 + 43
    import hashlib

    with db.connect() as c:
        row = c.execute(text("SELECT key_hash, role FROM api_keys WHERE key_prefix = :p"), {"p": out[:12]}).one()
    assert row == (hashlib.sha256(out.encode()).hexdigest(), "viewer")
    bad = subprocess.run(
        [bin_, "create-api-key", "--tenant", "no-such-tenant", "--role", "viewer"], env=env, capture_output=True, text=True
    )
    assert bad.returncode == 2 and "unknown tenant 'no-such-tenant'" in bad.stderr


def test_cap_between_two_items_stops_at_the_right_item(gateway, db, priced_model, keys):
    """5 items at 1.00 each with a 2.50 cap: after 2 items 2.00 is spent, a 3rd would make 3.00 > 2.50, so
    exactly items 0 and 1 run; the evaluation ends budget_exhausted with both results and reserved = settled."""
    hdr = bearer(keys["budget-a"]["builder"])
    r = gateway.post(
        "/v1/evaluations",
        headers=hdr,
        json={"benchmark": "mmlu", "sampling": "first", "model": priced_model, "sample_limit": 5, "max_cost": 2.5},
    )
    assert r.status_code == 202, r.text
    est = r.json()["estimated_cost"]
    assert est["estimate"] == 5.0 and est["items"] == 5 and est["per_item"] == 1.0 and est["cost_unit"] == "call"
    evaluation_id = r.json()["id"]
    final = wait_terminal(gateway, evaluation_id, hdr)
    assert final["status"] == "budget_exhausted", final
    assert final["error"].startswith("budget exhausted: this evaluation's cap of 2.5 USD is reached")
    assert "2 of 5 planned items were dispatched" in final["error"]
    assert final["progress"]["completed"] == 2 and final["progress"]["total"] == 2
    assert final["summary"]["n"] == 2  # the partial summary is reported
    results = all_results(gateway, evaluation_id, headers=hdr)
    assert [x["sample_ordinal"] for x in results] == [0, 1]
    time.sleep(1.0)  # a reconcile tick: still nothing more is dispatched
    with db.connect() as c:
        leases, settles = c.execute(
            text(
                "SELECT (SELECT count(*) FROM sample_leases WHERE evaluation_id = :e), "
                "(SELECT count(*) FROM spend_ledger WHERE evaluation_id = :e AND kind = 'settle')"
            ),
            {"e": evaluation_id},
        ).one()
    assert leases == 2 and settles == 2
    b = gateway.get(f"/v1/evaluations/{evaluation_id}/budget", headers=hdr).json()
    acct = b["account"]
    assert b["cap"] == 2.5 and b["cap_source"] == "evaluation"
    assert acct["reserved_total"] == acct["settled_total"] == 2.0 and acct["reserved_open"] == 0.0
    assert acct["items_reserved"] == acct["items_settled"] == 2 and acct["planned_items"] == 5
    spend = gateway.get("/v1/spend", params={"group_by": "evaluation", "evaluation_id": evaluation_id}, headers=hdr).json()
    assert spend["rows"] == [
        {
            "evaluation": evaluation_id,
            "reserved": 2.0,
            "released": 2.0,
            "open_reserved": 0.0,
            "settled": 2.0,
            "spent": 2.0,
            "items_reserved": 2,
            "items_settled": 2,
            "calls": 2,
        }
    ]


def test_daily_cap_stops_a_running_evaluation(gateway, priced_model, keys):
    """Tenant budget-d's daily cap 4.00: a first evaluation of 3 items (3.00) completes; a second of 1 item
    fits (3.00 + 1.00 = 4.00) at creation; then a third (1 item) is refused 402 — and a fourth created with
    its own cap 0 ends budget_exhausted with nothing dispatched (summary n = 0)."""
    hdr = bearer(keys["budget-d"]["builder"])
    assert gateway.put("/v1/caps/tenant/day", json={"amount": 4}, headers=hdr).status_code == 200
    first = gateway.post(
        "/v1/evaluations", headers=hdr, json={"benchmark": "mmlu", "sampling": "first", "model": priced_model, "sample_limit": 3}
    )
    assert first.status_code == 202, first.text
    assert wait_terminal(gateway, first.json()["id"], hdr)["status"] == "completed"
    second = gateway.post(
        "/v1/evaluations", headers=hdr, json={"benchmark": "mmlu", "sampling": "first", "model": priced_model, "sample_limit": 1}
    )
    assert second.status_code == 202, second.text
    assert wait_terminal(gateway, second.json()["id"], hdr)["status"] == "completed"
    third = gateway.post(
        "/v1/evaluations", headers=hdr, json={"benchmark": "mmlu", "sampling": "first", "model": priced_model, "sample_limit": 1}
    )
    assert third.status_code == 402 and third.json()["detail"][0]["type"] == "over_daily_cap"
    assert "0 USD left, 4 USD spent or reserved" in third.json()["detail"][0]["msg"]
    fourth = gateway.post(
        "/v1/evaluations",
        headers=hdr,
        json={"benchmark": "mmlu", "sampling": "first", "model": priced_model, "sample_limit": 2, "max_cost": 0},
    )
    assert fourth.status_code == 202, fourth.text
    final = wait_terminal(gateway, fourth.json()["id"], hdr)
    assert final["status"] == "budget_exhausted" and final["summary"]["n"] == 0 and final["progress"]["total"] == 0
    assert "0 of 2 planned items" in final["error"]
    caps = gateway.get("/v1/caps", headers=hdr).json()
    assert caps["tenant"]["day"] == 4.0 and caps["tenant"]["used_today"] == 4.0 and caps["tenant"]["left_today"] == 0.0


def test_builder_cannot_raise_a_cap_admin_can(gateway, keys):
    k = keys["budget-b"]
    put = gateway.put
    r = put("/v1/caps/tenant/day", json={"amount": 10}, headers=bearer(k["builder"]))  # none → 10 lowers it
    assert r.status_code == 200 and r.json()["effective_before"] is None and r.json()["effective"] == 10.0
    r = put("/v1/caps/tenant/day", json={"amount": 20}, headers=bearer(k["builder"]))
    assert r.status_code == 403
    d = r.json()["detail"][0]
    assert d["loc"] == ["body", "amount"] and d["type"] == "cap_raise_forbidden"
    assert "from 10 USD to 20 USD" in d["msg"] and "admin" in d["msg"]
    assert (
        put("/v1/caps/tenant/day", json={"amount": None}, headers=bearer(k["builder"])).status_code == 403
    )  # removing = raising
    r = put("/v1/caps/tenant/day", json={"amount": 5}, headers=bearer(k["viewer"]))
    assert r.status_code == 403 and r.json()["detail"][0]["loc"] == ["header", "Authorization"]
    r = put("/v1/caps/tenant/day", json={"amount": 20}, headers=bearer(k["admin"]))
    assert r.status_code == 200 and r.json()["effective"] == 20.0 and r.json()["updated_by"].startswith("key:uep_")
    assert put("/v1/caps/tenant/day", json={"amount": 15}, headers=bearer(k["builder"])).status_code == 200
    assert put("/v1/caps/tenant/day", json={"amount": 16}, headers=bearer(k["builder"])).status_code == 403
    # benchmark caps fall back on the site default: site administration, not a tenant admin's
    for who in (bearer(k["builder"]), bearer(k["admin"]), {}):
        r = put("/v1/caps/site/evaluation", json={"amount": 1000}, headers=who)
        assert r.status_code == 403 and r.json()["detail"][0]["loc"] == ["header", "X-UEP-Site-Admin"], r.text
    assert gateway.get("/v1/caps", headers=bearer(k["viewer"])).json()["site"]["evaluation"] is None
    assert put("/v1/caps/benchmarks/gsm8k", json={"amount": 50}, headers=bearer(k["builder"])).status_code == 200
    assert put("/v1/caps/benchmarks/gsm8k", json={"amount": 60}, headers=bearer(k["builder"])).status_code == 403
    assert put("/v1/caps/benchmarks/gsm8k", json={"amount": 60}, headers=bearer(k["admin"])).status_code == 200
    assert put("/v1/caps/benchmarks/no-such", json={"amount": 1}, headers=bearer(k["admin"])).status_code == 404
    caps = gateway.get("/v1/caps", headers=bearer(k["viewer"])).json()
    assert caps["tenant"]["slug"] == "budget-b" and caps["tenant"]["day"] == 15.0
    assert caps["benchmarks"] == [{"benchmark": "gsm8k", "amount": 60.0, "updated_by": caps["benchmarks"][0]["updated_by"]}]
    # bad credentials, and a key used for another tenant
    r = put("/v1/caps/tenant/day", json={"amount": 1}, headers=bearer("uep_not-a-key"))
    assert r.status_code == 401 and r.json()["detail"][0]["type"] == "bad_credentials"
    r = put("/v1/caps/tenant/day", json={"amount": 1}, headers={**bearer(k["builder"]), "X-UEP-Tenant": "budget-a"})
    assert r.status_code == 403 and r.json()["detail"][0]["loc"] == ["header", "X-UEP-Tenant"]
    r = put("/v1/caps/tenant/day", json={"amount": -1}, headers=bearer(k["admin"]))
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "amount"]


def test_over_budget_create_is_402_and_stores_nothing(gateway, db, priced_model, keys):
    hdr = bearer(keys["budget-c"]["admin"])
    assert gateway.put("/v1/caps/tenant/day", json={"amount": 3}, headers=hdr).status_code == 200
    # counted for this tenant only: evaluations of earlier tests may still be writing outbox rows
    counts = text(
        "SELECT (SELECT count(*) FROM evaluations WHERE tenant_id = t.id), "
        "(SELECT count(*) FROM outbox WHERE payload->>'tenant_id' = t.id::text), "
        "(SELECT count(*) FROM budget_accounts WHERE tenant_id = t.id) FROM tenants t WHERE t.slug = 'budget-c'"
    )
    with db.connect() as c:
        before = c.execute(counts).one()
    body = {"benchmark": "mmlu", "model": priced_model, "sample_limit": 5}
    est = gateway.post("/v1/evaluations/estimate", json=body, headers=hdr)
    assert est.status_code == 200, est.text
    assert est.json()["estimate"] == 5.0 and est.json()["items"] == 5 and est.json()["refusal"]["status"] == 402
    r = gateway.post("/v1/evaluations", json=body, headers=hdr)
    assert r.status_code == 402
    d = r.json()["detail"][0]
    assert d["loc"] == ["body", "sample_limit"] and d["type"] == "over_daily_cap"
    assert "estimated cost 5 USD exceeds what is left of tenant 'budget-c''s daily cap of 3 USD" in d["msg"]
    # the arms of an A/B request are checked as a whole: 2 arms × 2 items = 4 > 3
    r = gateway.post(
        "/v1/evaluations",
        json={
            "benchmark": "mmlu",
            "model": priced_model,
            "sample_limit": 2,
            "arms": [{"name": "a"}, {"name": "b", "fewshot_k": 1}],
        },
        headers=hdr,
    )
    assert r.status_code == 402, r.text
    # the tenant's benchmark cap (per evaluation) refuses with 409: the request can never fit it
    assert (
        gateway.put("/v1/caps/benchmarks/mmlu", json={"amount": 2}, headers=bearer(keys["budget-c"]["builder"])).status_code
        == 200
    )
    r = gateway.post("/v1/evaluations", json={**body, "sample_limit": 3}, headers=hdr)
    assert r.status_code == 409 and r.json()["detail"][0]["type"] == "over_evaluation_cap"
    assert "the tenant's cap for evaluations of benchmark 'mmlu' of 2 USD" in r.json()["detail"][0]["msg"]
    with db.connect() as c:
        after = c.execute(counts).one()
    assert after == before  # nothing stored by the refused creates nor by the estimate
    ok = gateway.post("/v1/evaluations/estimate", json={**body, "sample_limit": 2}, headers=hdr).json()
    assert ok["refusal"] is None and ok["estimate"] == 2.0


def test_spend_groupings_and_judge_charges(gateway, db, stack, priced_model, keys):
    """Tenant budget-d (from test_daily_cap…): 3 + 1 items settled at 1.00 = 4.00 inference. A judge call
    charged here with a 0.5-per-call judge model adds 0.50 judge spend to the second evaluation."""
    from sqlalchemy.ext.asyncio import async_sessionmaker

    from uep_common.records import settlement
    from uep_common.runtime.session import make_async_engine

    hdr = bearer(keys["budget-d"]["viewer"])
    by_eval = gateway.get("/v1/spend", params={"group_by": "evaluation"}, headers=hdr).json()
    assert len(by_eval["rows"]) >= 2
    target = by_eval["rows"][0]["evaluation"]
    judge = register_model(db, f"grpc://127.0.0.1:{stack.triton_grpc}", "uep_oracle", "budget-judge")
    assert (
        gateway.put(
            f"/v1/costs/models/{judge}",
            json={"cost_unit": "call", "price_per_call": 0.5},
            headers=SITE,
        ).status_code
        == 200
    )
    with db.connect() as c:
        judge_id = c.execute(text("SELECT id FROM models WHERE name = :n"), {"n": judge}).scalar()

    async def charge():
        engine = make_async_engine(stack.database_url)
        async with async_sessionmaker(engine)() as s, s.begin():
            await settlement.charge(s, uuid.UUID(target), "judge", 100, 20, 12.0, judge_id)
        await engine.dispose()

    asyncio.run(charge())
    roles = gateway.get("/v1/spend", params={"group_by": "role"}, headers=hdr).json()
    by_role = {r["role"]: r for r in roles["rows"]}
    assert by_role["inference"]["settled"] == 4.0 and by_role["inference"]["items_settled"] == 4
    assert by_role["inference"]["reserved"] == by_role["inference"]["released"] == 4.0
    assert by_role["judge"]["settled"] == 0.5 and by_role["judge"]["calls"] == 1 and by_role["judge"]["reserved"] == 0.0
    assert roles["totals"]["settled"] == 4.5
    days = gateway.get("/v1/spend", params={"group_by": "day"}, headers=hdr).json()
    assert len(days["rows"]) == 1 and days["rows"][0]["settled"] == 4.5
    only_judge = gateway.get("/v1/spend", params={"group_by": "evaluation", "role": "judge"}, headers=hdr).json()
    assert [r["evaluation"] for r in only_judge["rows"]] == [target]
    # a tenant admin sees its own tenant only; the site admin acting across tenants sees every tenant
    own = gateway.get("/v1/spend", params={"group_by": "tenant"}, headers=bearer(keys["budget-d"]["admin"])).json()
    assert [(r["tenant"], r["settled"]) for r in own["rows"]] == [("budget-d", 4.5)]
    every = gateway.get("/v1/spend", params={"group_by": "tenant"}, headers=SITE).json()
    by_tenant = {r["tenant"]: r["settled"] for r in every["rows"]}
    assert by_tenant["budget-d"] == 4.5 and by_tenant["budget-a"] == 2.0
    one = gateway.get("/v1/spend", params={"group_by": "tenant", "tenant": "budget-a"}, headers=SITE).json()
    assert [(r["tenant"], r["settled"]) for r in one["rows"]] == [("budget-a", 2.0)]
    for who in (hdr, bearer(keys["budget-d"]["admin"]), {}):
        r = gateway.get("/v1/spend", params={"group_by": "tenant", "tenant": "budget-a"}, headers=who)
        assert r.status_code == 403 and r.json()["detail"][0]["loc"] == ["query", "tenant"], r.text
    # another tenant's evaluation: its spend rows are invisible, its budget account a 404
    other = gateway.get(
        "/v1/spend", params={"group_by": "evaluation", "evaluation_id": target}, headers=bearer(keys["budget-a"]["admin"])
    )
    assert other.status_code == 200 and other.json()["rows"] == []
    r = gateway.get(f"/v1/evaluations/{target}/budget", headers=bearer(keys["budget-a"]["admin"]))
    assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["path", "evaluation_id"]
    acct = gateway.get(f"/v1/evaluations/{target}/budget", headers=hdr).json()["account"]
    assert acct["judge_total"] == 0.5


def test_redelivered_score_never_settles_twice(gateway, db, stack, priced_model, keys):
    """Replaying a stored item's ScoreComputed to settle_scores changes nothing; a later attempt of the same
    item (a re-dispatch after an expired lease: a real second model call) adds its cost but releases nothing."""
    from sqlalchemy.ext.asyncio import async_sessionmaker

    from uep_common.contract.events import ScoreComputed
    from uep_common.records import settlement
    from uep_common.runtime.session import make_async_engine

    hdr = bearer(keys["budget-a"]["builder"])
    r = gateway.post(
        "/v1/evaluations", headers=hdr, json={"benchmark": "mmlu", "sampling": "first", "model": priced_model, "sample_limit": 2}
    )
    assert r.status_code == 202, r.text
    evaluation_id = r.json()["id"]
    assert wait_terminal(gateway, evaluation_id, hdr)["status"] == "completed"
    with db.connect() as c:
        row = c.execute(
            text(
                "SELECT r.sample_id, r.score_event_id, e.tenant_id, e.model_id, e.benchmark_id FROM sample_results r "
                "JOIN evaluations e ON e.id = r.evaluation_id WHERE r.evaluation_id = :e LIMIT 1"
            ),
            {"e": evaluation_id},
        ).one()
    score = ScoreComputed(
        event_id=row.score_event_id,
        evaluation_id=uuid.UUID(evaluation_id),
        tenant_id=row.tenant_id,
        sample_id=row.sample_id,
        benchmark_id=row.benchmark_id,
        model_id=row.model_id,
        metric_name="m",
        metric_version="1",
        is_correct=True,
        score=1.0,
        output="A",
    )

    async def settle(events):
        engine = make_async_engine(stack.database_url)
        async with async_sessionmaker(engine)() as s, s.begin():
            await settlement.settle_scores(s, events)
        await engine.dispose()

    def account():
        return gateway.get(f"/v1/evaluations/{evaluation_id}/budget", headers=hdr).json()["account"]

    deadline = time.monotonic() + 30  # the reporter may complete it before the scheduler settles the last score
    while account()["items_settled"] < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    before = account()
    assert before["settled_total"] == before["reserved_total"] == 2.0 and before["items_settled"] == 2
    asyncio.run(settle([score, score]))
    assert account() == before
    asyncio.run(settle([score.model_copy(update={"attempt": 2, "event_id": uuid.uuid4()})]))
    after = account()
    assert after["settled_total"] == 3.0 and after["reserved_open"] == 0.0 and after["items_settled"] == 2


def test_evaluation_caps_target_only_the_callers_evaluations(gateway, db, priced_model, keys):
    """An evaluation cap of another tenant's evaluation is a 404 naming evaluation_id (as for an unknown one),
    for its admin and the site admin not acting as one alike; no cap row is written. Its owner may set one."""
    own = bearer(keys["budget-c"]["admin"])
    r = gateway.post(
        "/v1/evaluations", headers=own, json={"benchmark": "mmlu", "sampling": "first", "model": priced_model, "sample_limit": 1}
    )
    assert r.status_code == 202, r.text
    evaluation_id = r.json()["id"]
    wait_terminal(gateway, evaluation_id, own)
    missing = gateway.put(f"/v1/caps/evaluations/{uuid.uuid4()}", json={"amount": 1}, headers=own)
    assert missing.status_code == 404
    for who in (bearer(keys["budget-a"]["admin"]), {}):
        r = gateway.put(f"/v1/caps/evaluations/{evaluation_id}", json={"amount": 100}, headers=who)
        assert r.status_code == 404, r.text
        assert r.json()["detail"][0]["loc"] == ["path", "evaluation_id"]
        assert r.json()["detail"][0]["type"] == missing.json()["detail"][0]["type"] == "unknown_evaluation"
    with db.connect() as c:
        caps = c.execute(text("SELECT count(*) FROM budget_caps WHERE evaluation_id = :e"), {"e": evaluation_id}).scalar()
    assert caps == 0
    others = gateway.get("/v1/caps", headers=bearer(keys["budget-a"]["admin"])).json()["evaluations"]
    assert all(x["evaluation_id"] != evaluation_id for x in others)  # budget-a's own (max_cost) caps only
    r = gateway.put(f"/v1/caps/evaluations/{evaluation_id}", json={"amount": 0.5}, headers=own)
    assert r.status_code == 200 and r.json()["effective"] == 0.5, r.text
    listed = gateway.get("/v1/caps", headers=own).json()["evaluations"]
    assert [(x["evaluation_id"], x["amount"]) for x in listed] == [(evaluation_id, 0.5)]


def test_tenant_work_limits_are_site_administration_for_the_named_tenant(gateway, db, keys):
    """``PUT /v1/caps/tenant/limits`` is the site admin's, acting (``X-UEP-Site-Admin``) for the tenant named by
    ``X-UEP-Tenant``; the tenant's own admin gets 403 and nothing changes. GET shows the new values at once."""
    k = keys["budget-b"]
    for who in (bearer(k["admin"]), {"X-UEP-Tenant": "budget-b"}):
        r = gateway.put("/v1/caps/tenant/limits", json={"max_queued_items": 7}, headers=who)
        assert r.status_code == 403 and r.json()["detail"][0]["loc"] == ["header", "X-UEP-Site-Admin"], r.text
    with db.connect() as c:
        assert c.execute(text("SELECT max_queued_items FROM tenants WHERE slug = 'budget-b'")).scalar() is None
    before = gateway.get("/v1/caps/tenant/limits", headers=bearer(k["viewer"])).json()  # cached principal of budget-b
    assert before["own"]["max_queued_items"] is None
    r = gateway.put("/v1/caps/tenant/limits", json={"max_queued_items": 7}, headers={**SITE, "X-UEP-Tenant": "budget-b"})
    assert r.status_code == 200, r.text
    assert r.json()["tenant"] == "budget-b" and r.json()["own"]["max_queued_items"] == 7
    assert r.json()["effective"]["max_queued_items"] == 7
    after = gateway.get("/v1/caps/tenant/limits", headers=bearer(k["viewer"])).json()
    assert after["own"]["max_queued_items"] == 7 and after["effective"]["max_queued_items"] == 7
    with db.connect() as c:
        rows = dict(c.execute(text("SELECT slug, max_queued_items FROM tenants WHERE slug IN ('budget-a', 'budget-b')")).all())
    assert rows == {"budget-a": None, "budget-b": 7}
    r = gateway.put("/v1/caps/tenant/limits", json={"max_queued_items": None}, headers={**SITE, "X-UEP-Tenant": "budget-b"})
    assert r.status_code == 200 and r.json()["own"]["max_queued_items"] is None
