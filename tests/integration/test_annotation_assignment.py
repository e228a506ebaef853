"""Assignment invariants of human evaluation on the real stack: concurrent annotators, expiry, late
submissions, never the same item twice; 4xx answers that name the field and store nothing; hybrid-routed
items completed by humans publish the hybrid evaluation's missing ScoreComputed."""

from __future__ import annotations

import json
import threading
import uuid

import httpx
import pytest
from sqlalchemy import text

from .helpers import all_results, submit, wait_done
from .session_helpers import signed_in

PASS_FAIL = [{"name": "correct", "type": "pass_fail"}]


@pytest.fixture(scope="module")
def source(gateway):
    evaluation_id = submit(gateway, benchmark="gsm8k", model="uep-oracle", sample_limit=6)
    assert wait_done(gateway, evaluation_id)["status"] == "completed"
    return evaluation_id


def make_task(gateway, source, **extra) -> dict:
    body = {"name": "t", "evaluation_id": source, "questions": PASS_FAIL, "annotations_per_item": 2} | extra
    r = gateway.post("/v1/annotation-tasks", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def test_concurrent_annotators_never_overfill_or_repeat(gateway, stack, db, source):
    # 5 scored items + 1 gold, N = 2, six annotators working at once (each on its own connection)
    task = make_task(gateway, source, gold=[{"sample_ordinal": 0, "answers": {"correct": "pass"}}])
    names = [f"c{i}-{uuid.uuid4().hex[:6]}" for i in range(6)]
    handed: dict[str, list[int]] = {n: [] for n in names}
    errors: list[str] = []

    def work(name: str) -> None:
        with httpx.Client(base_url=stack.gateway_url, timeout=30, headers=gateway.headers) as c:
            for _ in range(20):
                got = c.get(f"/v1/annotation-tasks/{task['id']}/next", params={"annotator": name})
                if got.status_code != 200:
                    errors.append(got.text)
                    return
                body = got.json()
                if body.get("item") is None:
                    return
                handed[name].append(body["item"]["id"])
                r = c.post(
                    f"/v1/annotation-tasks/{task['id']}/annotations",
                    params={"annotator": name},
                    json={"assignment_id": body["assignment_id"], "answers": {"correct": "pass"}},
                )
                if r.status_code != 201:
                    errors.append(r.text)
                    return

    threads = [threading.Thread(target=work, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    for name, items in handed.items():
        assert len(items) == len(set(items)), f"{name} got an item twice"
    with db.connect() as c:
        per_item = dict(
            c.execute(
                text(
                    "SELECT i.sample_ordinal, count(a.id) FROM annotation_items i LEFT JOIN annotations a ON a.item_id = i.id "
                    "WHERE i.task_id = :t AND NOT i.is_gold GROUP BY i.sample_ordinal"
                ),
                {"t": task["id"]},
            ).all()
        )
        gold = c.execute(
            text(
                "SELECT count(*) FROM annotations a JOIN annotation_items i ON i.id = a.item_id "
                "WHERE i.task_id = :t AND i.is_gold"
            ),
            {"t": task["id"]},
        ).scalar()
        gold_id = c.execute(
            text("SELECT id FROM annotation_items WHERE task_id = :t AND is_gold"), {"t": task["id"]}
        ).scalar_one()
    assert per_item == {1: 2, 2: 2, 3: 2, 4: 2, 5: 2}  # exactly N each, never more
    # The gold item comes first in hand-out order, so an annotator gets it first unless another annotator's
    # transaction held it locked at that moment (SKIP LOCKED passes over it); one who then comes back after every
    # scored item is complete gets nothing more. So: once to every annotator it was handed to, and answered by each.
    given_gold = sum(1 for items in handed.values() if str(gold_id) in map(str, items))
    assert gold == given_gold and gold >= 1
    view = gateway.get(f"/v1/annotation-tasks/{task['id']}").json()
    assert view["status"] == "completed" and view["completed_items"] == 5


def test_next_waits_for_items_locked_by_another_hand_out_instead_of_answering_nothing_left(gateway, db, source):
    """Another annotator's hand-out transaction holds every item of the task (it locks up to 8 candidates):
    ``/next`` must wait for it and then hand out an item, not answer "nothing left" (SKIP LOCKED alone finds
    no row then; an earlier version answered so, seen as a CI failure with six concurrent annotators)."""
    task = make_task(gateway, source)
    result: dict = {}

    def ask() -> None:
        with httpx.Client(base_url=gateway.base_url, timeout=30, headers=gateway.headers) as c:
            result["response"] = c.get(f"/v1/annotation-tasks/{task['id']}/next", params={"annotator": "waiter"})

    with db.connect() as c:
        c.execute(text("SELECT id FROM annotation_items WHERE task_id = :t FOR NO KEY UPDATE"), {"t": task["id"]})
        asker = threading.Thread(target=ask)
        asker.start()
        asker.join(1.5)
        assert asker.is_alive()  # waiting for the locks, not answering "nothing left"
        c.rollback()  # the other hand-out ends without taking anything
    asker.join(30)
    r = result["response"]
    assert r.status_code == 200, r.text
    assert r.json()["item"] is not None


def test_expired_assignment_frees_the_slot_and_late_submission_is_refused_once_complete(gateway, db, source):
    task = make_task(gateway, source, annotations_per_item=1, item_limit=2)
    tid = task["id"]
    first = gateway.get(f"/v1/annotation-tasks/{tid}/next", params={"annotator": "exp-alice"}).json()
    again = gateway.get(f"/v1/annotation-tasks/{tid}/next", params={"annotator": "exp-alice"}).json()
    assert again["assignment_id"] == first["assignment_id"]  # a reload returns the open assignment
    other = gateway.get(f"/v1/annotation-tasks/{tid}/next", params={"annotator": "exp-bob"}).json()
    assert other["item"]["id"] != first["item"]["id"]  # N = 1 and alice holds it
    with db.begin() as c:  # alice walks away: her assignment expires
        c.execute(
            text("UPDATE annotation_assignments SET expires_at = now() - interval '1 second' WHERE id = :a"),
            {"a": first["assignment_id"]},
        )
    carol = gateway.get(f"/v1/annotation-tasks/{tid}/next", params={"annotator": "exp-carol"}).json()
    assert carol["item"]["id"] == first["item"]["id"]  # the slot is free again
    r = gateway.post(
        f"/v1/annotation-tasks/{tid}/annotations",
        params={"annotator": "exp-carol"},
        json={"assignment_id": carol["assignment_id"], "answers": {"correct": "fail"}},
    )
    assert r.status_code == 201 and r.json()["item_complete"] is True and r.json()["score_event_id"]
    late = gateway.post(
        f"/v1/annotation-tasks/{tid}/annotations",
        params={"annotator": "exp-alice"},
        json={"assignment_id": first["assignment_id"], "answers": {"correct": "pass"}},
    )
    assert late.status_code == 409 and late.json()["detail"][0]["type"] == "item_complete"
    twice = gateway.post(
        f"/v1/annotation-tasks/{tid}/annotations",
        params={"annotator": "exp-carol"},
        json={"assignment_id": carol["assignment_id"], "answers": {"correct": "fail"}},
    )
    assert twice.status_code == 409 and twice.json()["detail"][0]["type"] == "already_submitted"
    # alice never gets her old item again; bob holds the other one, so nothing is left for her
    nxt = gateway.get(f"/v1/annotation-tasks/{tid}/next", params={"annotator": "exp-alice"}).json()
    assert nxt["item"] is None and nxt["reason"] == "nothing_left_for_annotator"
    foreign = gateway.post(
        f"/v1/annotation-tasks/{tid}/annotations",
        params={"annotator": "exp-alice"},
        json={"assignment_id": other["assignment_id"], "answers": {"correct": "pass"}},
    )
    assert foreign.status_code == 404 and foreign.json()["detail"][0]["loc"] == ["body", "assignment_id"]


def _count(db, table: str) -> int:
    with db.connect() as c:
        return c.execute(text(f"SELECT count(*) FROM {table}")).scalar()


def test_bad_requests_name_the_field_and_store_nothing(gateway, db, source):
    before = (_count(db, "annotation_tasks"), _count(db, "evaluations"), _count(db, "annotation_items"))
    cases = [
        ({"questions": [{"name": "q", "type": "rating", "scale_min": 5, "scale_max": 3}]}, ["body", "questions", 0]),
        ({"questions": [{"name": "note", "type": "comment"}]}, ["body", "questions"]),
        ({"evaluation_id": str(uuid.uuid4())}, ["body", "evaluation_id"]),
        ({"questions": [{"name": "p", "type": "pairwise"}]}, ["body", "compare_evaluation_id"]),
        ({"gold": [{"sample_ordinal": 99, "answers": {"correct": "pass"}}]}, ["body", "gold", 0, "sample_ordinal"]),
        ({"gold": [{"sample_ordinal": 1, "answers": {"correct": "maybe"}}]}, ["body", "gold", 0, "answers", "correct"]),
        ({"source": "hybrid"}, ["body", "evaluation_id"]),  # an automatic evaluation routed nothing to humans
    ]
    for extra, loc in cases:
        body = {"name": "bad", "evaluation_id": source, "questions": PASS_FAIL} | extra
        r = gateway.post("/v1/annotation-tasks", json=body)
        assert r.status_code == 422, (extra, r.text)
        assert any(d["loc"][: len(loc)] == loc for d in r.json()["detail"]), (loc, r.json())
    assert (_count(db, "annotation_tasks"), _count(db, "evaluations"), _count(db, "annotation_items")) == before

    task = make_task(gateway, source, item_limit=1)
    missing = gateway.get(f"/v1/annotation-tasks/{task['id']}/next")
    assert missing.status_code == 422 and missing.json()["detail"][0]["loc"] == ["header", "X-UEP-Annotator"]
    nxt = gateway.get(f"/v1/annotation-tasks/{task['id']}/next", headers={"X-UEP-Annotator": "val-ann"}).json()
    bad = gateway.post(
        f"/v1/annotation-tasks/{task['id']}/annotations",
        headers={"X-UEP-Annotator": "val-ann"},
        json={"assignment_id": nxt["assignment_id"], "answers": {"correct": "yes", "extra": 1}},
    )
    assert bad.status_code == 422
    assert {tuple(d["loc"]) for d in bad.json()["detail"]} == {("body", "answers", "correct"), ("body", "answers", "extra")}
    with db.connect() as c:
        assert c.execute(text("SELECT count(*) FROM annotations WHERE task_id = :t"), {"t": task["id"]}).scalar() == 0
    unknown = gateway.get(f"/v1/annotation-tasks/{uuid.uuid4()}/next", params={"annotator": "x"})
    assert unknown.status_code == 404 and unknown.json()["detail"][0]["loc"] == ["path", "task_id"]


def test_hybrid_routed_items_get_their_score_from_humans(gateway, db):
    """A hybrid evaluation whose judge sent two items to humans (the hybrid_routes rows the judge service
    writes, with the item's prompt and output in details): the annotations complete the evaluation."""
    evaluation_id = uuid.uuid4()
    with db.begin() as c:
        ref = c.execute(
            text(
                "SELECT b.id, m.id, t.id FROM benchmarks b, models m, tenants t WHERE b.slug = 'gsm8k' AND m.name = 'uep-oracle' "
                "AND t.slug = 'default' ORDER BY b.created_at DESC LIMIT 1"
            )
        ).one()
        c.execute(
            text(
                "INSERT INTO evaluations (id, tenant_id, benchmark_id, model_id, status, priority, repeats, total_items, "
                "dispatched_items, completed_items, error_items, config, trace_context, started_at) VALUES "
                "(:id, :t, :b, :m, 'running', 'normal', 1, 2, 2, 0, 0, CAST(:cfg AS jsonb), '{}', now())"
            ),
            {"id": evaluation_id, "t": ref[2], "b": ref[0], "m": ref[1], "cfg": json.dumps({"evaluation_type": "hybrid"})},
        )
        samples = c.execute(
            text("SELECT id, ordinal FROM samples WHERE benchmark_id = :b AND ordinal < 2 ORDER BY ordinal"), {"b": ref[0]}
        ).all()
        for sample_id, ordinal in samples:
            c.execute(
                text(
                    "INSERT INTO hybrid_routes (evaluation_id, sample_id, repeat, arm, stage, reason, details) VALUES "
                    "(:e, :s, 0, 'main', 'human', 'swap_inconsistent', CAST(:d AS jsonb))"
                ),
                {
                    "e": evaluation_id,
                    "s": sample_id,
                    "d": json.dumps(
                        {
                            "output": f"answer {ordinal}",
                            "prompt": f"question {ordinal}",
                            "latency_ms": 12.5,
                            "prompt_tokens": 30,
                            "completion_tokens": 4,
                        }
                    ),
                },
            )
    r = gateway.post(
        "/v1/annotation-tasks",
        json={
            "name": "hybrid",
            "source": "hybrid",
            "evaluation_id": str(evaluation_id),
            "questions": PASS_FAIL,
            "annotations_per_item": 1,
        },
    )
    assert r.status_code == 201, r.text
    task = r.json()
    assert task["result_evaluation_id"] == str(evaluation_id) and task["total_items"] == 2
    for verdict in ("pass", "fail"):
        nxt = gateway.get(f"/v1/annotation-tasks/{task['id']}/next", params={"annotator": "hy-ann"}).json()
        ordinal = nxt["item"]["sample_ordinal"]
        assert (nxt["item"]["prompt"], nxt["item"]["output"]) == (f"question {ordinal}", f"answer {ordinal}")
        s = gateway.post(
            f"/v1/annotation-tasks/{task['id']}/annotations",
            params={"annotator": "hy-ann"},
            json={"assignment_id": nxt["assignment_id"], "answers": {"correct": verdict}},
        )
        assert s.status_code == 201 and s.json()["item_complete"]
    final = wait_done(gateway, str(evaluation_id), timeout_s=60)
    assert final["status"] == "completed" and final["summary"]["n"] == 2 and final["summary"]["correct"] == 1
    results = all_results(gateway, str(evaluation_id))
    assert [r["is_correct"] for r in results] == [True, False]
    assert all(r["metrics"]["decided_by"] == "human" and r["metrics"]["route_reason"] == "swap_inconsistent" for r in results)
    assert results[0]["latency_ms"] == 12.5 and results[0]["completion_tokens"] == 4  # the model call's numbers


# --------------------------------------------------------------------------- tenants and principals


def _key(stack, tenant: str, role: str) -> dict:
    from uep_common.admin import create_api_key

    return {"Authorization": f"Bearer {create_api_key(stack.database_url, tenant, role, 'annotation tests')}"}


@pytest.fixture(scope="module")
def tenant_b(stack) -> dict:
    """A second tenant: its slug and the headers of its admin and annotator keys."""
    from uep_common.admin import create_tenant

    slug = f"ann-b-{uuid.uuid4().hex[:6]}"
    create_tenant(stack.database_url, slug)
    return {"slug": slug, "admin": _key(stack, slug, "admin"), "annotator": _key(stack, slug, "annotator")}


def test_another_tenants_task_is_404_everywhere(gateway, source, tenant_b):
    task = make_task(gateway, source, item_limit=1)
    tid, b = task["id"], tenant_b["admin"]
    assert gateway.post("/v1/annotators", json={"name": "a-only-ann"}).status_code in (200, 201)
    for path in ("", "/next", "/annotators", "/agreement", "/judge-agreement", "/results"):
        r = gateway.get(f"/v1/annotation-tasks/{tid}{path}", headers=b, params={"annotator": "b-ann"})
        assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["path", "task_id"], (path, r.text)
    r = gateway.post(
        f"/v1/annotation-tasks/{tid}/annotations",
        headers=b,
        params={"annotator": "b-ann"},
        json={"assignment_id": str(uuid.uuid4()), "answers": {"correct": "pass"}},
    )
    assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["path", "task_id"], r.text
    page = gateway.get(f"/annotate/{tid}", headers=b)
    assert page.status_code == 404 and page.json()["detail"][0]["loc"] == ["path", "task_id"]
    assert tid not in {t["id"] for t in gateway.get("/v1/annotation-tasks", headers=b).json()}
    r = gateway.get("/v1/annotation-tasks", headers=b, params={"evaluation_id": source})
    assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["query", "evaluation_id"]
    r = gateway.post("/v1/annotation-tasks", headers=b, json={"name": "x", "evaluation_id": source, "questions": PASS_FAIL})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "evaluation_id"], r.text
    assert "a-only-ann" not in {a["name"] for a in gateway.get("/v1/annotators", headers=b).json()}
    # the owner still sees it
    assert [t["id"] for t in gateway.get("/v1/annotation-tasks", params={"evaluation_id": source}).json()].count(tid) == 1


def test_annotators_belong_to_a_tenant(stack, gateway, db, source, tenant_b):
    """A registered annotator of one tenant is unknown to the keys of another; an annotator key names only
    registered annotators of its own tenant; names are unique per tenant, not site-wide."""
    r = gateway.post(
        "/v1/evaluations", headers=tenant_b["admin"], json={"benchmark": "gsm8k", "model": "uep-oracle", "sample_limit": 2}
    )
    assert r.status_code == 202, r.text
    b_eval = r.json()["id"]
    assert wait_done(gateway, b_eval, headers=tenant_b["admin"])["status"] == "completed"
    r = gateway.post(
        "/v1/annotation-tasks",
        headers=tenant_b["admin"],
        json={"name": "b", "evaluation_id": b_eval, "questions": PASS_FAIL, "annotations_per_item": 1},
    )
    assert r.status_code == 201, r.text
    b_task = r.json()["id"]
    a_ann = gateway.post("/v1/annotators", json={"name": f"shared-name-{uuid.uuid4().hex[:6]}"}).json()
    ann_key = tenant_b["annotator"]
    # A's annotator, by id or by name, is no annotator of B's
    for ref in (a_ann["id"], a_ann["name"]):
        r = gateway.get(f"/v1/annotation-tasks/{b_task}/next", headers=ann_key, params={"annotator": ref})
        assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["query", "annotator"], r.text
    # B registers the same name: its own annotator, another row
    b_ann = gateway.post("/v1/annotators", headers=tenant_b["admin"], json={"name": a_ann["name"]})
    assert b_ann.status_code == 201 and b_ann.json()["id"] != a_ann["id"], b_ann.text
    nxt = gateway.get(f"/v1/annotation-tasks/{b_task}/next", headers={**ann_key, "X-UEP-Annotator": a_ann["name"]})
    assert nxt.status_code == 200 and nxt.json()["annotator"]["id"] == b_ann.json()["id"], nxt.text
    # an annotator key registers nobody (the role matrix keeps POST /v1/annotators to builders and admins)
    assert gateway.post("/v1/annotators", headers=ann_key, json={"name": "nobody"}).status_code == 403
    with db.connect() as c:
        rows = (
            c.execute(
                text("SELECT t.slug FROM annotators a JOIN tenants t ON t.id = a.tenant_id WHERE a.name = :n ORDER BY t.slug"),
                {"n": a_ann["name"]},
            )
            .scalars()
            .all()
        )
    assert sorted(rows) == sorted(["default", tenant_b["slug"]])


def test_a_signed_in_annotator_works_as_itself(gateway, db, source):
    task = make_task(gateway, source, item_limit=2, annotations_per_item=1)
    user = signed_in(db, "default", "annotator")
    with httpx.Client(base_url=gateway.base_url, timeout=30, cookies=user["cookies"]) as c:
        nxt = c.get(f"/v1/annotation-tasks/{task['id']}/next")
        assert nxt.status_code == 200, nxt.text
        assert nxt.json()["annotator"]["name"] == user["username"]
        other = c.get(f"/v1/annotation-tasks/{task['id']}/next", params={"annotator": "someone-else"})
        assert other.status_code == 403 and other.json()["detail"][0]["loc"] == ["query", "annotator"]
        body = {"assignment_id": nxt.json()["assignment_id"], "answers": {"correct": "pass"}}
        no_csrf = c.post(f"/v1/annotation-tasks/{task['id']}/annotations", json=body)
        assert no_csrf.status_code == 403 and no_csrf.json()["detail"][0]["loc"] == ["header", "X-CSRF-Token"]
        ok = c.post(f"/v1/annotation-tasks/{task['id']}/annotations", json=body, headers={"X-CSRF-Token": user["csrf"]})
        assert ok.status_code == 201 and ok.json()["progress"]["annotator_done"] == 1, ok.text
        assert c.get(f"/annotate/{task['id']}").status_code == 200
        # the annotator role reads tasks but not results
        assert c.get(f"/v1/annotation-tasks/{task['id']}/results").status_code == 403
    with db.connect() as conn:
        bound = conn.execute(text("SELECT user_id FROM annotators WHERE name = :n"), {"n": user["username"]}).scalar_one()
    assert bound == user["user_id"]
    results = gateway.get(f"/v1/annotation-tasks/{task['id']}/results").json()["items"]
    assert [a["annotator"] for i in results for a in i["answers"]] == [user["username"]]
