"""The model registry attacked on the real stack: another tenant's private model by every address, roles,
shadowing of site and shared names, the API key (responses, errors, logs, audit, events), endpoints the
probe must not call or must stop reading, bad input, and concurrent registrations.

Endpoints the probe is pointed at here are served by :class:`Hostile`, an HTTP server of this test process on
127.0.0.1 (loopback is an address the registry allows), whose answer is chosen by the served model's name
(``triton_model_name``: the probe asks for ``/v2/models/{name}``) and which records every request it gets.
The test stack's Triton serves ``uep_oracle`` (generation/uep) and ``uep_judge`` (the judge stub).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from identity.principals import SITE
from integration.helpers import tenant_headers, wait_done
from uep_common.registry.model_registry import decrypt_api_key

GZIP_BOMB = gzip.compress(b"\0" * (64 * 1024 * 1024), 9)  # 64 MiB of zeros in ~64 KiB


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def first(r: httpx.Response) -> dict:
    detail = r.json()["detail"]
    assert isinstance(detail, list) and detail, r.text
    return detail[0]


class Hostile(BaseHTTPRequestHandler):
    """Answers by the path's served model name; every request is appended to ``server.seen`` as
    ``(path, Authorization header or None)``."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k.replace("_", "-"), v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self.server.seen.append((self.path, self.headers.get("Authorization")))  # type: ignore[attr-defined]
        parts = self.path.split("/")
        served = parts[3] if len(parts) > 3 and parts[1:3] == ["v2", "models"] else ""
        try:
            if self.path.endswith("/v1/models"):  # an OpenAI-compatible server that serves "served"
                self._send(200, json.dumps({"data": [{"id": "served"}]}).encode())
            elif served == "trickle":  # one byte a second, for a minute
                self.send_response(200)
                self.send_header("Content-Length", "100000")
                self.end_headers()
                for _ in range(60):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(1)
            elif served == "huge":  # 100 MB
                self.send_response(200)
                self.send_header("Content-Length", str(100 * 1024 * 1024))
                self.end_headers()
                chunk = b"[" * 65536
                for _ in range(1600):
                    self.wfile.write(chunk)
            elif served == "gzipbomb":
                self._send(200, GZIP_BOMB, Content_Encoding="gzip")
            elif served == "deep":  # JSON nested past any recursion limit
                self._send(200, b"[" * 200_000 + b"]" * 200_000)
            elif served == "redirect":
                self._send(302, b"", Location=f"http://127.0.0.1:{self.server.server_port}/v2/models/target")  # type: ignore[attr-defined]
            elif served.startswith("shape"):  # a model whose metadata or config is malformed
                bad = {
                    "shape-unicode": (["²"], None),
                    "shape-dashes": (["--1"], None),
                    "shape-longint": (["9" * 5000], None),
                    "shape-float": ([1.5], None),
                    "shape-null": (None, None),
                    "shape-config": ([1], {"max_batch_size": 0, "input": 5}),
                    "shape-batch": ([1], {"max_batch_size": "8", "input": [{"name": 3}]}),
                }[served.split("/")[0]]
                if self.path.endswith("/config"):
                    self._send(200, json.dumps(bad[1] or {}).encode())
                else:
                    tensors = [{"name": "text_input", "datatype": "BYTES", "shape": bad[0]}]
                    self._send(200, json.dumps({"name": served, "inputs": tensors, "outputs": [{"name": 7}]}).encode())
            else:
                self._send(404, b'{"error": "unknown model"}')
        except (BrokenPipeError, ConnectionResetError):
            pass


@pytest.fixture(scope="module")
def hostile():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    server.daemon_threads = True
    server.seen = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


@pytest.fixture(scope="module")
def triton(stack) -> str:
    return f"http://127.0.0.1:{stack.triton_http}"


@pytest.fixture(scope="module")
def t(stack):
    """Three tenants, A (owner), B (attacker) and C (bystander), with a key per role (and ``slug``)."""
    roles = ("admin", "builder", "viewer", "annotator")
    return {
        who: {role: tenant_headers(stack, slug, role) for role in roles} | {"slug": slug}
        for who, slug in (("a", unique("atk-a")), ("b", unique("atk-b")), ("c", unique("atk-c")))
    }


def oracle(name: str, triton: str, **extra) -> dict:
    return {"name": name, "endpoint": triton, "triton_model_name": "uep_oracle"} | extra


def register(gateway: httpx.Client, headers: dict, body: dict, **params) -> httpx.Response:
    """POST /v1/models with ``body`` as JSON (NaN and infinities written as Python's json writes them)."""
    content = json.dumps(body)
    return gateway.post("/v1/models", content=content, headers=headers | {"content-type": "application/json"}, params=params)


# ----------------------------------------------------------------------------------------------- tenants


def test_another_tenants_private_model_is_a_404_by_every_address(gateway, t, triton):
    name = unique("Secret.Model_x")
    a, b = t["a"]["builder"], t["b"]["admin"]
    made = register(gateway, a, oracle(name, triton))
    assert made.status_code == 201, made.text
    assert register(gateway, a, oracle(name, triton, version="2")).status_code == 201
    model_id = made.json()["id"]
    addresses = [name, f"{name}@1", f"{name}@2", model_id, name.lower(), name.upper(), f"{name}%40%31",
                 name.replace("-", "%2D"), f"..%2F{name}", f"x%2F..%2F{name}", f"{name}%2F.."]  # fmt: skip
    for ref in addresses:
        for method, suffix, body in [
            ("GET", "", None),
            ("PATCH", "", {"description": "mine now"}),
            ("DELETE", "", None),
            ("POST", "/deactivate", None),
            ("POST", "/reactivate", None),
        ]:
            r = gateway.request(method, f"/v1/models/{ref}{suffix}", headers=b, json=body)
            assert r.status_code in (404, 422), (method, ref, r.status_code, r.text)
            assert model_id not in r.text or ref == model_id, (method, ref, r.text)
            if r.status_code == 404 and "@" in ref and "%" not in ref:
                assert (first(r)["loc"], first(r)["type"]) == (["path", "model_ref"], "unknown_model")
    # untouched
    mine = gateway.get(f"/v1/models/{name}@1", headers=a).json()
    assert (mine["description"], mine["active"]) == ("", True)
    # never listed, whatever the filters; not in the cost list either
    for params in ({}, {"kind": "generation"}, {"active": "true"}, {"active": "false"}):
        listed = gateway.get("/v1/models", headers=b, params=params)
        assert listed.status_code == 200 and name not in listed.text, params
    assert name not in gateway.get("/v1/costs/models", headers=b).text
    # and not evaluable: by name, version, id, in arms and in a batch, in a schedule, in an estimate
    bodies = [
        {"model": name},
        {"model": f"{name}@1"},
        {"model": name, "model_version": "1"},
        {"model": model_id},
        {"models": ["uep-oracle", name]},
    ]
    for body in bodies:
        r = gateway.post("/v1/evaluations", json={"benchmark": "gsm8k", "sample_limit": 1} | body, headers=b)
        assert r.status_code == 422 and first(r)["type"] == "unknown_model", (body, r.text)
        r = gateway.post("/v1/evaluations/estimate", json={"benchmark": "gsm8k", "sample_limit": 1} | body, headers=b)
        assert r.status_code == 422 and first(r)["type"] == "unknown_model", (body, r.text)
    r = gateway.post(
        "/v1/evaluations",
        json={
            "benchmark": "gsm8k",
            "sample_limit": 1,
            "arms": [{"name": "x", "model": "uep-oracle"}, {"name": "y", "model": name}],
        },
        headers=b,
    )
    assert r.status_code == 422 and first(r)["type"] == "unknown_model", r.text
    r = gateway.post(
        "/v1/schedules", json={"name": unique("s"), "cron": "0 3 * * *", "model": name, "benchmark": "gsm8k"}, headers=b
    )
    assert r.status_code == 422 and first(r)["loc"] == ["body", "model"], r.text
    r = gateway.get("/v1/leaderboards/compare", params={"models": name}, headers=b)
    assert (r.status_code, first(r)["type"]) == (422, "unknown_model"), r.text


def test_a_private_model_evaluated_by_its_owner_shows_nowhere_for_others(stack, db, gateway, t, triton):
    name, shared = unique("hidden-board"), unique("shared-board")
    a, b = t["a"]["builder"], t["b"]["admin"]
    assert register(gateway, a, oracle(name, triton)).status_code == 201
    assert register(gateway, a, oracle(shared, triton, visibility="shared")).status_code == 201
    runs = []
    for model in (name, shared):
        ev = gateway.post("/v1/evaluations", json={"benchmark": "gsm8k", "model": model, "sample_limit": 2}, headers=a)
        assert ev.status_code == 202, ev.text
        runs.append(ev.json()["id"])
    for run in runs:
        assert wait_done(gateway, run, headers=a)["status"] == "completed"
    # on the owner's board: the reporter records a leaderboard score just after the completing batch commits (the
    # status is visible a moment before), and its reconciler within UEP_LEADERBOARD_RECONCILE_S as a backstop
    deadline, own, on_board = time.monotonic() + 40, {}, set()
    while not {name, shared} <= on_board and time.monotonic() < deadline:
        time.sleep(0.2)
        own = gateway.get("/v1/leaderboards/gsm8k", headers=a).json()
        on_board = {e["model"] for e in own["entries"]}
    assert {name, shared} <= on_board, on_board
    for path in ("/v1/leaderboards", "/v1/leaderboards/gsm8k", "/v1/leaderboards/gsm8k/history", "/v1/evaluations"):
        r = gateway.get(path, headers=b)
        assert r.status_code == 200 and name not in r.text, (path, r.text[:300])
    assert gateway.get(f"/v1/evaluations/{runs[0]}", headers=b).status_code == 404

    # site-wide boards (the gateway setting leaderboards_site_wide): every tenant's entries of the models the
    # reader may see, so A's shared model is on B's board and A's private one is not, nor in the history
    from uep_common.analytics import leaderboards as lb
    from uep_common.runtime.session import make_async_engine

    with db.connect() as c:
        b_id = c.execute(text("SELECT id FROM tenants WHERE slug = :s"), {"s": t["b"]["slug"]}).scalar_one()

    async def site_wide() -> tuple[set[str], set[str]]:
        engine = make_async_engine(stack.database_url)
        try:
            async with engine.connect() as conn, AsyncSession(conn) as s:
                scope = lb.BoardScope(viewer_tenant_id=b_id)
                board = await lb.load_board(s, "gsm8k", own["score_type"], scope=scope)
                history = await lb.board_history(s, "gsm8k", own["score_type"], scope=scope)
                cmp = await lb.compare_models(s, [name, shared], [("gsm8k", own["score_type"])], scope=scope)
                return {e.model for e in board}, {e["model"] for h in history for e in h["entries"]} | {
                    r["model"] for r in cmp["rows"] if any(cmp_v for cmp_v in r["scores"].values())
                }
        finally:
            await engine.dispose()

    board, elsewhere = asyncio.run(site_wide())
    assert shared in board and name not in board, board
    assert name not in elsewhere and shared in elsewhere, elsewhere


def test_the_report_trend_of_a_model_name_is_the_tenants_own(gateway, t, triton):
    """Two tenants' private models of one name: each report's trend lists its own tenant's runs only."""
    name = unique("twin")
    runs = {}
    for who in ("a", "b"):
        h = t[who]["builder"]
        assert register(gateway, h, oracle(name, triton)).status_code == 201
        r = gateway.post("/v1/evaluations", json={"benchmark": "gsm8k", "model": name, "sample_limit": 2}, headers=h)
        assert r.status_code == 202, r.text
        runs[who] = r.json()["id"]
    for who in ("a", "b"):
        assert wait_done(gateway, runs[who], headers=t[who]["builder"])["status"] == "completed"
    h = t["a"]["builder"]
    r = gateway.post(f"/v1/evaluations/{runs['a']}/reports", headers=h)
    assert r.status_code == 202, r.text
    deadline = time.monotonic() + 120
    while True:
        got = gateway.get(f"/v1/evaluations/{runs['a']}/report.json", headers=h)
        if got.status_code == 200:
            break
        assert time.monotonic() < deadline, got.text
        time.sleep(1)
    trend_ids = {p["evaluation_id"] for p in got.json()["trend"]}
    assert runs["a"] in trend_ids and runs["b"] not in trend_ids, got.json()["trend"]
    assert runs["b"] not in got.text


def test_a_tenant_cannot_shadow_a_site_or_another_tenants_shared_name(gateway, t, triton):
    a, b, c = t["a"]["builder"], t["b"]["builder"], t["c"]["builder"]
    for site_name in ("uep-oracle", "UEP-Oracle", "uep-ORACLE"):
        r = register(gateway, b, oracle(site_name, triton, visibility="shared"))
        assert (r.status_code, first(r)["loc"], first(r)["type"]) == (409, ["body", "name"], "name_taken"), (site_name, r.text)
    name = unique("acme-llm")
    assert register(gateway, a, oracle(name, triton, visibility="shared", description="A's")).status_code == 201
    # B may not share a model of that name (any version, any case) …
    for variant in (name, name.upper()):
        r = register(gateway, b, oracle(variant, triton, visibility="shared", version="9"))
        assert (r.status_code, first(r)["loc"], first(r)["type"]) == (409, ["body", "name"], "name_taken"), r.text
    # … nor make a private one of that name shared later
    assert register(gateway, b, oracle(name, triton, description="B's")).status_code == 201
    r = gateway.patch(f"/v1/models/{name}@1", json={"visibility": "shared"}, headers=b)
    assert (r.status_code, first(r)["loc"], first(r)["type"]) == (409, ["body", "visibility"], "name_taken"), r.text
    # so C still gets A's model by that name, and B its own
    assert gateway.get(f"/v1/models/{name}", headers=c).json()["description"] == "A's"
    assert gateway.get(f"/v1/models/{name}", headers=b).json()["description"] == "B's"


def test_a_judge_is_the_evaluating_tenants_model_of_that_name(gateway, t, triton):
    """The judge service resolves a judge by name for the evaluation's tenant: a newer model of the same name
    in another tenant (here the oracle, whose answers are no verdicts) neither judges A's items nor sees them."""
    name = unique("jdg")
    a = t["a"]["builder"]
    assert register(gateway, a, {"name": name, "endpoint": triton, "triton_model_name": "uep_judge"}).status_code == 201
    r = register(gateway, t["b"]["builder"], {"name": name, "endpoint": triton, "triton_model_name": "uep_oracle"})
    assert r.status_code == 201, r.text
    # the stand-in judge answers on a 0-10 scale (gsm8k-judged's own 1-5 scale is for the embedded LLM judge)
    scale = {
        "dimensions": [{"name": "accuracy", "min": 0, "max": 10}],
        "overall_min": 0,
        "overall_max": 10,
        "overall_integer": False,
    }
    body = {
        "benchmark": "gsm8k-judged",
        "model": "uep-oracle",
        "sample_limit": 2,
        "judge": {"judges": [name], "max_retries": 0, **scale},
    }
    ev = gateway.post("/v1/evaluations", json=body, headers=a)
    assert ev.status_code == 202, ev.text
    done = wait_done(gateway, ev.json()["id"], headers=a, timeout_s=180)
    assert done["status"] == "completed", done
    results = gateway.get(f"/v1/evaluations/{ev.json()['id']}/results", headers=a).json()["items"]
    errors = [x["error"] for x in results if x.get("error")]
    assert errors == [], errors  # judged by A's uep_judge, not B's oracle


# ------------------------------------------------------------------------------------------------- roles


def test_roles(gateway, t, triton):
    name = unique("roles")
    a = t["a"]
    assert register(gateway, a["builder"], oracle(name, triton, visibility="shared")).status_code == 201
    for role in ("viewer", "annotator"):
        h = a[role]
        for method, path, body in [
            ("POST", "/v1/models", oracle(unique("r"), triton)),
            ("PATCH", f"/v1/models/{name}@1", {"description": "x"}),
            ("POST", f"/v1/models/{name}@1/deactivate", None),
            ("POST", f"/v1/models/{name}@1/reactivate", None),
            ("DELETE", f"/v1/models/{name}@1", None),
        ]:
            r = gateway.request(method, path, json=body, headers=h)
            assert (r.status_code, first(r)["loc"]) == (403, ["header", "Authorization"]), (role, method, path, r.text)
    r = gateway.get("/v1/models", headers=a["annotator"])
    assert r.status_code == 403
    # a builder's registration and endpoint change are always probed
    r = register(gateway, a["builder"], oracle(unique("np"), "grpc://127.0.0.1:1"), probe="false")
    assert (r.status_code, first(r)["loc"]) == (403, ["query", "probe"])
    r = gateway.patch(
        f"/v1/models/{name}@1", json={"endpoint": "grpc://127.0.0.1:1"}, headers=a["builder"], params={"probe": "false"}
    )
    assert (r.status_code, first(r)["loc"]) == (403, ["query", "probe"])
    # tenant users make no site models and name no environment variables
    r = register(gateway, a["admin"], oracle(unique("site"), triton, owner="site"))
    assert (r.status_code, first(r)["loc"]) == (403, ["body", "owner"])
    ref = {
        "name": unique("ref"),
        "backend": "openai_compatible",
        "endpoint": "http://127.0.0.1:9",
        "api_key_ref": "UEP_MODEL_KEY_X",
    }
    r = register(gateway, a["admin"], ref, probe="false")
    assert (r.status_code, first(r)["loc"]) == (403, ["body", "api_key_ref"])
    # another tenant sees a shared model but changes nothing of it
    for method, path, body in [
        ("PATCH", f"/v1/models/{name}@1", {"visibility": "private"}),
        ("POST", f"/v1/models/{name}@1/deactivate", None),
        ("DELETE", f"/v1/models/{name}@1", None),
    ]:
        r = gateway.request(method, path, json=body, headers=t["b"]["admin"])
        assert (r.status_code, first(r)["type"]) == (403, "not_owner"), (method, r.text)
    # the site admin's header is refused to tenant users
    r = register(gateway, a["admin"] | SITE, oracle(unique("site"), triton, owner="site"))
    assert (r.status_code, first(r)["loc"]) == (403, ["header", "X-UEP-Site-Admin"])
    assert gateway.get(f"/v1/models/{name}", headers=a["viewer"]).json()["active"] is True


# ------------------------------------------------------------------------------------------------ secrets


def test_the_api_key_never_comes_back(gateway, stack, db, t, hostile):
    secret = "sk-" + uuid.uuid4().hex
    admin = t["a"]["admin"]
    port = hostile.server_port
    base = {"backend": "openai_compatible", "endpoint": f"http://127.0.0.1:{port}/ok", "triton_model_name": "served"}
    answers = []
    # malformed registrations that carry the key: the 422 names the field and does not echo the key
    for bad in (
        {"name": unique("k"), "api_key": secret},  # no endpoint: a "missing" error whose input is the whole body
        base | {"name": unique("k"), "api_key": secret * 200},  # too long
        base | {"name": unique("k"), "apikey": secret},  # an unknown field
        base | {"name": unique("k"), "api_key": {"key": secret}},  # not a string
        base | {"name": "bad name", "api_key": secret},
        base | {"name": unique("k"), "api_key": secret, "max_in_flight": 0},
    ):
        r = register(gateway, admin, bad)
        assert r.status_code == 422, r.text
        answers.append(r)
    # a key refused by the endpoint: the 422 does not repeat it
    name = unique("openai")
    made = register(gateway, t["a"]["builder"], base | {"name": name, "api_key": secret})
    assert made.status_code == 201, made.text
    assert made.json()["has_api_key"] is True and made.json()["api_key_ref"] is None
    assert hostile.seen[-1] == ("/ok/v1/models", f"Bearer {secret}")  # the probe sent it to its own endpoint
    answers += [
        made,
        gateway.get(f"/v1/models/{name}", headers=admin),
        gateway.get("/v1/models", headers=admin),
        gateway.patch(f"/v1/models/{name}@1", json={"description": "d"}, headers=admin),
        gateway.patch(f"/v1/models/{name}@1", json={"api_key": secret + "\x00"}, headers=admin),
        gateway.get("/openapi.json"),
    ]
    # an endpoint change does not carry the stored key to the new endpoint: give the key again (or null)
    seen_before = len(hostile.seen)
    moved = gateway.patch(f"/v1/models/{name}@1", json={"endpoint": f"http://127.0.0.1:{port}/elsewhere"}, headers=admin)
    assert (moved.status_code, first(moved)["loc"], first(moved)["type"]) == (422, ["body", "api_key"], "key_required"), (
        moved.text
    )
    assert [p for p, _ in hostile.seen[seen_before:]] == []
    assert gateway.get(f"/v1/models/{name}", headers=admin).json()["endpoint"] == base["endpoint"]
    answers.append(moved)
    # an evaluation of it: the dispatched ModelTarget carries no key
    ev = gateway.post("/v1/evaluations", json={"benchmark": "gsm8k", "model": name, "sample_limit": 1}, headers=admin)
    assert ev.status_code == 202, ev.text
    deadline = time.monotonic() + 30
    while True:
        with db.connect() as c:
            payloads = c.execute(
                text("SELECT payload::text FROM outbox WHERE event_type = 'SampleDispatched' AND payload->>'evaluation_id' = :e"),
                {"e": ev.json()["id"]},
            ).scalars().all()  # fmt: skip
        if payloads or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert payloads, "no SampleDispatched in the outbox"
    target = json.loads(payloads[0])["target"]
    assert target["name"] == name and secret not in payloads[0] and "api_key" not in target, target
    if target.get("api_key_encrypted"):  # the registry's Fernet token, which only the site key opens
        assert decrypt_api_key(target["api_key_encrypted"].encode(), stack.model_secret_key()) == secret
    assert all(secret not in p for p in payloads)
    gateway.post(f"/v1/evaluations/{ev.json()['id']}/cancel", headers=admin)
    for r in answers:
        assert secret not in r.text, (r.request.method, r.request.url, r.text[:500])
    audit = gateway.get("/v1/audit", headers=admin, params={"limit": 500})
    assert audit.status_code == 200 and "registerModel" in audit.text and secret not in audit.text
    for log in sorted(Path(stack.run_dir, "logs").glob("*.log")):
        assert secret not in log.read_text(errors="replace"), log.name
    with db.connect() as c:
        stored = c.execute(text("SELECT api_key_encrypted FROM models WHERE name = :n"), {"n": name}).scalar_one()
    assert secret.encode() not in bytes(stored)


@pytest.mark.parametrize(
    ("ref", "status"),
    [("UEP_INTERNAL_TOKEN", 422), ("UEP_DATABASE_URL", 422), ("UEP_MODEL_SECRET_KEY", 422), ("uep_model_key_x", 422),
     ("UEP_MODEL_KEY_", 422), ("UEP_MODEL_KEY_../X", 422), ("PATH", 422)],
)  # fmt: skip
def test_api_key_ref_names_only_model_key_variables(gateway, ref, status):
    body = {
        "name": unique("ref"),
        "backend": "openai_compatible",
        "endpoint": "http://127.0.0.1:9",
        "owner": "site",
        "api_key_ref": ref,
    }
    r = gateway.post("/v1/models", json=body, headers=SITE, params={"probe": "false"})
    assert (r.status_code, first(r)["loc"]) == (status, ["body", "api_key_ref"]), r.text


# --------------------------------------------------------------------------------------------------- SSRF


@pytest.mark.parametrize(
    ("endpoint", "kind"),
    [
        ("http://169.254.169.254", "blocked_address"),
        ("http://2852039166:8000", "blocked_address"),  # 169.254.169.254 as one decimal number
        ("http://0251.0376.0251.0376:8000", "blocked_address"),  # octal
        ("http://0xA9FEA9FE:8000", "blocked_address"),  # hex
        ("http://0xa9.0xfe.0xa9.0xfe:8000", "blocked_address"),
        ("http://169.254.1:8000", "blocked_address"),  # inet_aton's short form
        ("http://[::ffff:169.254.169.254]:8000", "blocked_address"),
        ("http://[::ffff:a9fe:a9fe]:8000", "blocked_address"),
        ("http://[64:ff9b::a9fe:a9fe]:8000", "blocked_address"),  # NAT64 of 169.254.169.254
        ("http://[::169.254.169.254]:8000", "blocked_address"),  # IPv4-compatible
        ("http://[2002:a9fe:a9fe::1]:8000", "blocked_address"),  # 6to4 of 169.254.169.254
        ("http://[fe80::1]:8000", "blocked_address"),
        ("http://[fe80::1%25lo]:8000", "blocked_address"),
        ("http://[fd00:ec2::254]:8000", "blocked_address"),
        ("http://100.100.100.200:8000", "blocked_address"),
        ("http://0.0.0.0:8000", "blocked_address"),
        ("http://0:8000", "blocked_address"),
        ("http://224.0.0.1:8000", "blocked_address"),
        ("grpc://169.254.169.254:8001", "blocked_address"),
        ("169.254.169.254:8001", "blocked_address"),
        ("http://no-such-host.invalid:8000", "unreachable"),  # the answer of every endpoint not reached
        # loopback and private networks only where the site's allowlist names them (the test stack: loopback)
        ("http://10.11.12.13:8000", "egress_refused"),
        ("http://192.168.1.1:8000", "egress_refused"),
        ("http://172.16.0.1:8000", "egress_refused"),
        ("http://100.64.0.1:8000", "egress_refused"),  # shared address space (carrier-grade NAT)
        ("http://[fd12:3456::1]:8000", "egress_refused"),  # IPv6 unique-local
        ("http://[::ffff:10.0.0.1]:8000", "egress_refused"),  # IPv4-mapped private
        ("grpc://10.0.0.1:8001", "egress_refused"),
        ("file:///etc/passwd", "bad_scheme"),
        ("gopher://127.0.0.1:70/_x", "bad_scheme"),
        ("ftp://127.0.0.1/x", "bad_scheme"),
        ("ws://127.0.0.1:8000", "bad_scheme"),
        ("http://user:pass@127.0.0.1:8000", "bad_value"),
        ("http://127.0.0.1:8000@169.254.169.254", "bad_value"),
        ("http://127.0.0.1:8000?x=1", "bad_value"),
        ("http://127.0.0.1:8000#f", "bad_value"),
        ("http://127.0.0.1:8000/v2/models/x", "bad_value"),
        ("http://127.0.0.1:99999", "bad_value"),
        ("http://127.0.0.1:8000\\@169.254.169.254", "bad_value"),
        ("http://127.0.0.1:8000 x", "bad_value"),
        ("http://", "bad_value"),
        ("http://" + "a" * 494, "string_too_long"),
    ],
)
def test_refused_endpoints_are_a_422_naming_endpoint(gateway, t, endpoint, kind):
    for h, params in ((t["a"]["builder"], {}), (t["a"]["admin"], {"probe": "false"})):
        r = register(gateway, h, {"name": unique("ssrf"), "endpoint": endpoint}, **params)
        assert (r.status_code, first(r)["loc"], first(r)["type"]) == (422, ["body", "endpoint"], kind), r.text
    name = unique("moved")
    assert register(gateway, t["a"]["admin"], {"name": name, "endpoint": "grpc://127.0.0.1:1"}, probe="false").status_code == 201
    r = gateway.patch(f"/v1/models/{name}@1", json={"endpoint": endpoint}, headers=t["a"]["admin"], params={"probe": "false"})
    assert (r.status_code, first(r)["loc"], first(r)["type"]) == (422, ["body", "endpoint"], kind), r.text


def test_every_unreachable_endpoint_gets_one_answer(gateway, t, stack):
    """A closed port, a port that speaks another protocol and a port that accepts and says nothing get the same
    answer (only the endpoint itself differs), so the probe is no port scanner."""
    import socket

    silent = socket.socket()  # accepts connections (the kernel's backlog) and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    garbage = socket.socket()  # answers anything with bytes that are not HTTP
    garbage.bind(("127.0.0.1", 0))
    garbage.listen(8)

    def serve_garbage() -> None:
        while True:
            try:
                conn, _ = garbage.accept()
            except OSError:
                return
            conn.sendall(b"\x00\x01 not http at all\r\n\r\n")
            conn.close()

    threading.Thread(target=serve_garbage, daemon=True).start()
    ports = {
        "closed": 9,
        "postgres": int(stack.database_url.rsplit(":", 1)[1].split("/", 1)[0]),
        "kafka": stack.broker_port,
        "garbage": garbage.getsockname()[1],
        "silent": silent.getsockname()[1],
    }
    answers = {}
    try:
        for what, port in ports.items():
            endpoint = f"http://127.0.0.1:{port}"
            r = register(gateway, t["a"]["builder"], {"name": unique("scan"), "endpoint": endpoint})
            assert r.status_code == 422, (what, r.text)
            answers[what] = {k: str(v).replace(endpoint, "<endpoint>") for k, v in first(r).items() if k != "ctx"}
    finally:
        silent.close()
        garbage.close()
    assert all(a == answers["closed"] for a in answers.values()), answers
    assert answers["closed"]["type"] == "unreachable" and answers["closed"]["loc"] == "['body', 'endpoint']"


@pytest.mark.parametrize(
    ("served", "loc", "kind", "max_s"),
    [
        ("trickle", ["body", "endpoint"], "unreachable", 15),
        ("huge", ["body", "endpoint"], "probe_failed", 10),
        ("gzipbomb", ["body", "endpoint"], "probe_failed", 10),
        ("deep", ["body", "triton_model_name"], "unknown_served_model", 10),
        ("redirect", ["body", "triton_model_name"], "unknown_served_model", 10),
        ("shape-unicode", ["body", "contract"], "contract_mismatch", 10),
        ("shape-dashes", ["body", "contract"], "contract_mismatch", 10),
        ("shape-longint", ["body", "contract"], "contract_mismatch", 10),
        ("shape-float", ["body", "contract"], "contract_mismatch", 10),
        ("shape-null", ["body", "contract"], "contract_mismatch", 10),
        ("shape-config", ["body", "contract"], "contract_mismatch", 10),
        ("shape-batch", ["body", "contract"], "contract_mismatch", 10),
        ("..", ["body", "triton_model_name"], "value_error", 10),
    ],
)
def test_the_probe_is_bounded_and_never_fails_with_a_500(gateway, t, hostile, served, loc, kind, max_s):
    seen_before = len(hostile.seen)
    started = time.monotonic()
    body = {"name": unique("probe"), "endpoint": f"http://127.0.0.1:{hostile.server_port}", "triton_model_name": served}
    r = register(gateway, t["a"]["builder"], body)
    assert time.monotonic() - started < max_s
    assert (r.status_code, first(r)["loc"], first(r)["type"]) == (422, loc, kind), r.text
    assert not any(p.endswith("/target") for p, _ in hostile.seen[seen_before:])  # a redirect is not followed


# --------------------------------------------------------------------------------------------- bad input

B = {"name": "bounds", "endpoint": "grpc://127.0.0.1:1"}
NESTED: object = "x"
for _ in range(200):
    NESTED = [NESTED]


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        (B | {"name": ""}, ["body", "name"]),
        (B | {"name": "a" * 201}, ["body", "name"]),
        (B | {"name": "a@b"}, ["body", "name"]),
        (B | {"name": "a/b"}, ["body", "name"]),
        (B | {"name": ".."}, ["body", "name"]),
        (B | {"name": "."}, ["body", "name"]),
        (B | {"name": "módel"}, ["body", "name"]),
        (B | {"name": "a\x00b"}, ["body", "name"]),
        (B | {"name": 5}, ["body", "name"]),
        (B | {"name": str(uuid.uuid4())}, ["body", "name"]),  # would be read as a model id
        (B | {"version": "v" * 101}, ["body", "version"]),
        (B | {"version": ".."}, ["body", "version"]),
        (B | {"version": ""}, ["body", "version"]),
        (B | {"description": "d" * 2001}, ["body", "description"]),
        (B | {"endpoint": ""}, ["body", "endpoint"]),
        (B | {"endpoint": "h:1" + "1" * 500}, ["body", "endpoint"]),
        (B | {"kind": "regression"}, ["body", "kind"]),
        (B | {"backend": "grpc"}, ["body", "backend"]),
        (B | {"contract": "c" * 41}, ["body", "contract"]),
        (B | {"contract": "openai"}, ["body", "contract"]),
        (B | {"triton_model_name": "a/b"}, ["body", "triton_model_name"]),
        (B | {"triton_model_name": "."}, ["body", "triton_model_name"]),
        (B | {"triton_model_version": "latest"}, ["body", "triton_model_version"]),
        (B | {"triton_model_version": "9" * 19}, ["body", "triton_model_version"]),
        (B | {"kind": "classification", "spec": {"class_names": ["only"]}}, ["body", "spec", "class_names"]),
        (B | {"kind": "classification", "spec": {"class_names": [f"c{i}" for i in range(1001)]}}, ["body", "spec", "class_names"]),
        (B | {"kind": "classification", "spec": {"class_names": ["a", "b" * 201]}}, ["body", "spec", "class_names", 1]),
        (B | {"kind": "classification", "spec": {"class_names": ["a", ""]}}, ["body", "spec", "class_names", 1]),
        (B | {"kind": "classification", "spec": {"class_names": ["a", "a"]}}, ["body", "spec", "class_names"]),
        (B | {"kind": "classification", "spec": {"class_names": "ab"}}, ["body", "spec", "class_names"]),
        (B | {"kind": "classification", "spec": {"class_names": NESTED}}, ["body", "spec", "class_names"]),
        (B | {"kind": "classification", "spec": {"class_names": ["a", "b"], "deep": NESTED}}, ["body", "spec", "deep"]),
        (B | {"kind": "classification", "spec": {"class_names": ["a", "b"], "input": "features"}}, ["body", "spec", "input"]),
        (B | {"kind": "classification", "contract": "features", "spec": {"class_names": ["a", "b"], "n_features": 0}}, ["body", "spec", "n_features"]),
        (B | {"kind": "classification", "contract": "features", "spec": {"class_names": ["a", "b"], "n_features": 1_000_001}}, ["body", "spec", "n_features"]),
        (B | {"kind": "embedding", "spec": {"dimension": 65_537}}, ["body", "spec", "dimension"]),
        (B | {"kind": "embedding", "spec": {"dimension": True}}, ["body", "spec", "dimension"]),
        (B | {"kind": "embedding"}, ["body", "spec", "dimension"]),
        (B | {"spec": {"class_names": ["a", "b"]}}, ["body", "spec", "class_names"]),
        (B | {"spec": []}, ["body", "spec"]),
        (B | {"max_in_flight": 0}, ["body", "max_in_flight"]),
        (B | {"max_in_flight": 1025}, ["body", "max_in_flight"]),
        (B | {"max_in_flight": 2**70}, ["body", "max_in_flight"]),
        (B | {"max_in_flight": "many"}, ["body", "max_in_flight"]),
        (B | {"decoding_defaults": {"max_tokens": 0}}, ["body", "decoding_defaults", "max_tokens"]),
        (B | {"decoding_defaults": {"max_tokens": 32_769}}, ["body", "decoding_defaults", "max_tokens"]),
        (B | {"decoding_defaults": {"temperature": -0.01}}, ["body", "decoding_defaults", "temperature"]),
        (B | {"decoding_defaults": {"temperature": 2.01}}, ["body", "decoding_defaults", "temperature"]),
        (B | {"decoding_defaults": {"temperature": float("nan")}}, ["body", "decoding_defaults", "temperature"]),
        (B | {"decoding_defaults": {"temperature": float("inf")}}, ["body", "decoding_defaults", "temperature"]),
        (B | {"decoding_defaults": {"stop": ["s"] * 17}}, ["body", "decoding_defaults", "stop"]),
        (B | {"decoding_defaults": {"stop": ["s" * 201]}}, ["body", "decoding_defaults", "stop", 0]),
        (B | {"decoding_defaults": {"top_k": 5}}, ["body", "decoding_defaults", "top_k"]),
        (B | {"kind": "ranking", "decoding_defaults": {"max_tokens": 5}}, ["body", "decoding_defaults"]),
        (B | {"cost": {"price_per_call": -1}}, ["body", "cost", "price_per_call"]),
        (B | {"cost": {"price_per_call": "NaN"}}, ["body", "cost", "price_per_call"]),
        (B | {"cost": {"price_per_call": "Infinity"}}, ["body", "cost", "price_per_call"]),
        (B | {"cost": {"price_per_call": 1e20}}, ["body", "cost", "price_per_call"]),
        (B | {"cost": {"price_per_call": "0.00000000001"}}, ["body", "cost", "price_per_call"]),
        (B | {"cost": {"expected_input_tokens": -1}}, ["body", "cost", "expected_input_tokens"]),
        (B | {"cost": {"expected_latency_ms": float("nan")}}, ["body", "cost", "expected_latency_ms"]),
        (B | {"cost": {"cost_unit": "dollars"}}, ["body", "cost", "cost_unit"]),
        (B | {"supports_logprobs": "maybe"}, ["body", "supports_logprobs"]),
        (B | {"supports_logprobs": True, "contract": "vllm"}, ["body", "supports_logprobs"]),
        (B | {"visibility": "public"}, ["body", "visibility"]),
        (B | {"owner": "other-tenant"}, ["body", "owner"]),
        (B | {"owner_tenant_id": str(uuid.uuid4())}, ["body", "owner_tenant_id"]),
        (B | {"api_key": "k"}, ["body", "api_key"]),  # a Triton endpoint takes no key
        (B | {"backend": "openai_compatible", "endpoint": "http://127.0.0.1:9", "api_key": ""}, ["body", "api_key"]),
        (B | {"backend": "openai_compatible", "endpoint": "http://127.0.0.1:9", "api_key": "k" * 4097}, ["body", "api_key"]),
        (B | {"id": str(uuid.uuid4())}, ["body", "id"]),
        (B | {"active": False}, ["body", "active"]),
    ],
)  # fmt: skip
def test_bad_registration_fields_are_a_422_naming_the_field(gateway, t, db, body, loc):
    with db.connect() as c:
        before = c.execute(text("SELECT count(*) FROM models")).scalar()
    r = register(
        gateway, t["a"]["admin"], body | {"name": body["name"] if body["name"] != "bounds" else unique("bounds")}, probe="false"
    )
    assert r.status_code == 422, r.text
    assert first(r)["loc"][: len(loc)] == loc, r.text
    with db.connect() as c:
        assert c.execute(text("SELECT count(*) FROM models")).scalar() == before


@pytest.mark.parametrize(
    "content",
    [
        b"[]",
        b"null",
        b"5",
        b'"x"',
        b"{",
        b'{"name": "x"',
        b"[" * 100_000,
        b'{"name": "\\ud800", "endpoint": "grpc://127.0.0.1:1"}',
    ],
)
def test_malformed_bodies_are_4xx(gateway, t, content):
    r = gateway.post("/v1/models", content=content, headers=t["a"]["admin"] | {"content-type": "application/json"})
    assert 400 <= r.status_code < 500, r.text


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"description": "d" * 2001}, ["body", "description"]),
        ({"max_in_flight": 0}, ["body", "max_in_flight"]),
        ({"decoding_defaults": {"temperature": float("nan")}}, ["body", "decoding_defaults", "temperature"]),
        ({"cost": {"price_per_gpu_second": "-0.1"}}, ["body", "cost", "price_per_gpu_second"]),
        ({"visibility": "site"}, ["body", "visibility"]),
        ({"endpoint": None}, ["body", "endpoint"]),
        ({"endpoint": "http://169.254.169.254"}, ["body", "endpoint"]),
        ({"api_key": "k"}, ["body", "api_key"]),
        ({"api_key_ref": "UEP_INTERNAL_TOKEN"}, ["body", "api_key_ref"]),
        ({"name": "renamed"}, ["body", "name"]),
        ({"owner": "site"}, ["body", "owner"]),
        ({"kind": "ranking"}, ["body", "kind"]),
        ({"spec": {"class_names": ["a", "b"]}}, ["body", "spec"]),
    ],
)
def test_bad_changes_are_a_422_naming_the_field(gateway, t, body, loc):
    name = unique("patch")
    h = t["a"]["admin"]
    assert register(gateway, h, {"name": name, "endpoint": "grpc://127.0.0.1:1"}, probe="false").status_code == 201
    r = gateway.patch(
        f"/v1/models/{name}@1",
        content=json.dumps(body),
        headers=h | {"content-type": "application/json"},
        params={"probe": "false"},
    )
    assert r.status_code == 422 and first(r)["loc"][: len(loc)] == loc, r.text
    after = gateway.get(f"/v1/models/{name}@1", headers=h).json()
    assert (after["description"], after["endpoint"], after["visibility"]) == ("", "grpc://127.0.0.1:1", "private")


@pytest.mark.parametrize("ref", ["a" * 201, "x@" + "v" * 101, "a@b@c", "a%00b", "%F0%9F%98%80", "a b", "a%20b"])
def test_bad_model_refs_in_the_path_are_4xx(gateway, t, ref):
    for method in ("GET", "PATCH", "DELETE"):
        r = gateway.request(method, f"/v1/models/{ref}", headers=t["a"]["admin"], json={} if method == "PATCH" else None)
        assert 400 <= r.status_code < 500, (method, ref, r.text)


# ------------------------------------------------------------------------------------------- concurrency


def test_concurrent_registrations_of_one_name_and_version(stack, t, db):
    name = unique("race")
    headers = t["a"]["admin"]

    def post(_i: int) -> httpx.Response:
        with httpx.Client(base_url=stack.gateway_url, timeout=60, headers=headers) as client:
            return client.post("/v1/models", json={"name": name, "endpoint": "grpc://127.0.0.1:1"}, params={"probe": "false"})

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(post, range(8)))
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [201] + [409] * 7, [r.text for r in answers]
    assert {first(r)["type"] for r in answers if r.status_code == 409} == {"model_exists"}
    with db.connect() as c:
        assert c.execute(text("SELECT count(*) FROM models WHERE name = :n"), {"n": name}).scalar() == 1

    # a shared name raced by two tenants: at most one of them shares it
    shared = unique("race-shared")

    def share(who: str) -> httpx.Response:
        with httpx.Client(base_url=stack.gateway_url, timeout=60, headers=t[who]["admin"]) as client:
            body = {"name": shared, "endpoint": "grpc://127.0.0.1:1", "visibility": "shared"}
            return client.post("/v1/models", json=body, params={"probe": "false"})

    with ThreadPoolExecutor(2) as pool:
        both = list(pool.map(share, ["a", "b"]))
    assert all(r.status_code in (201, 409) for r in both), [r.text for r in both]


# ------------------------------------------------------------------------------------- the rules alone


@pytest.mark.parametrize(
    ("address", "blocked"),
    [
        ("169.254.169.254", True),
        ("::ffff:169.254.169.254", True),
        ("64:ff9b::a9fe:a9fe", True),  # NAT64 (RFC 6052)
        ("64:ff9b:1::a9fe:a9fe", True),  # local-use NAT64 (RFC 8215)
        ("::a9fe:a9fe", True),  # IPv4-compatible
        ("2002:a9fe:a9fe::", True),  # 6to4
        ("2001:0:4136:e378:8000:63bf:5601:5601", True),  # Teredo, client 169.254.169.254 (bits inverted)
        ("fe80::1%eth0", True),
        ("::", True),
        ("::1", False),  # loopback is allowed (a local stack)
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("64:ff9b::a01:203", False),  # NAT64 of 10.1.2.3
        ("2606:4700::1111", False),
    ],
)
def test_addresses_that_carry_a_metadata_address_are_blocked(address, blocked):
    from uep_common.registry.model_registry import _blocked

    assert _blocked(address) is blocked


@pytest.mark.parametrize(
    ("metadata", "config"),
    [
        ({"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": ["²"]}]}, None),
        ({"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": ["9" * 5000]}]}, None),
        ({"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [10**40]}]}, None),
        ({"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [True]}]}, None),
        ({"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [1] * 10_000}]}, None),
        ({"inputs": "x", "outputs": {"a": 1}}, {"max_batch_size": "-5", "input": 5}),
        ({"inputs": [{"name": "extra", "datatype": "BYTES", "shape": [1]}]}, {"input": [{"name": "extra", "optional": "yes"}]}),
    ],
)
def test_malformed_model_metadata_is_a_list_of_problems(metadata, config):
    from uep_common.contract.model_contracts import check_metadata

    problems = check_metadata("generation", "uep", {}, metadata, config)
    assert problems and all(isinstance(p, str) and p.startswith("tensor '") for p in problems), problems


def test_a_one_digit_shape_still_matches():
    from uep_common.contract.model_contracts import check_metadata

    names = [("text_input", "BYTES"), ("max_tokens", "INT32"), ("temperature", "FP32"), ("stop", "BYTES"), ("chat", "INT32")]
    outs = [("text_output", "BYTES"), ("prompt_tokens", "INT32"), ("completion_tokens", "INT32")]
    metadata = {
        "inputs": [{"name": n, "datatype": d, "shape": ["-1", "1"]} for n, d in names],
        "outputs": [{"name": n, "datatype": d, "shape": [-1, 1]} for n, d in outs],
    }
    assert check_metadata("generation", "uep", {}, metadata, {"max_batch_size": 8}) == []


def test_a_tenant_owns_a_bounded_number_of_models(stack, gateway, db):
    from sqlalchemy.orm import Session

    from uep_common.registry.model_registry import MAX_TENANT_MODELS, ModelCreate, registration_values
    from uep_common.tables.models import Model

    slug = unique("atk-many")
    h = tenant_headers(stack, slug, "admin")
    with db.connect() as c:
        tenant_id = c.execute(text("SELECT id FROM tenants WHERE slug = :s"), {"s": slug}).scalar_one()
    with Session(db) as s:
        for i in range(MAX_TENANT_MODELS - 1):
            reg = ModelCreate(name=f"bulk-{i}", endpoint="grpc://127.0.0.1:1")
            s.add(Model(**registration_values(reg, "uep", {}, owner_tenant_id=tenant_id, created_by="test", secret_key=None)))
        s.commit()
    body = {"endpoint": "grpc://127.0.0.1:1"}
    assert register(gateway, h, body | {"name": "the-last"}, probe="false").status_code == 201
    r = register(gateway, h, body | {"name": "one-too-many"}, probe="false")
    assert (r.status_code, first(r)["loc"], first(r)["type"]) == (409, ["body", "name"], "too_many_models"), r.text
    assert gateway.delete("/v1/models/the-last@1", headers=h).status_code == 204
    assert register(gateway, h, body | {"name": "one-too-many"}, probe="false").status_code == 201
