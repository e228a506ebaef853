"""The model registry through the API, on the real stack: registration probed against the test stack's Triton
(the model server's ``uep_oracle``, which speaks the generation/uep contract: inputs ``text_input``,
``max_tokens``, ``temperature``, ``stop``, ``chat``; outputs ``text_output``, ``prompt_tokens``,
``completion_tokens``), tenant isolation, roles, API keys, deactivation and an evaluation of a registered model.

The oracle answers a built-in item correctly iff ``ordinal % 3 != 2`` (deploy/model-server oracle.py), so its
first 6 GSM8K items score 4/6, whichever name it is registered under.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from integration.helpers import tenant_headers, wait_done
from uep_common.registry.model_registry import decrypt_api_key

SITE = {"X-UEP-Site-Admin": "true"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def triton(stack) -> str:
    return f"http://127.0.0.1:{stack.triton_http}"


@pytest.fixture(scope="module")
def tenants(stack):
    """Two tenants, A and B, with a key per role: {"a": {role: headers}, "b": {...}}."""
    a, b = unique("reg-a"), unique("reg-b")
    return {
        name: {role: tenant_headers(stack, slug, role) for role in ("admin", "builder", "viewer")}
        for name, slug in (("a", a), ("b", b))
    }


def oracle_body(name: str, triton: str, **extra) -> dict:
    return {
        "name": name,
        "kind": "generation",
        "backend": "triton",
        "endpoint": triton,
        "triton_model_name": "uep_oracle",
    } | extra


def register(gateway: httpx.Client, headers: dict, body: dict, **params) -> httpx.Response:
    return gateway.post("/v1/models", json=body, headers=headers, params=params)


def first(r: httpx.Response) -> dict:
    detail = r.json()["detail"]
    assert isinstance(detail, list) and detail, r.text
    return detail[0]


def test_registration_probes_the_model_and_shows_the_registry_fields(gateway, tenants, triton):
    name = unique("oracle-a")
    r = register(gateway, tenants["a"]["builder"], oracle_body(name, triton, max_in_flight=4, description="mine"))
    assert r.status_code == 201, r.text
    m = r.json()
    assert r.headers["Location"] == f"/v1/models/{name}@1"
    assert (m["kind"], m["contract"], m["backend"], m["triton_model_name"]) == ("generation", "uep", "triton", "uep_oracle")
    assert (m["visibility"], m["owned"], m["active"], m["has_api_key"], m["max_in_flight"]) == ("private", True, True, False, 4)
    assert m["cost"]["cost_unit"] == "none" and m["created_by"].startswith("key:")
    got = gateway.get(f"/v1/models/{name}", headers=tenants["a"]["viewer"])
    assert got.status_code == 200 and got.json() == m
    assert gateway.get(f"/v1/models/{name}@1", headers=tenants["a"]["viewer"]).json()["id"] == m["id"]
    listed = gateway.get("/v1/models", headers=tenants["a"]["viewer"]).json()
    assert m["id"] in [x["id"] for x in listed] and "uep-oracle" in [x["name"] for x in listed]  # own and site
    # the same (name, version) twice in one tenant; a site model's name
    again = register(gateway, tenants["a"]["builder"], oracle_body(name, triton))
    assert (again.status_code, first(again)["loc"], first(again)["type"]) == (409, ["body", "version"], "model_exists")
    site = register(gateway, tenants["a"]["builder"], oracle_body("uep-oracle", triton))
    assert (site.status_code, first(site)["loc"], first(site)["type"]) == (409, ["body", "name"], "name_taken")
    # the writes are in the audit log
    audit = gateway.get("/v1/audit", headers=tenants["a"]["admin"], params={"limit": 200}).json()
    actions = [e["action"] for e in (audit["items"] if isinstance(audit, dict) else audit)]
    assert "registerModel" in actions


def test_a_model_that_does_not_speak_its_contract_is_refused_naming_the_tensor(gateway, tenants, triton):
    body = oracle_body(unique("oracle-cls"), triton, kind="classification", spec={"class_names": ["yes", "no"]})
    r = register(gateway, tenants["a"]["builder"], body)
    assert r.status_code == 422, r.text
    problems = r.json()["detail"]
    assert {tuple(p["loc"]) for p in problems} == {("body", "contract")}
    msgs = [p["msg"] for p in problems]
    assert "tensor 'text': the model has no input 'text' (BYTES)" in msgs
    assert "tensor 'probabilities': the model has no output 'probabilities' (FP32)" in msgs
    # a Triton model name the server does not serve
    r = register(gateway, tenants["a"]["builder"], oracle_body(unique("ghost"), triton, triton_model_name="no_such_model"))
    assert (r.status_code, first(r)["loc"]) == (422, ["body", "triton_model_name"])


def test_unreachable_and_refused_endpoints_are_named(gateway, tenants):
    builder = tenants["a"]["builder"]
    for endpoint, kind in [
        ("http://127.0.0.1:9", "unreachable"),  # nothing listens on the discard port
        ("http://169.254.169.254", "blocked_address"),  # the cloud metadata service
        ("file:///etc/passwd", "bad_scheme"),
    ]:
        r = register(gateway, builder, oracle_body(unique("bad"), endpoint))
        assert (r.status_code, first(r)["loc"], first(r)["type"]) == (422, ["body", "endpoint"], kind), r.text


def test_another_tenants_private_model_is_invisible_everywhere(gateway, tenants, triton):
    name = unique("private")
    assert register(gateway, tenants["a"]["builder"], oracle_body(name, triton)).status_code == 201
    b = tenants["b"]["admin"]
    for method, path in [
        ("GET", f"/v1/models/{name}"),
        ("GET", f"/v1/models/{name}@1"),
        ("PATCH", f"/v1/models/{name}@1"),
        ("POST", f"/v1/models/{name}@1/deactivate"),
        ("POST", f"/v1/models/{name}@1/reactivate"),
        ("DELETE", f"/v1/models/{name}@1"),
    ]:
        r = gateway.request(method, path, headers=b, json={"description": "x"} if method == "PATCH" else None)
        assert (r.status_code, first(r)["loc"], first(r)["type"]) == (404, ["path", "model_ref"], "unknown_model"), (method, path)
    assert name not in [m["name"] for m in gateway.get("/v1/models", headers=b).json()]
    r = gateway.post("/v1/evaluations", json={"benchmark": "gsm8k", "model": name, "sample_limit": 1}, headers=b)
    assert (r.status_code, first(r)["loc"], first(r)["type"]) == (422, ["body", "model"], "unknown_model")
    # the same name is free for B (models are unique per owner), and each tenant then gets its own
    mine = register(gateway, tenants["b"]["builder"], oracle_body(name, triton, description="B's"))
    assert mine.status_code == 201, mine.text
    assert gateway.get(f"/v1/models/{name}", headers=b).json()["description"] == "B's"


def test_a_shared_model_is_evaluated_by_another_tenant_but_changed_only_by_its_owner(gateway, tenants, triton):
    name = unique("shared")
    assert register(gateway, tenants["a"]["builder"], oracle_body(name, triton, visibility="shared")).status_code == 201
    b = tenants["b"]["builder"]
    seen = gateway.get(f"/v1/models/{name}", headers=b).json()
    assert (seen["visibility"], seen["owned"], seen["created_by"]) == ("shared", False, None)
    ev = gateway.post("/v1/evaluations", json={"benchmark": "gsm8k", "model": f"{name}@1", "sample_limit": 3}, headers=b)
    assert ev.status_code == 202, ev.text
    r = gateway.patch(f"/v1/models/{name}@1", json={"description": "taken"}, headers=b)
    assert (r.status_code, first(r)["type"]) == (403, "not_owner")
    # B has an evaluation of it: A may not make it private any more, nor delete it
    wait_done(gateway, ev.json()["id"], headers=b)
    r = gateway.patch(f"/v1/models/{name}@1", json={"visibility": "private"}, headers=tenants["a"]["builder"])
    assert (r.status_code, first(r)["type"]) == (409, "model_in_use")
    r = gateway.delete(f"/v1/models/{name}@1", headers=tenants["a"]["builder"])
    assert (r.status_code, first(r)["type"]) == (409, "model_has_evaluations")


def test_a_deactivated_model_takes_no_new_evaluation(gateway, tenants, triton):
    name = unique("retired")
    a = tenants["a"]["builder"]
    assert register(gateway, a, oracle_body(name, triton)).status_code == 201
    r = gateway.post(f"/v1/models/{name}@1/deactivate", headers=a)
    assert r.status_code == 200 and r.json()["active"] is False
    r = gateway.post("/v1/evaluations", json={"benchmark": "gsm8k", "model": name, "sample_limit": 1}, headers=a)
    assert (r.status_code, first(r)["loc"], first(r)["type"]) == (422, ["body", "model"], "model_inactive")
    assert gateway.get("/v1/models", headers=a, params={"active": "false"}).json()[0]["active"] is False
    assert gateway.post(f"/v1/models/{name}@1/reactivate", headers=a).json()["active"] is True
    r = gateway.post("/v1/evaluations", json={"benchmark": "gsm8k", "model": name, "sample_limit": 1}, headers=a)
    assert r.status_code == 202, r.text
    # a write needs the version
    r = gateway.post(f"/v1/models/{name}/deactivate", headers=a)
    assert (r.status_code, first(r)["type"]) == (422, "version_required")


def test_roles(gateway, tenants, triton):
    viewer, builder = tenants["a"]["viewer"], tenants["a"]["builder"]
    r = register(gateway, viewer, oracle_body(unique("viewer"), triton))
    assert (r.status_code, first(r)["loc"]) == (403, ["header", "Authorization"])
    # builders' registrations are always probed; a tenant admin may skip the probe
    r = register(gateway, builder, oracle_body(unique("noprobe"), "grpc://127.0.0.1:1"), probe="false")
    assert (r.status_code, first(r)["loc"]) == (403, ["query", "probe"])
    r = register(gateway, tenants["a"]["admin"], oracle_body(unique("noprobe"), "grpc://127.0.0.1:1"), probe="false")
    assert r.status_code == 201, r.text
    # a site model needs a site admin acting across tenants
    r = register(gateway, tenants["a"]["admin"], oracle_body(unique("site"), triton, owner="site"))
    assert (r.status_code, first(r)["loc"]) == (403, ["body", "owner"])
    site_name = unique("site")
    r = gateway.post("/v1/models", json=oracle_body(site_name, triton, owner="site"), headers=SITE)
    assert r.status_code == 201 and r.json()["visibility"] == "site", r.text
    seen = gateway.get(f"/v1/models/{site_name}", headers=tenants["b"]["viewer"]).json()
    assert (seen["visibility"], seen["owned"]) == ("site", False)
    r = gateway.post(f"/v1/models/{site_name}@1/deactivate", headers=tenants["b"]["admin"])
    assert (r.status_code, first(r)["type"]) == (403, "not_owner")


def test_the_api_key_is_stored_encrypted_and_never_returned(gateway, tenants, stack, db):
    secret = "sk-" + uuid.uuid4().hex
    name = unique("openai")
    body = {"name": name, "backend": "openai_compatible", "endpoint": "http://127.0.0.1:9", "api_key": secret}
    admin = tenants["a"]["admin"]
    answers = [register(gateway, admin, body, probe="false")]
    assert answers[0].status_code == 201, answers[0].text
    assert answers[0].json()["has_api_key"] is True and answers[0].json()["contract"] == "openai"
    answers += [
        gateway.get(f"/v1/models/{name}", headers=admin),
        gateway.get("/v1/models", headers=admin),
        gateway.patch(f"/v1/models/{name}@1", json={"description": "rotated", "api_key": secret + "2"}, headers=admin),
    ]
    for r in answers:
        assert r.status_code in (200, 201) and secret not in r.text, r.text
    with db.begin() as c:
        stored = c.execute(text("SELECT api_key_encrypted FROM models WHERE name = :n"), {"n": name}).scalar_one()
    assert secret.encode() not in bytes(stored)
    assert decrypt_api_key(bytes(stored), stack.model_secret_key()) == secret + "2"
    cleared = gateway.patch(f"/v1/models/{name}@1", json={"api_key": None}, headers=admin)
    assert cleared.json()["has_api_key"] is False
    # an unreachable OpenAI-compatible endpoint, probed, is named
    r = register(gateway, tenants["a"]["builder"], body | {"name": unique("openai")})
    assert (r.status_code, first(r)["loc"]) == (422, ["body", "endpoint"])


def test_patch_and_delete(gateway, tenants, triton):
    name = unique("patched")
    a = tenants["a"]["builder"]
    assert register(gateway, a, oracle_body(name, triton)).status_code == 201
    r = gateway.patch(
        f"/v1/models/{name}@1",
        json={
            "description": "changed",
            "max_in_flight": 2,
            "decoding_defaults": {"max_tokens": 32, "temperature": 0.5, "stop": ["\n"]},
            "cost": {"cost_unit": "call", "price_per_call": "0.01"},
            "visibility": "shared",
        },
        headers=a,
    )
    assert r.status_code == 200, r.text
    m = r.json()
    assert (m["description"], m["max_in_flight"], m["visibility"]) == ("changed", 2, "shared")
    assert m["decoding_defaults"] == {"max_tokens": 32, "temperature": 0.5, "stop": ["\n"]}
    assert (m["cost"]["cost_unit"], m["cost"]["price_per_call"], m["cost"]["expected_input_tokens"]) == ("call", 0.01, 500)
    r = gateway.patch(f"/v1/models/{name}@1", json={"max_in_flight": 5000}, headers=a)
    assert (r.status_code, first(r)["loc"]) == (422, ["body", "max_in_flight"])
    r = gateway.patch(f"/v1/models/{name}@1", json={"endpoint": "http://127.0.0.1:9"}, headers=a)
    assert (r.status_code, first(r)["loc"]) == (422, ["body", "endpoint"])
    assert gateway.delete(f"/v1/models/{name}@1", headers=a).status_code == 204
    assert gateway.get(f"/v1/models/{name}", headers=a).status_code == 404


def test_a_registered_model_is_evaluated_end_to_end(gateway, tenants, triton):
    name = unique("my-oracle")
    a = tenants["a"]["builder"]
    assert register(gateway, a, oracle_body(name, triton, max_in_flight=8)).status_code == 201
    r = gateway.post("/v1/evaluations", json={"benchmark": "gsm8k", "model": name, "sample_limit": 6}, headers=a)
    assert r.status_code == 202, r.text
    done = wait_done(gateway, r.json()["id"], headers=a)
    assert done["status"] == "completed", done
    assert done["model"]["name"] == name
    assert (done["summary"]["correct"], done["summary"]["scored"]) == (4, 6)


def test_uep_admin_models(stack, tenants, triton):
    env = {**os.environ, "UEP_DATABASE_URL": stack.database_url, "UEP_MODEL_EGRESS_ALLOW": "127.0.0.0/8,::1"}
    admin = str(Path(sys.executable).with_name("uep-admin"))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([admin, "models", *args], env=env, capture_output=True, text=True, timeout=60)

    name = unique("admin-oracle")
    r = run("add", "--name", name, "--endpoint", triton, "--triton-name", "uep_oracle")
    assert r.returncode == 0 and r.stdout.strip() == f"{name}@1 (generation/uep, site): registered", r.stderr
    r = run("add", "--name", unique("admin-cls"), "--endpoint", triton, "--triton-name", "uep_oracle", "--kind",
            "classification", "--class-names", "a,b")  # fmt: skip
    assert r.returncode == 2 and r.stderr.startswith("error: contract: tensor 'text'"), r.stderr
    assert f"{name}@1\tgeneration/uep\ttriton\t{triton}\tactive" in run("list").stdout
    assert run("disable", f"{name}@1").stdout.strip() == f"{name}@1: disabled"
    assert run("enable", f"{name}@1").stdout.strip() == f"{name}@1: active"
