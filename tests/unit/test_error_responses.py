"""The gateway's domain errors carry a kind; :mod:`uep_gateway.error_responses` alone turns it into a status.
A small app with the real handler answers each kind with its status (RFC 9110 section 15, RFC 6585 section
4 for 429) and the body and headers the error holds."""

from __future__ import annotations

from typing import get_args

import pytest
from fastapi import FastAPI
from starlette.testclient import TestClient

from uep_gateway.error_responses import STATUS_OF_KIND, install, status_of
from uep_gateway.errors import DomainError, FieldError, Kind, refusal_kind

EXPECTED = {
    "invalid": 422,
    "not_found": 404,
    "conflict": 409,
    "forbidden": 403,
    "unauthenticated": 401,
    "gone": 410,
    "too_large": 413,
    "rate_limited": 429,
    "over_budget": 402,
    "unavailable": 503,
}


def test_every_kind_has_its_own_status():
    assert set(get_args(Kind)) == set(STATUS_OF_KIND) == set(EXPECTED)
    assert STATUS_OF_KIND == EXPECTED


@pytest.mark.parametrize("number", [402, 403, 404, 409, 422, 429])
def test_a_shared_library_refusal_keeps_its_status(number):
    # WorkLimitRefused, BudgetRefused and RegistryError still say what they are by number
    assert status_of(FieldError(refusal_kind(number), ("body", "x"), "no", "refused")) == number


@pytest.fixture(scope="module")
def client():
    app = FastAPI()
    install(app)

    @app.get("/one/{kind}")
    async def one(kind: str) -> None:
        raise FieldError(kind, ("path", "kind"), f"refused as {kind}", f"{kind}_here", headers={"Retry-After": "7"})  # type: ignore[arg-type]

    @app.get("/many")
    async def many() -> None:
        raise DomainError(
            "invalid", [{"loc": ["body", "a"], "msg": "m1", "type": "t1"}, {"loc": ["body", "b"], "msg": "m2", "type": "t2"}]
        )

    return TestClient(app)


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_a_field_error_answers_its_kinds_status_body_and_headers(client, kind):
    r = client.get(f"/one/{kind}")
    assert r.status_code == EXPECTED[kind]
    assert r.json() == {"detail": [{"loc": ["path", "kind"], "msg": f"refused as {kind}", "type": f"{kind}_here"}]}
    assert r.headers["Retry-After"] == "7"


def test_a_domain_error_lists_every_problem(client):
    r = client.get("/many")
    assert r.status_code == 422
    assert [(p["loc"], p["type"]) for p in r.json()["detail"]] == [(["body", "a"], "t1"), (["body", "b"], "t2")]
