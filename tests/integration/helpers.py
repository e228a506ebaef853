"""Helpers for tests against the running stack."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def private_broker_config(port_offset: int, name: str):
    """A ``uep_stack.StackConfig`` for a Kafka broker of a test's own, on ``UEP_TEST_PORT_BASE + port_offset``
    (its controller on the next port; beside the test stack's broker at +9092), its state under
    ``.run/<test run>/<name>``."""
    import uep_stack

    port = int(os.environ.get("UEP_TEST_PORT_BASE", "10000")) + port_offset
    run_dir = ROOT / ".run" / os.environ.get("UEP_TEST_RUN_NAME", "test") / name
    return dataclasses.replace(uep_stack.config(), broker_port=port, controller_port=port + 1, run_dir=run_dir)


def fresh_database(stack, name: str) -> str:
    """Drop, create and migrate database ``name`` on the stack's PostgreSQL (a test's own: the stack's relays
    would otherwise act on its rows); returns its URL."""
    from sqlalchemy import text

    from uep_common.admin import create_database, migrate
    from uep_common.runtime.session import make_sync_engine

    server = stack.database_url.rsplit("/", 1)[0]
    engine = make_sync_engine(f"{server}/postgres")
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    engine.dispose()
    url = f"{server}/{name}"
    create_database(url)
    migrate(url)
    return url


def tenant_headers(stack, slug: str, role: str = "admin", **limits) -> dict[str, str]:
    """``Authorization`` header of a fresh ``role`` API key of tenant ``slug`` (created if missing; ``limits``
    set its own work-limit columns, e.g. ``max_queued_items=10``)."""
    from sqlalchemy import text

    from uep_common.admin import create_api_key, create_tenant
    from uep_common.runtime.session import make_sync_engine

    create_tenant(stack.database_url, slug)
    if limits:
        engine = make_sync_engine(stack.database_url)
        try:
            with engine.begin() as c:
                sets = ", ".join(f"{k} = :{k}" for k in limits)
                c.execute(text(f"UPDATE tenants SET {sets} WHERE slug = :slug"), {"slug": slug, **limits})
        finally:
            engine.dispose()
    return {"Authorization": f"Bearer {create_api_key(stack.database_url, slug, role, f'test {role}')}"}


def submit(gateway: httpx.Client, **body) -> str:
    """POST /v1/evaluations; asserts 202 and returns the evaluation id."""
    r = gateway.post("/v1/evaluations", json=body)
    assert r.status_code == 202, r.text
    return r.json()["id"]


def wait_done(gateway: httpx.Client, evaluation_id: str, timeout_s: float = 120, headers: dict | None = None) -> dict:
    """Poll GET /v1/evaluations/{id} (with ``headers``, e.g. another tenant's key) until a terminal status;
    returns the final body."""
    deadline = time.monotonic() + timeout_s
    body: dict = {}
    while time.monotonic() < deadline:
        r = gateway.get(f"/v1/evaluations/{evaluation_id}", headers=headers)
        assert r.status_code == 200, r.text
        body = r.json()
        if body["status"] in ("completed", "failed", "cancelled"):
            return body
        time.sleep(0.2)
    raise AssertionError(f"evaluation {evaluation_id} not finished after {timeout_s} s: {body}")


def all_results(gateway: httpx.Client, evaluation_id: str, page: int = 100, headers: dict | None = None) -> list[dict]:
    """Every result of an evaluation, following next_cursor (with ``headers``, e.g. another tenant's key)."""
    items, cursor = [], None
    while True:
        params = {"limit": page} | ({"cursor": cursor} if cursor else {})
        r = gateway.get(f"/v1/evaluations/{evaluation_id}/results", params=params, headers=headers)
        assert r.status_code == 200, r.text
        items += r.json()["items"]
        cursor = r.json()["next_cursor"]
        if not cursor:
            return items


def register_model(db, endpoint: str, triton_model_name: str, prefix: str, max_in_flight: int | None = None) -> str:
    """Insert a Triton model row with a unique name (there is no registration API yet); returns its name."""
    import uuid

    from sqlalchemy import text

    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    with db.begin() as c:
        c.execute(
            text(
                "INSERT INTO models (id, name, version, description, backend, endpoint, triton_model_name, "
                "decoding_defaults, supports_logprobs, max_in_flight) VALUES (:id, :n, '1', 'registered by a test', "
                "'triton', :ep, :tm, '{}', false, :cap)"
            ),
            {"id": uuid.uuid4(), "n": name, "ep": endpoint, "tm": triton_model_name, "cap": max_in_flight},
        )
    return name
