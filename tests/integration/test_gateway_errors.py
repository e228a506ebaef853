"""Bad input gets a 4xx that names the field and the reason, and nothing is stored."""

import uuid

import pytest
from sqlalchemy import text


def _counts(db) -> tuple[int, int]:
    with db.connect() as c:
        return (
            c.execute(text("SELECT count(*) FROM evaluations")).scalar(),
            c.execute(text("SELECT count(*) FROM outbox WHERE event_type = 'EvaluationRequested'")).scalar(),
        )


@pytest.mark.parametrize(
    ("body", "status", "loc", "type_"),
    [
        ({"benchmark": "no-such-benchmark", "model": "uep-oracle"}, 422, ["body", "benchmark"], "unknown_benchmark"),
        ({"benchmark": "gsm8k", "model": "no-such-model"}, 422, ["body", "model"], "unknown_model"),
        ({"benchmark": "gsm8k", "model": "uep-oracle", "model_version": "9"}, 422, ["body", "model_version"], "unknown_model"),
        (
            {"benchmark": "gsm8k", "benchmark_version": "abc", "model": "uep-oracle"},
            422,
            ["body", "benchmark_version"],
            "unknown_benchmark_version",
        ),
        ({"benchmark": "gsm8k", "model": "uep-oracle", "sample_limit": 0}, 422, ["body", "sample_limit"], "greater_than_equal"),
        ({"benchmark": "gsm8k", "model": "uep-oracle", "sample_limit": -3}, 422, ["body", "sample_limit"], "greater_than_equal"),
        ({"benchmark": "gsm8k", "model": "uep-oracle", "repeats": "many"}, 422, ["body", "repeats"], "int_parsing"),
        ({"benchmark": "gsm8k", "model": "uep-oracle", "repeats": 101}, 422, ["body", "repeats"], "too_many_repeats"),
        ({"benchmark": "gsm8k", "model": "uep-oracle", "priority": "asap"}, 422, ["body", "priority"], "enum"),
        ({"benchmark": "gsm8k", "model": "uep-oracle", "colour": "red"}, 422, ["body", "colour"], "extra_forbidden"),
        ({"model": "uep-oracle"}, 422, ["body", "benchmark"], "missing"),
        ({"benchmark": 12, "model": "uep-oracle"}, 422, ["body", "benchmark"], "string_type"),
    ],
)
def test_bad_create_names_the_field_and_stores_nothing(gateway, db, body, status, loc, type_):
    before = _counts(db)
    r = gateway.post("/v1/evaluations", json=body)
    assert r.status_code == status, r.text
    detail = r.json()["detail"]
    assert any(d["loc"] == loc and d["type"] == type_ and d["msg"] for d in detail), detail
    assert _counts(db) == before


def test_malformed_json_and_oversized_body(gateway, db):
    before = _counts(db)
    r = gateway.post("/v1/evaluations", content=b'{"benchmark": "gsm8k",', headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"][0]["type"] == "json_invalid"
    r = gateway.post("/v1/evaluations", content=b"x" * 2_000_000, headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["detail"][0]["loc"] == ["body"]
    assert _counts(db) == before


def test_unknown_tenant_header(gateway, db):
    before = _counts(db)
    r = gateway.post("/v1/evaluations", json={"benchmark": "gsm8k", "model": "uep-oracle"}, headers={"X-UEP-Tenant": "nobody"})
    assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["header", "X-UEP-Tenant"]
    assert _counts(db) == before


def test_unknown_or_malformed_evaluation_id(gateway):
    r = gateway.get(f"/v1/evaluations/{uuid.uuid4()}")
    assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["path", "evaluation_id"]
    r = gateway.get("/v1/evaluations/not-a-uuid")
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["path", "evaluation_id"]


def test_bad_cursor_and_limit(gateway):
    evaluation_id = gateway.post("/v1/evaluations", json={"benchmark": "gsm8k", "model": "uep-oracle", "sample_limit": 1}).json()[
        "id"
    ]
    r = gateway.get(f"/v1/evaluations/{evaluation_id}/results", params={"cursor": "%%%"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "cursor"]
    r = gateway.get(f"/v1/evaluations/{evaluation_id}/results", params={"limit": 0})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "limit"]


def test_idempotency_key_returns_the_same_evaluation(gateway, db):
    body = {"benchmark": "gsm8k", "model": "uep-oracle", "sample_limit": 1}
    first = gateway.post("/v1/evaluations", json=body, headers={"Idempotency-Key": "k-123"})
    before = _counts(db)
    second = gateway.post("/v1/evaluations", json=body, headers={"Idempotency-Key": "k-123"})
    assert first.status_code == second.status_code == 202
    assert first.json()["id"] == second.json()["id"]
    assert _counts(db) == before


def test_catalogue_lists_builtins_and_models(gateway):
    benchmarks = {b["slug"]: b for b in gateway.get("/v1/benchmarks").json()}
    assert benchmarks["mmlu"]["sample_count"] == 14042
    assert benchmarks["gsm8k"]["sample_count"] == 100
    assert benchmarks["humaneval"]["sample_count"] == 164
    assert benchmarks["humaneval"]["metric"] == "humaneval_pass_at_1"
    assert all(len(benchmarks[s]["version"]) == 64 and benchmarks[s]["is_builtin"] for s in ("mmlu", "gsm8k", "humaneval"))
    models = {m["name"] for m in gateway.get("/v1/models").json()}
    assert {"smollm2-135m-instruct", "uep-oracle", "uep-bench-echo"} <= models
    assert gateway.get("/healthz").status_code == 200
    ready = gateway.get("/readyz").json()
    assert ready == {"status": "ready", "checks": {"database": True, "redis": True, "broker": True}}
