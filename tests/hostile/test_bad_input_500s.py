"""Inputs that used to answer 500 answer a 4xx naming the field and the reason, and write nothing.

NUL characters anywhere in a JSON body, path or query string; integers past their database columns; a
template the sandbox refuses; concurrent creates with one ``Idempotency-Key``; a comparison before the
first scored result.
"""

from __future__ import annotations

import base64
import json
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from sqlalchemy import text

from integration.helpers import row_counts, submit, wait_done

TABLES = ("evaluations", "schedules", "annotators", "annotation_tasks", "budget_caps")


def _cursor(*values) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(values)).encode()).decode()


def _detail(r: httpx.Response, status: int) -> list[dict]:
    assert r.status_code == status, r.text
    return r.json()["detail"]


CREATE = {"benchmark": "gsm8k", "model": "uep-oracle", "sample_limit": 1}
ARMS = [{"name": "base"}, {"name": "terse", "prompt_template": "Q: {{ question }}"}]
SOME_ID = "00000000-0000-4000-8000-000000000000"


@pytest.mark.parametrize(
    ("method", "url", "body", "loc"),
    [
        ("POST", "/v1/evaluations", {**CREATE, "benchmark": "gsm8k\x00"}, ["body", "benchmark"]),
        ("POST", "/v1/evaluations", {**CREATE, "model": "uep-\x00oracle"}, ["body", "model"]),
        (
            "POST",
            "/v1/evaluations",
            {**CREATE, "arms": [ARMS[0], {"name": "terse", "prompt_template": "{{ question }}\x00"}]},
            ["body", "arms", 1, "prompt_template"],
        ),
        (
            "POST",
            "/v1/evaluations",
            {"benchmark": "gsm8k-judged", "model": "uep-oracle", "judge": {"dimensions": ["ok", "b\x00d"]}},
            ["body", "judge", "dimensions", 1],
        ),
        ("POST", "/v1/evaluations", {**CREATE, "judge": {"k\x00ey": 1}}, ["body", "judge", "k\x00ey"]),
        ("POST", "/v1/evaluations/estimate", {**CREATE, "model": "\x00"}, ["body", "model"]),
        (
            "POST",
            "/v1/schedules",
            {"name": "nightly\x00", "cron": "0 2 * * *", "model": "uep-oracle", "benchmark": "gsm8k"},
            ["body", "name"],
        ),
        ("POST", "/v1/annotators", {"name": "ann\x00"}, ["body", "name"]),
        ("GET", f"/v1/annotation-tasks/{SOME_ID}/next?annotator=a%00b", None, ["query", "annotator"]),
        ("GET", f"/v1/evaluations/{SOME_ID}/results?cursor=abc%00", None, ["query", "cursor"]),
        ("GET", "/v1/leaderboards/gsm%00k", None, ["path", "benchmark"]),
        ("PUT", "/v1/caps/benchmarks/gsm%00k", {"amount": 1}, ["path", "slug"]),
        ("GET", "/v1/judges/diagnostics?benchmark=gsm8k%00", None, ["query", "benchmark"]),
    ],
)
def test_nul_character_is_a_422_naming_the_field(gateway, db, method, url, body, loc):
    before = row_counts(db, TABLES)
    r = gateway.request(method, url, json=body)
    detail = _detail(r, 422)
    assert detail[0]["loc"] == loc and detail[0]["type"] == "nul_character" and "NUL" in detail[0]["msg"], detail
    assert row_counts(db, TABLES) == before


def test_a_body_without_nul_still_validates_as_before(gateway, db):
    # an escaped backslash followed by "u0000" is six ordinary characters, not a NUL
    before = row_counts(db, TABLES)
    r = gateway.post("/v1/evaluations", json={**CREATE, "benchmark": "\\u0000"})
    assert _detail(r, 422)[0]["type"] == "unknown_benchmark"
    r = gateway.post("/v1/evaluations", content=b'{"benchmark": "gsm8k\x00"}', headers={"content-type": "application/json"})
    assert _detail(r, 422)[0]["type"] == "json_invalid"  # a raw control character is not JSON
    assert row_counts(db, TABLES) == before


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({**CREATE, "sample_limit": 10**30}, ["body", "sample_limit"]),
        ({**CREATE, "sample_limit": 2**31}, ["body", "sample_limit"]),
        ({**CREATE, "repeats": 2**63}, ["body", "repeats"]),
        ({**CREATE, "max_cost": 1e30}, ["body", "max_cost"]),
    ],
)
def test_integer_past_its_column_is_a_422(gateway, db, body, loc):
    before = row_counts(db, TABLES)
    detail = _detail(gateway.post("/v1/evaluations", json=body), 422)
    assert detail[0]["loc"] == loc and detail[0]["type"] == "less_than_equal", detail
    assert row_counts(db, TABLES) == before


def test_results_cursor_past_the_columns_is_a_422(gateway, db):
    ev = submit(gateway, **CREATE)
    wait_done(gateway, ev)
    for cursor in (_cursor(10**30, 0, "main"), _cursor(0, -(10**20), "main"), _cursor(0, 0, "m\x00"), _cursor(True, 0, "main")):
        detail = _detail(gateway.get(f"/v1/evaluations/{ev}/results", params={"cursor": cursor}), 422)
        assert detail[0]["loc"] == ["query", "cursor"] and detail[0]["type"] == "bad_cursor", detail
    # a real cursor still pages
    assert gateway.get(f"/v1/evaluations/{ev}/results", params={"cursor": _cursor(0, 0, "main")}).status_code == 200


@pytest.mark.parametrize(
    "template",
    ["{% for i in range(10**9) %}x{% endfor %", "{{ question }", "{% if %}", "{% for x in %}{% endfor %}"],
)
def test_arm_template_that_does_not_compile_is_a_422_naming_the_arm(gateway, db, template):
    before = row_counts(db, TABLES)
    body = {**CREATE, "arms": [ARMS[0], {"name": "bad", "prompt_template": template}]}
    for url in ("/v1/evaluations", "/v1/evaluations/estimate"):
        detail = _detail(gateway.post(url, json=body), 422)
        assert detail[0]["loc"] == ["body", "arms", 1, "prompt_template"] and detail[0]["type"] == "bad_template", detail
    assert row_counts(db, TABLES) == before


@pytest.mark.parametrize(
    ("arm", "msg"),
    [
        ({"prompt_template": "Q: {{ no_such_field }}"}, "'no_such_field' is undefined"),
        ({"prompt_template": "{{ question.nope.deeper }}"}, "has no attribute 'nope'"),
        (
            {"prompt_template": "{% for ex in fewshot %}{{ ex.input.nope.x }}{% endfor %}{{ question }}", "fewshot_k": 1},
            "has no attribute 'nope'",
        ),
        ({"prompt_template": "{{ cycler.__init__.__globals__ }}"}, "unsafe"),
        ({"prompt_template": "{{ 'a' * 100000000 }}"}, "more than 262144"),
    ],
)
def test_arm_template_that_fails_to_render_is_a_422_at_creation(gateway, db, arm, msg):
    before = row_counts(db, TABLES)
    body = {**CREATE, "arms": [ARMS[0], {"name": "bad", **arm}]}
    for url in ("/v1/evaluations", "/v1/evaluations/estimate"):
        detail = _detail(gateway.post(url, json=body), 422)
        assert detail[0]["loc"] == ["body", "arms", 1, "prompt_template"] and detail[0]["type"] == "bad_template", detail
        assert msg in detail[0]["msg"], detail
    assert row_counts(db, TABLES) == before


def test_arm_template_that_renders_is_accepted_with_its_fewshot(gateway):
    # the demonstrations loop renders nothing without fewshot_k, and real fields with it
    template = "{% for ex in fewshot %}{{ ex.input.question }} {{ ex.reference.solution }}\n{% endfor %}Q: {{ question }}"
    for fewshot_k in (0, 2):
        arms = [ARMS[0], {"name": "shots", "prompt_template": template, "fewshot_k": fewshot_k}]
        r = gateway.post("/v1/evaluations", json={**CREATE, "arms": arms})
        assert r.status_code == 202, r.text
        assert [e["arm"] for e in r.json()["evaluations"]] == ["base", "shots"]


def test_concurrent_creates_with_one_idempotency_key_return_the_first(stack, db, admin_key):
    key = f"race-{uuid.uuid4()}"
    with db.connect() as c:
        events_before = c.execute(text("SELECT count(*) FROM outbox WHERE event_type = 'EvaluationRequested'")).scalar()

    def post(_i: int) -> httpx.Response:
        with httpx.Client(base_url=stack.gateway_url, timeout=60, headers={"Authorization": f"Bearer {admin_key}"}) as client:
            return client.post("/v1/evaluations", json=CREATE, headers={"Idempotency-Key": key})

    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(post, range(10)))
    assert [r.status_code for r in answers if r.status_code >= 500] == []
    assert {r.status_code for r in answers} <= {200, 202}, [r.text for r in answers]
    ids = {r.json()["id"] for r in answers}
    assert len(ids) == 1
    with db.connect() as c:
        rows = c.execute(text("SELECT id FROM evaluations WHERE idempotency_key = :k"), {"k": key}).scalars().all()
        events_after = c.execute(text("SELECT count(*) FROM outbox WHERE event_type = 'EvaluationRequested'")).scalar()
    assert [str(x) for x in rows] == list(ids)
    assert events_after - events_before == 1  # one evaluation, one event: nothing half-written by the losers


def test_compare_before_the_first_scored_result_is_a_409(gateway, db):
    baseline = submit(gateway, benchmark="gsm8k-judged", model="uep-oracle", sample_limit=2)
    assert wait_done(gateway, baseline)["status"] == "completed"
    # a judged evaluation that has not stored a result yet: interrupted, so nothing dispatches it meanwhile
    with db.begin() as c:
        fresh = c.execute(
            text(
                "INSERT INTO evaluations (id, tenant_id, benchmark_id, model_id, status, priority, sample_limit, repeats, total_items, "
                "dispatched_items, completed_items, error_items, config, trace_context, arm) "
                "SELECT gen_random_uuid(), tenant_id, benchmark_id, model_id, 'interrupted', 'normal', 2, 1, 2, 0, 0, 0, config, "
                "'{}'::jsonb, 'main' FROM evaluations WHERE id = :b RETURNING id"
            ),
            {"b": baseline},
        ).scalar()
    detail = _detail(gateway.get(f"/v1/evaluations/{fresh}/compare", params={"baseline": baseline}), 409)
    assert detail[0]["loc"] == ["path", "evaluation_id"] and detail[0]["type"] == "no_results", detail
    detail = _detail(gateway.get(f"/v1/evaluations/{baseline}/compare", params={"baseline": str(fresh)}), 409)
    assert detail[0]["loc"] == ["query", "baseline"] and detail[0]["type"] == "no_results", detail
    # with results on both sides the comparison is there, as before
    other = submit(gateway, benchmark="gsm8k-judged", model="uep-oracle", sample_limit=2)
    wait_done(gateway, other)
    r = gateway.get(f"/v1/evaluations/{other}/compare", params={"baseline": baseline})
    assert r.status_code == 200 and r.json()["n_paired"] == 2, r.text
