"""Tenant scoping of the evaluation-side routes on the real stack, and ``GET /v1/evaluations``.

Tenant ``scope-a`` owns evaluations, a rescore, a report, a schedule and a dead letter; the admin of tenant
``scope-b`` (the highest role: the refusals are not about roles) names them by id. Every such call answers
404 with the body an unknown id gets, and nothing of ``scope-a``'s changes (the rows are compared before and
after). Lists hold the caller's rows only.

``GET /v1/evaluations`` is checked on a tenant of its own whose rows are written straight into the table
(terminal statuses, so the scheduler leaves them alone), with chosen creation times — several identical, so
that the keyset's tie-break on the id is exercised.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from .helpers import tenant_headers, wait_done
from .lifecycle_helpers import wait_for

A_SLUG, B_SLUG = f"scope-a-{uuid.uuid4().hex[:6]}", f"scope-b-{uuid.uuid4().hex[:6]}"
EVALUATION_COLUMNS = "status, pinned, priority, completed_items, error_items, total_items, error, summary, config"


@pytest.fixture(scope="module")
def a(stack) -> dict:
    return tenant_headers(stack, A_SLUG, "admin")


@pytest.fixture(scope="module")
def b(stack) -> dict:
    return tenant_headers(stack, B_SLUG, "admin")


def _create(gateway, headers: dict, **body) -> str:
    r = gateway.post("/v1/evaluations", json={"benchmark": "gsm8k", "model": "uep-oracle", **body}, headers=headers)
    assert r.status_code == 202, r.text
    return r.json()["id"]


def _insert_evaluation(db, slug: str, status: str, **cols) -> str:
    """An evaluation row of tenant ``slug`` written straight into the table (gsm8k, uep-oracle unless
    ``benchmark``/``model`` say otherwise); returns its id."""
    eid = str(uuid.uuid4())
    bench, model = cols.pop("benchmark", "gsm8k"), cols.pop("model", "uep-oracle")
    extra = {"created_at": datetime.now(UTC), "batch_id": None, "experiment_id": None, "arm": "main", **cols}
    with db.begin() as c:
        c.execute(
            text(
                "INSERT INTO evaluations (id, tenant_id, benchmark_id, model_id, status, priority, sample_limit, repeats, "
                "total_items, dispatched_items, completed_items, error_items, config, trace_context, arm, created_at, "
                "batch_id, experiment_id) "
                "SELECT :id, t.id, b.id, m.id, :status, 'normal', 9, 1, 9, 1, 1, 0, '{}'::jsonb, '{}'::jsonb, :arm, "
                ":created_at, :batch_id, :experiment_id FROM tenants t, benchmarks b, models m "
                "WHERE t.slug = :t AND b.slug = :bench AND m.name = :model ORDER BY b.created_at DESC, m.created_at DESC LIMIT 1"
            ),
            {"id": eid, "status": status, "t": slug, "bench": bench, "model": model, **extra},
        )
    return eid


def _row(db, evaluation_id: str) -> tuple:
    """What a refused call must not change: the evaluation's row and the counts of its child rows."""
    with db.connect() as c:
        ev = c.execute(text(f"SELECT {EVALUATION_COLUMNS} FROM evaluations WHERE id = :e"), {"e": evaluation_id}).one()
        children = c.execute(
            text(
                "SELECT (SELECT count(*) FROM rescores WHERE evaluation_id = :e), "
                "(SELECT count(*) FROM reports WHERE evaluation_id = :e), "
                "(SELECT count(*) FROM budget_caps WHERE evaluation_id = :e), "
                "(SELECT count(*) FROM retired_results WHERE evaluation_id = :e), "
                "(SELECT count(*) FROM outbox WHERE payload->>'evaluation_id' = CAST(:e AS text))"
            ),
            {"e": evaluation_id},
        ).one()
    return tuple(ev), tuple(children)


def _same_as_missing(r, missing, loc: list) -> None:
    """``r`` (another tenant's object) answers exactly as ``missing`` (an unknown id) does, but for the id."""
    assert r.status_code == missing.status_code == 404, (r.text, missing.text)
    (got,), (want,) = r.json()["detail"], missing.json()["detail"]
    assert got["loc"] == want["loc"] == loc and got["type"] == want["type"], (got, want)
    assert got["msg"].rsplit(" ", 1)[0] == want["msg"].rsplit(" ", 1)[0], (got, want)


@pytest.fixture(scope="module")
def owned(gateway, db, a, b) -> dict:
    """scope-a's objects: two completed evaluations (the second with a rescore and a ready report), an
    interrupted one (nothing dispatches it), a schedule and a dead letter; scope-b's own completed evaluation."""
    first = _create(gateway, a, sample_limit=3)
    assert wait_done(gateway, first, headers=a)["status"] == "completed"
    done = _create(gateway, a, sample_limit=3)
    assert wait_done(gateway, done, headers=a)["status"] == "completed"
    theirs = _create(gateway, b, sample_limit=3)
    assert wait_done(gateway, theirs, headers=b)["status"] == "completed"
    r = gateway.post(f"/v1/evaluations/{done}/rescore", headers=a)
    assert r.status_code == 202, r.text
    rescore = r.json()["id"]
    wait_for(
        "rescore done",
        lambda: gateway.get(f"/v1/evaluations/{done}/rescores/{rescore}", headers=a).json()["status"] == "completed",
        60,
    )
    r = gateway.post(f"/v1/evaluations/{done}/reports", json={}, headers=a)
    assert r.status_code == 202, r.text
    report = r.json()["id"]
    wait_for(
        "report ready",
        lambda: gateway.get(f"/v1/evaluations/{done}/reports/{report}", headers=a).json()["status"] == "ready",
        90,
    )
    # the reporter writes each completed evaluation's report on its own, after the completion: wait for it, so
    # that no test sees that row appear between its "before" and "after"
    for evaluation_id in (first, done, theirs):
        wait_for("the completion report", lambda e=evaluation_id: _row(db, e)[1][1] >= 1, 90)
    interrupted = _insert_evaluation(db, A_SLUG, "interrupted")
    r = gateway.post("/v1/schedules", json={"cron": "0 2 * * *", "model": "uep-oracle", "benchmark": "gsm8k"}, headers=a)
    assert r.status_code == 201, r.text
    schedule = r.json()["id"]
    dead = uuid.uuid4()
    with db.begin() as c:
        c.execute(
            text(
                "INSERT INTO dead_letters (id, dedupe_key, source_topic, reason, event_type, evaluation_id, body, headers) "
                "VALUES (:id, :k, 'uep.scores.computed.v1', 'test', 'ScoreComputed', :e, :body, '{}'::jsonb)"
            ),
            {"id": dead, "k": uuid.uuid4().hex, "e": done, "body": b"{}"},
        )
    yield {
        "first": first,
        "done": done,
        "theirs": theirs,
        "rescore": rescore,
        "report": report,
        "interrupted": interrupted,
        "schedule": schedule,
        "dead_letter": str(dead),
    }
    gateway.delete(f"/v1/schedules/{schedule}", headers=a)


def test_another_tenants_evaluation_reads_are_404_like_a_missing_one(gateway, owned, a, b):
    missing = str(uuid.uuid4())
    for suffix in ("", "/results", "/budget", "/reports", "/report.json", "/report.html"):
        for eid in (owned["done"], owned["interrupted"]):
            r = gateway.get(f"/v1/evaluations/{eid}{suffix}", headers=b)
            _same_as_missing(r, gateway.get(f"/v1/evaluations/{missing}{suffix}", headers=b), ["path", "evaluation_id"])
    # the child objects: 404 naming the parent when it is not the caller's, even with the right child id
    done = owned["done"]
    for path in (f"rescores/{owned['rescore']}", f"reports/{owned['report']}"):
        r = gateway.get(f"/v1/evaluations/{done}/{path}", headers=b)
        assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["path", "evaluation_id"], r.text
        # and an own evaluation with another tenant's child id: the child is not one of its
        r = gateway.get(f"/v1/evaluations/{owned['theirs']}/{path}", headers=b)
        assert r.status_code == 404 and r.json()["detail"][0]["loc"][1] in ("rescore_id", "report_id"), r.text
    r = gateway.get(f"/v1/evaluations/{done}/report.json", params={"report_id": owned["report"]}, headers=b)
    assert r.status_code == 404
    # the owner reads them all, and the default tenant (the site admin not acting as one) does not
    for suffix in ("", "/results", "/budget", "/reports", f"/reports/{owned['report']}", f"/rescores/{owned['rescore']}"):
        assert gateway.get(f"/v1/evaluations/{done}{suffix}", headers=a).status_code == 200
        assert gateway.get(f"/v1/evaluations/{done}{suffix}").status_code == 404
    assert gateway.get(f"/v1/evaluations/{done}/report.json", headers=a).status_code == 200
    # the site admin acting across tenants sees it
    assert gateway.get(f"/v1/evaluations/{done}", headers={"X-UEP-Site-Admin": "true"}).status_code == 200


def test_another_tenants_evaluation_writes_are_404_and_change_nothing(gateway, db, owned, a, b):
    missing = str(uuid.uuid4())
    calls = [
        ("post", "cancel", None),
        ("post", "stop", None),
        ("post", "retry", None),
        ("post", "rescore", None),
        ("post", "pin", None),
        ("delete", "pin", None),
        ("post", "reports", {}),
    ]
    for eid in (owned["done"], owned["interrupted"]):
        before = _row(db, eid)
        for method, action, body in calls:
            kw = {"json": body} if body is not None else {}
            r = gateway.request(method.upper(), f"/v1/evaluations/{eid}/{action}", headers=b, **kw)
            m = gateway.request(method.upper(), f"/v1/evaluations/{missing}/{action}", headers=b, **kw)
            _same_as_missing(r, m, ["path", "evaluation_id"])
        r = gateway.put(f"/v1/caps/evaluations/{eid}", json={"amount": 0}, headers=b)
        assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["path", "evaluation_id"]
        time.sleep(0.5)  # anything a refused call had set going would show by now
        assert _row(db, eid) == before, eid
    # the interrupted one is still there to be stopped by its owner (the refusals did not end it)
    r = gateway.post(f"/v1/evaluations/{owned['interrupted']}/stop", headers=a)
    assert r.status_code == 200 and r.json()["status"] == "stopped", r.text


def test_baselines_must_be_the_callers_too(gateway, db, owned, a, b):
    done, theirs = owned["done"], owned["theirs"]
    r = gateway.get(f"/v1/evaluations/{theirs}/compare", params={"baseline": done}, headers=b)
    assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["query", "baseline"], r.text
    r = gateway.get(f"/v1/evaluations/{done}/compare", params={"baseline": theirs}, headers=a)
    assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["query", "baseline"], r.text
    before = _row(db, theirs)
    r = gateway.post(f"/v1/evaluations/{theirs}/reports", json={"baseline": done}, headers=b)
    assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["body", "baseline"], r.text
    assert _row(db, theirs) == before
    r = gateway.get(f"/v1/evaluations/{done}/compare", params={"baseline": owned["first"]}, headers=a)
    assert r.status_code == 200, r.text
    # no default baseline from another tenant: scope-b has one completed gsm8k/uep-oracle evaluation only
    r = gateway.get(f"/v1/evaluations/{theirs}/compare", headers=b)
    assert r.status_code == 409 and r.json()["detail"][0]["type"] == "no_baseline", r.text


def test_pins_are_per_tenant(gateway, db, owned, a, b):
    assert gateway.post(f"/v1/evaluations/{owned['done']}/pin", headers=a).status_code == 200
    r = gateway.post(f"/v1/evaluations/{owned['theirs']}/pin", headers=b)  # same model name and benchmark slug
    assert r.status_code == 200 and r.json()["unpinned"] == [], r.text
    with db.connect() as c:
        pinned = c.execute(
            text("SELECT id::text, pinned FROM evaluations WHERE id IN (:x, :y)"), {"x": owned["done"], "y": owned["theirs"]}
        ).all()
    assert dict(pinned) == {owned["done"]: True, owned["theirs"]: True}
    assert gateway.delete(f"/v1/evaluations/{owned['theirs']}/pin", headers=b).status_code == 200
    assert gateway.delete(f"/v1/evaluations/{owned['done']}/pin", headers=a).status_code == 200


def test_another_tenants_schedule_is_404_and_stays(gateway, db, owned, a, b):
    sid = owned["schedule"]
    missing = str(uuid.uuid4())
    with db.connect() as c:
        before = c.execute(text("SELECT active, deleted_at, next_run_at FROM schedules WHERE id = :s"), {"s": sid}).one()
    _same_as_missing(
        gateway.get(f"/v1/schedules/{sid}", headers=b),
        gateway.get(f"/v1/schedules/{missing}", headers=b),
        ["path", "schedule_id"],
    )
    _same_as_missing(
        gateway.delete(f"/v1/schedules/{sid}", headers=b),
        gateway.delete(f"/v1/schedules/{missing}", headers=b),
        ["path", "schedule_id"],
    )
    assert all(s["id"] != sid for s in gateway.get("/v1/schedules", headers=b).json())
    assert all(s["id"] != sid for s in gateway.get("/v1/schedules").json())
    assert [s["id"] for s in gateway.get("/v1/schedules", headers=a).json()] == [sid]
    with db.connect() as c:
        after = c.execute(text("SELECT active, deleted_at, next_run_at FROM schedules WHERE id = :s"), {"s": sid}).one()
    assert after == before and after.active and after.deleted_at is None


def test_another_tenants_dead_letter_is_404_and_not_redriven(gateway, db, owned, a, b):
    dl = owned["dead_letter"]
    missing = str(uuid.uuid4())
    _same_as_missing(
        gateway.get(f"/v1/dead-letters/{dl}", headers=b),
        gateway.get(f"/v1/dead-letters/{missing}", headers=b),
        ["path", "dead_letter_id"],
    )
    _same_as_missing(
        gateway.post(f"/v1/dead-letters/{dl}/redrive", headers=b),
        gateway.post(f"/v1/dead-letters/{missing}/redrive", headers=b),
        ["path", "dead_letter_id"],
    )
    for params in ({}, {"evaluation_id": owned["done"]}):
        assert gateway.get("/v1/dead-letters", params=params, headers=b).json()["items"] == []
    mine = gateway.get("/v1/dead-letters", headers=a).json()["items"]
    assert [d["id"] for d in mine] == [dl]
    with db.connect() as c:
        count = c.execute(text("SELECT redrive_count FROM dead_letters WHERE id = :d"), {"d": dl}).scalar()
    assert count == 0


# ----------------------------------------------------------------------------------------- listEvaluations


@pytest.fixture(scope="module")
def listing(stack, db) -> dict:
    """A tenant with 23 evaluations: created one a minute apart but for 5 sharing one instant; statuses
    cycling completed/failed/cancelled; 4 of a batch, 3 of an experiment, 6 on mmlu."""
    slug = f"list-{uuid.uuid4().hex[:6]}"
    headers = tenant_headers(stack, slug, "viewer")
    base = datetime(2030, 1, 1, tzinfo=UTC)
    batch, experiment = str(uuid.uuid4()), str(uuid.uuid4())
    statuses = ("completed", "failed", "cancelled")
    rows = []
    for i in range(23):
        at = base + timedelta(minutes=10) if 8 <= i < 13 else base + timedelta(minutes=i)
        cols: dict = {"created_at": at}
        if i < 4:
            cols["batch_id"] = batch
        if 4 <= i < 7:
            cols |= {"experiment_id": experiment, "arm": f"arm{i}"}
        if i >= 17:
            cols["benchmark"] = "mmlu"
        status = statuses[i % 3]
        rows.append({"id": _insert_evaluation(db, slug, status, **cols), "created_at": at, "status": status, **cols})
    rows.sort(key=lambda r: (r["created_at"], uuid.UUID(r["id"])), reverse=True)
    return {"headers": headers, "rows": rows, "batch": batch, "experiment": experiment, "base": base}


def _pages(gateway, headers: dict, limit: int, **params) -> tuple[list[dict], int]:
    items, cursor, pages = [], None, 0
    while True:
        r = gateway.get(
            "/v1/evaluations", params={**params, "limit": limit, **({"cursor": cursor} if cursor else {})}, headers=headers
        )
        assert r.status_code == 200, r.text
        pages += 1
        page = r.json()
        assert len(page["items"]) <= limit
        items += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            return items, pages
        assert pages < 100


def test_list_pages_through_every_evaluation_once_newest_first(gateway, listing):
    want = [r["id"] for r in listing["rows"]]
    for limit in (1, 4, 5, 23, 200):
        items, pages = _pages(gateway, listing["headers"], limit)
        assert [x["id"] for x in items] == want, limit  # no duplicate, no miss, (created_at, id) descending
        assert pages == -(-23 // limit)  # a full last page already says there is no next one
    first = gateway.get("/v1/evaluations", headers=listing["headers"]).json()
    assert len(first["items"]) == 23 and first["next_cursor"] is None  # default limit 50
    item = first["items"][0]
    assert item["benchmark"]["slug"] == "mmlu" and item["model"]["name"] == "uep-oracle"
    counts = {k: item["progress"][k] for k in ("completed", "errors", "total", "fraction", "discarded")}
    assert counts == {"completed": 1, "errors": 0, "total": 9, "fraction": 1 / 9, "discarded": 0}
    assert item["links"]["self"] == f"/v1/evaluations/{item['id']}"


def test_list_filters(gateway, listing):
    rows, h = listing["rows"], listing["headers"]

    def ids(**params) -> list[str]:
        items, _ = _pages(gateway, h, 3, **params)
        return [x["id"] for x in items]

    def want(pred) -> list[str]:
        return [r["id"] for r in rows if pred(r)]

    assert ids(status="completed") == want(lambda r: r["status"] == "completed")
    assert ids(status="completed,failed") == want(lambda r: r["status"] in ("completed", "failed"))
    assert ids(status=["cancelled", "failed"]) == want(lambda r: r["status"] in ("cancelled", "failed"))
    assert ids(status="running") == []
    assert ids(benchmark="mmlu") == want(lambda r: r.get("benchmark") == "mmlu")
    assert ids(benchmark="gsm8k", status="failed") == want(lambda r: "benchmark" not in r and r["status"] == "failed")
    assert ids(benchmark="no-such-benchmark") == []
    assert ids(model="uep-oracle") == want(lambda r: True)
    assert ids(model="no-such-model") == []
    assert ids(batch_id=listing["batch"]) == want(lambda r: r.get("batch_id") == listing["batch"])
    assert ids(experiment_id=listing["experiment"]) == want(lambda r: r.get("experiment_id") == listing["experiment"])
    base = listing["base"]
    after, before = base + timedelta(minutes=5), base + timedelta(minutes=15)
    assert ids(created_after=after.isoformat(), created_before=before.isoformat()) == want(
        lambda r: after <= r["created_at"] < before
    )
    naive = (base + timedelta(minutes=10)).replace(tzinfo=None).isoformat()  # naive = UTC: the 5 of one instant and later
    assert ids(created_after=naive) == want(lambda r: r["created_at"] >= base + timedelta(minutes=10))
    assert len(ids(created_after=naive)) == 5 + 10  # i = 8..12 at minute 10, i = 13..22 after


def test_list_is_the_callers_tenant_only(gateway, listing, owned, a, b):
    theirs = {x["id"] for x in _pages(gateway, b, 50)[0]}
    assert owned["theirs"] in theirs and not theirs & {owned["done"], owned["interrupted"], *(r["id"] for r in listing["rows"])}
    mine = {x["id"] for x in _pages(gateway, a, 50)[0]}
    assert mine == {owned["first"], owned["done"], owned["interrupted"]}
    default = {x["id"] for x in _pages(gateway, {}, 200)[0]}
    assert not default & (mine | theirs)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"status": "nope"}, "status"),
        ({"status": "completed,nope"}, "status"),
        ({"batch_id": "not-a-uuid"}, "batch_id"),
        ({"experiment_id": "1234"}, "experiment_id"),
        ({"created_after": "yesterday"}, "created_after"),
        ({"created_before": "2030-13-01T00:00:00"}, "created_before"),
        ({"created_after": "2030-01-02T00:00:00Z", "created_before": "2030-01-01T00:00:00Z"}, "created_before"),
        ({"limit": 0}, "limit"),
        ({"limit": 201}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"cursor": "%%%"}, "cursor"),
        ({"cursor": "bm90IGpzb24="}, "cursor"),  # base64 of "not json"
        ({"cursor": base64.urlsafe_b64encode(json.dumps([1, 2]).encode()).decode()}, "cursor"),
        ({"cursor": base64.urlsafe_b64encode(json.dumps(["2030-01-01T00:00:00+00:00", "x"]).encode()).decode()}, "cursor"),
        (
            {"cursor": base64.urlsafe_b64encode(json.dumps(["2030-01-01T00:00:00", str(uuid.uuid4())]).encode()).decode()},
            "cursor",
        ),
        ({"cursor": base64.urlsafe_b64encode(json.dumps({"a": 1}).encode()).decode()}, "cursor"),
        ({"cursor": "x" * 501}, "cursor"),
        ({"benchmark": "b" * 101}, "benchmark"),
    ],
)
def test_list_bad_filters_are_422_naming_the_field(gateway, params, field):
    r = gateway.get("/v1/evaluations", params=params)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["query", field], r.text
