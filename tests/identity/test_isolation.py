"""Tenant isolation and the role matrix, generated from the running gateway's ``/openapi.json`` and
:data:`uep_gateway.access.ROUTES` — every operation, every role, two tenants.

Tenants A and B each get an API key per role (admin, builder, viewer, annotator). A gets one object of each
kind that has an id in a path: an evaluation (``uep-oracle`` on gsm8k, 3 samples, run to completion), an A/B
experiment and a batch (2 samples), a rescore and a report of it, a schedule, an annotation task, a dead
letter, a private benchmark, a member and a spare API key. Then, in this order (so that no call of a later step can hide a leak of an earlier one):

1. no credentials → 401, for every operation that is not public;
2. B's lists (GET operations without path parameters, plus a few catalogue pages) answered to each role B
   may use contain none of A's ids, slugs or key prefixes;
3. every operation with an id in its path, called by each role of B the matrix allows on A's object → 404;
4. each role of A on A's objects (A's admin must get 2xx from the getters of its objects: the ids are
   real): past authorization (neither 401 nor 403) exactly when the matrix allows
   the role, else 403 (site-only operations: 403 for every tenant role). Bodies are ``{}`` (a 422 counts as
   past authorization); operations that end or change an object (DELETE, cancel, stop, retry, redrive,
   logout) run last.

An operation of ``/openapi.json`` (or a route hidden from it) without a matrix entry fails the suite, and a
path parameter this module has no value for fails it too (a new kind of object needs one here).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from uep_common.admin import create_api_key, create_tenant
from uep_gateway.access import ROUTES, SITE, Access

ROLES = ("admin", "builder", "viewer", "annotator")
METHODS = ("get", "post", "put", "patch", "delete")
# Operations that end, revoke or change the state of an object, or of the caller's credential: run last.
ENDING = {
    "cancelEvaluation",
    "stopEvaluation",
    "retryEvaluation",
    "redriveDeadLetter",
    "revokeApiKey",
    "removeMember",
    "deleteSchedule",
    "logout",
    "unpinEvaluation",
    "deactivateModel",
    "reactivateModel",
    "deleteModel",
}
# Bodies that pass validation, so that B's write reaches the lookup of A's object (else a 422 hides it).
VALID_BODIES: dict[str, Any] = {
    "putBenchmarkCap": {"amount": "5"},
    "putEvaluationCap": {"amount": "5"},
    "putBenchmarkCost": {"per_sample": "0.001"},
    "submitAnnotation": {"assignment_id": str(uuid.uuid4()), "answers": {"correct": True}},
    "updateMember": {"role": "viewer"},
    "createReport": {},
}
# Getters A's admin must answer 2xx on A's objects: proof that the ids B got 404 for are real.
CONTROLS = {
    "getEvaluation",
    "getExperiment",
    "getBatch",
    "getRescore",
    "getReport",
    "getSchedule",
    "getAnnotationTask",
    "getDeadLetter",
    "previewSamples",
    "getModel",
}
# Catalogue pages (path parameters of the site catalogue) also searched for A's ids in step 2.
EXTRA_LISTS = {
    "getLeaderboard": "/v1/leaderboards/gsm8k",
    "getLeaderboardHistory": "/v1/leaderboards/gsm8k/history",
    "previewSamples": "/v1/benchmarks/gsm8k/samples",
}


@dataclass
class Op:
    """One operation: method, path template, matrix entry, its path/query parameters and whether it has a
    JSON body (``body``) or a form (``form``)."""

    method: str
    path: str
    access: Access
    path_params: list[str]
    query: list[dict[str, Any]] = field(default_factory=list)
    body: str | None = None

    @property
    def name(self) -> str:
        return f"{self.access.op} ({self.method} {self.path})"

    def allows(self, role: str) -> bool:
        """True when a key of ``role`` (no site-admin header) may make this call."""
        return not self.access.public and self.access.roles != SITE and role in self.access.roles


@dataclass
class World:
    """Both tenants' keys and A's objects."""

    a: str
    b: str
    keys: dict[str, dict[str, str]]
    params: dict[str, str]
    secrets: dict[str, str]
    made: list[str]
    skipped: list[str]


def _wait(client: httpx.Client, path: str, done, timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    body: Any = None
    while time.monotonic() < deadline:
        r = client.get(path)
        body = r.json() if r.status_code == 200 else None
        if body is not None and done(body):
            return body
        time.sleep(0.3)
    return body


def _build_world(stack, db) -> World:
    suffix = uuid.uuid4().hex[:6]
    a, b = f"iso-a-{suffix}", f"iso-b-{suffix}"
    url = stack.database_url
    for slug in (a, b):
        create_tenant(url, slug, f"isolation {slug}")
    keys = {slug: {role: create_api_key(url, slug, role, name=f"isolation {role}") for role in ROLES} for slug in (a, b)}
    spare_key = create_api_key(url, a, "viewer", name="isolation spare")
    made: list[str] = []
    skipped: list[str] = []
    params: dict[str, str] = {"fmt": "json", "model": "uep-oracle", "run_id": str(uuid.uuid4())}
    with db.begin() as c:
        tenant_a = c.execute(text("SELECT id FROM tenants WHERE slug = :s"), {"s": a}).scalar_one()
        params["key_id"] = str(
            c.execute(text("SELECT id FROM api_keys WHERE key_prefix = :p"), {"p": spare_key[:12]}).scalar_one()
        )
        user_id = uuid.uuid4()
        c.execute(
            text("INSERT INTO users (id, username, display_name, site_admin) VALUES (:i, :u, '', false)"),
            {"i": user_id, "u": f"iso-{suffix}"},
        )
        c.execute(
            text("INSERT INTO memberships (id, user_id, tenant_id, role) VALUES (gen_random_uuid(), :u, :t, 'viewer')"),
            {"u": user_id, "t": tenant_a},
        )
        params["user_id"] = str(user_id)
        invitation_id = uuid.uuid4()
        c.execute(
            text(
                "INSERT INTO member_invitations (id, tenant_id, username, role, invited_by, expires_at) "
                "VALUES (:i, :t, :u, 'viewer', 'isolation test', now() + interval '1 day')"
            ),
            {"i": invitation_id, "t": tenant_a, "u": f"iso-invited-{suffix}"},
        )
        params["invitation_id"] = str(invitation_id)
    made += ["api key", "member", "invitation"]

    client = httpx.Client(base_url=stack.gateway_url, timeout=30, headers={"Authorization": f"Bearer {keys[a]['admin']}"})
    with client:
        r = client.post("/v1/evaluations", json={"benchmark": "gsm8k", "model": "uep-oracle", "sample_limit": 3})
        assert r.status_code == 202, r.text
        ev = r.json()["id"]
        params["evaluation_id"] = ev
        body = _wait(client, f"/v1/evaluations/{ev}", lambda x: x["status"] in ("completed", "failed", "cancelled"), 120)
        assert body and body["status"] == "completed", body
        made.append("evaluation")

        arms = [{"name": "base"}, {"name": "terse", "prompt_template": "{{ question }} Answer:"}]
        r = client.post("/v1/evaluations", json={"benchmark": "gsm8k", "model": "uep-oracle", "sample_limit": 2, "arms": arms})
        assert r.status_code == 202, r.text
        params["experiment_id"] = r.json()["experiment_id"]
        r = client.post("/v1/evaluations", json={"benchmark": "gsm8k", "models": ["uep-oracle"], "sample_limit": 2})
        assert r.status_code == 202, r.text
        params["batch_id"] = r.json()["batch_id"]
        made += ["experiment", "batch"]

        r = client.post(f"/v1/evaluations/{ev}/rescore")
        if r.status_code == 202:
            params["rescore_id"] = r.json()["id"]
            made.append("rescore")
        else:
            skipped.append(f"rescore ({r.status_code}: {r.text[:200]})")
            params["rescore_id"] = str(uuid.uuid4())

        r = client.post(f"/v1/evaluations/{ev}/reports", json={})
        if r.status_code == 202:
            params["report_id"] = r.json()["id"]
            made.append("report")
            _wait(client, f"/v1/evaluations/{ev}/reports/{params['report_id']}", lambda x: x["status"] in ("ready", "failed"), 60)
        else:
            skipped.append(f"report ({r.status_code}: {r.text[:200]})")
            params["report_id"] = str(uuid.uuid4())

        r = client.post(
            "/v1/schedules",
            json={"name": "isolation", "cron": "0 0 1 1 *", "model": "uep-oracle", "benchmark": "gsm8k", "active": False},
        )
        assert r.status_code == 201, r.text
        params["schedule_id"] = r.json()["id"]
        made.append("schedule")

        r = client.post(
            "/v1/annotation-tasks",
            json={
                "name": "isolation",
                "evaluation_id": ev,
                "annotations_per_item": 1,
                "questions": [{"name": "correct", "type": "pass_fail", "prompt": "Is the answer correct?"}],
            },
        )
        assert r.status_code == 201, r.text
        params["task_id"] = r.json()["id"]
        made.append("annotation task")
        r = client.get(f"/v1/annotation-tasks/{params['task_id']}/next", params={"annotator": "isolation"})
        if r.status_code == 200 and r.json().get("assignment_id"):
            params["assignment_id"] = r.json()["assignment_id"]
            made.append("annotation assignment")
        else:  # no item to assign: the skip route is still checked, on an assignment id no tenant has
            params["assignment_id"] = str(uuid.uuid4())
            skipped.append(f"annotation assignment ({r.status_code}: {r.text[:200]})")

        slug = f"iso-private-{suffix}"
        spec = {
            "slug": slug,
            "name": "isolation private",
            "category": "custom",
            "prompt": {"template": "{{ question }}", "max_tokens": 8},
            "metric": {"name": "exact_match", "params": {}},
        }
        rows = "\n".join(json.dumps({"id": f"r{i}", "input": {"question": f"q{i}?"}, "reference": "x"}) for i in range(3))
        r = client.post("/v1/benchmarks", data={"spec": json.dumps(spec)}, files={"file": ("data.jsonl", rows.encode())})
        assert r.status_code == 201, r.text
        params["ref"] = params["slug"] = params["benchmark"] = slug
        made.append("private benchmark")

        model_name = f"iso-model-{suffix}"
        body = {"name": model_name, "endpoint": "grpc://127.0.0.1:1", "triton_model_name": "uep_oracle"}
        r = client.post("/v1/models", params={"probe": "false"}, json=body)
        assert r.status_code == 201, r.text
        params["model_ref"] = f"{model_name}@1"
        made.append("private model")

    dead = uuid.uuid4()
    with db.begin() as c:
        c.execute(
            text(
                "INSERT INTO dead_letters (id, dedupe_key, source_topic, reason, event_type, evaluation_id, tenant_id, body, headers) "
                "VALUES (:i, :d, 'uep.dead-letter.v1', 'isolation test', 'Isolation', :e, :t, :b, '{}')"
            ),
            {"i": dead, "d": uuid.uuid4().hex, "e": params["evaluation_id"], "t": tenant_a, "b": b"{}"},
        )
    params["dead_letter_id"] = str(dead)
    made.append("dead letter")
    secrets = {k: v for k, v in params.items() if k.endswith("_id") and k != "run_id"}
    secrets |= {
        "benchmark slug": params["ref"],
        "model name": params["model_ref"].split("@")[0],
        "tenant": a,
        "tenant id": str(tenant_a),
        "user": f"iso-{suffix}",
    }
    secrets |= {f"{role} key prefix": keys[a][role][:12] for role in ROLES} | {"spare key prefix": spare_key[:12]}
    return World(a, b, keys, params, secrets, made, skipped)


def _operations(schema: dict[str, Any]) -> tuple[list[Op], list[str]]:
    """The schema's operations (plus the app's routes hidden from it), each with its matrix entry; and the
    operations that have no entry."""
    from fastapi.routing import APIRoute, iter_route_contexts

    from uep_gateway.app import create_app

    ops, missing = [], []
    for path, item in schema["paths"].items():
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            access = ROUTES.get((method.upper(), path))
            if access is None:
                missing.append(f"{method.upper()} {path}")
                continue
            params = op.get("parameters", [])
            content = (op.get("requestBody") or {}).get("content", {})
            body = "json" if "application/json" in content else ("form" if content else None)
            ops.append(
                Op(
                    method.upper(),
                    path,
                    access,
                    [p["name"] for p in params if p["in"] == "path"],
                    [p for p in params if p["in"] == "query"],
                    body,
                )
            )
    documented = {(o.method, o.path) for o in ops}
    for context in iter_route_contexts(create_app().routes):
        route = context.original_route
        if isinstance(route, APIRoute) and not route.include_in_schema:
            (method,) = route.methods
            path = context.path or route.path
            if (method, path) not in documented:
                access = ROUTES.get((method, path))
                if access is None:
                    missing.append(f"{method} {path} (hidden)")
                    continue
                ops.append(Op(method, path, access, re.findall(r"{(\w+)}", path)))
    return ops, missing


def _query_value(param: dict[str, Any]) -> Any:
    schema = param.get("schema", {})
    options = schema.get("anyOf") or [schema]
    first = next((s for s in options if s.get("type") != "null"), schema)
    if "enum" in first:
        return first["enum"][0]
    if first.get("type") == "integer":
        return first.get("minimum", 1)
    if first.get("type") == "boolean":
        return "false"
    if first.get("type") == "array":
        return "gsm8k"
    return "gsm8k"


def _request(client: httpx.Client, op: Op, params: dict[str, str], key: str | None, valid: bool = False) -> httpx.Response:
    try:
        path = op.path.format(**{p: params[p] for p in op.path_params})
    except KeyError as exc:
        raise AssertionError(f"{op.name}: no value for path parameter {exc} (add an object of that kind here)") from None
    query = {q["name"]: _query_value(q) for q in op.query if q.get("required")}
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    kwargs: dict[str, Any] = {}
    if op.body == "json":
        kwargs["json"] = VALID_BODIES.get(op.access.op, {}) if valid else {}
    return client.request(op.method, path, params=query, headers=headers, **kwargs)


def _same_as_unknown(client: httpx.Client, op: Op, params: dict[str, str], key: str, answer: httpx.Response) -> bool:
    """True when ``op`` answers the same (status, and body once the ids are swapped) for ids that exist in no
    tenant: the answer tells nothing of A's object (the route does not check that it exists)."""
    unknown = dict(params)
    for name in op.path_params:
        if name in ("fmt", "model"):
            continue
        try:
            uuid.UUID(params[name])
            unknown[name] = str(uuid.uuid4())
        except ValueError:
            unknown[name] = f"iso-unknown-{uuid.uuid4().hex[:6]}"
    control = _request(client, op, unknown, key, valid=True)
    body = control.text
    for name in op.path_params:
        body = body.replace(unknown[name], params[name])
    return control.status_code == answer.status_code and body == answer.text


def _order(ops: list[Op]) -> list[Op]:
    """Reads first, then writes, then the operations that end or change an object."""
    return sorted(ops, key=lambda o: (o.access.op in ENDING, o.method != "GET", o.path, o.method))


@pytest.fixture(scope="module")
def world(stack, db) -> World:
    return _build_world(stack, db)


def test_every_operation_every_role_two_tenants(stack, world):
    with httpx.Client(base_url=stack.gateway_url, timeout=30) as client:
        schema = client.get("/openapi.json").json()
        ops, missing = _operations(schema)
        assert missing == [], f"operations without an entry in uep_gateway.access.ROUTES: {missing}"
        assert len(ops) >= 60
        assert {op.access.op for op in ops} >= CONTROLS
        ops = _order(ops)
        a, b, keys, params = world.a, world.b, world.keys, world.params
        tried = {"anonymous": 0, "lists": 0, "cross-tenant": 0, "same-tenant": 0}
        wrong: list[str] = []
        leaks: list[str] = []
        inconclusive: list[str] = []
        unchecked: list[str] = []

        # 1. no credentials
        for op in ops:
            if op.access.public:
                continue
            tried["anonymous"] += 1
            r = _request(client, op, params, None)
            if r.status_code != 401:
                wrong.append(f"anonymous {op.name}: {r.status_code} (want 401) {r.text[:200]}")

        # 2. B's lists hold none of A's ids
        lists = [(op, op.path) for op in ops if op.method == "GET" and not op.path_params and not op.access.public]
        lists += [(op, EXTRA_LISTS[op.access.op]) for op in ops if op.access.op in EXTRA_LISTS]
        for op, path in lists:
            for role in ROLES:
                if not op.allows(role):
                    continue
                tried["lists"] += 1
                query = {q["name"]: _query_value(q) for q in op.query if q.get("required")}
                r = client.get(path, params=query, headers={"Authorization": f"Bearer {keys[b][role]}"})
                found = [what for what, value in world.secrets.items() if value in r.text]
                if found:
                    leaks.append(f"B {role} {op.access.op} {path}: {r.status_code}, shows A's {', '.join(found)}")

        # 3. B's principals on A's objects → 404
        for op in ops:
            if not op.path_params:
                continue
            for role in ROLES:
                if not op.allows(role):
                    continue
                tried["cross-tenant"] += 1
                r = _request(client, op, params, keys[b][role], valid=True)
                if r.status_code == 404:
                    continue
                if r.status_code == 422:
                    inconclusive.append(f"B {role} {op.name}: 422 before the lookup {r.text[:200]}")
                elif r.status_code in (401, 403):
                    wrong.append(f"B {role} {op.name}: {r.status_code} but the matrix allows {role} {r.text[:200]}")
                elif _same_as_unknown(client, op, params, keys[b][role], r):
                    unchecked.append(f"B {role} {op.name}: {r.status_code}, the same answer as for an unknown id")
                else:
                    leaks.append(f"B {role} {op.name} on A's object: {r.status_code} {r.text[:300]}")

        # 4. A's roles on A's objects: the matrix decides
        for op in ops:
            for role in sorted(ROLES, key=op.allows):  # refused roles first: they change nothing
                if op.access.public:
                    continue
                tried["same-tenant"] += 1
                r = _request(client, op, params, keys[a][role])
                if role == "admin" and op.access.op in CONTROLS and not 200 <= r.status_code < 300:
                    wrong.append(f"A admin {op.name} on A's own object: {r.status_code} (want 2xx) {r.text[:200]}")
                if op.allows(role):
                    if r.status_code in (401, 403) or r.status_code >= 500:
                        wrong.append(f"A {role} {op.name}: {r.status_code}, the matrix allows it {r.text[:200]}")
                elif r.status_code != 403:
                    wrong.append(f"A {role} {op.name}: {r.status_code}, want 403 {r.text[:200]}")

    total = sum(tried.values())
    print(
        f"\nisolation: {len(ops)} operations × {len(ROLES)} roles × 2 tenants; requests: {tried} = {total}; "
        f"objects made in A: {', '.join(world.made)}; kinds skipped: {', '.join(world.skipped) or 'none'}; "
        f"leaks: {len(leaks)}; wrong answers: {len(wrong)}; inconclusive (422 before the lookup): {len(inconclusive)}; "
        f"no existence check (same answer as for an unknown id, nothing of A's shown): {len(unchecked)}"
    )
    for line in leaks + wrong + inconclusive + unchecked:
        print("  " + line)
    assert leaks == [], "\n".join(leaks)
    assert wrong == [], "\n".join(wrong)
