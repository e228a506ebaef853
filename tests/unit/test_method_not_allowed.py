"""A 405 names every method of the path in ``Allow``: FastAPI makes one route per method, and Starlette's own
405 listed only the methods of the first route whose path matched (``PUT /v1/models/x`` answered
``Allow: GET`` though PATCH and DELETE are routes of that path too). Routing needs no server: the app is
built without its lifespan."""

from __future__ import annotations

import re
import uuid
from collections import defaultdict

import pytest
from starlette.testclient import TestClient

from uep_gateway.access import ROUTES
from uep_gateway.app import create_app

CANDIDATES = ("PUT", "PATCH", "DELETE", "POST", "GET")


def _paths() -> dict[str, set[str]]:
    by_path: dict[str, set[str]] = defaultdict(set)
    for method, path in ROUTES:
        by_path[path].add(method)
    return by_path


def _concrete(path: str) -> str:
    """``path`` with each parameter replaced by a UUID (no literal segment of another route is one)."""
    return re.sub(r"{[^}]+}", str(uuid.UUID(int=7)), path)


@pytest.fixture(scope="module")
def client():
    # without the lifespan a call that passes routing fails in its dependencies (500): only 405 matters here
    return TestClient(create_app(), raise_server_exceptions=False)


@pytest.mark.parametrize(("path", "methods"), sorted(_paths().items()))
def test_405_allow_lists_every_method_of_the_path(client, path, methods):
    url = _concrete(path)
    routed = {m for m in CANDIDATES if client.request(m, url).status_code != 405}
    assert methods <= routed, (path, routed)
    refused = next(m for m in CANDIDATES if m not in routed)
    r = client.request(refused, url)
    assert r.status_code == 405, (refused, path, r.status_code)
    allowed = r.headers["Allow"].split(", ")
    # every method that is routed at this URL, and only those (GET /v1/evaluations/estimate is routed to
    # getEvaluation, which answers 422 for the id)
    assert set(allowed) - {"HEAD"} == routed, (path, allowed)
    assert r.json()["detail"] == [{"loc": ["method"], "msg": "Method Not Allowed", "type": "method_not_allowed"}]


def test_allow_of_a_path_with_three_methods(client):
    r = client.put("/v1/models/some-model")
    assert r.status_code == 405
    assert r.headers["Allow"] == "GET, PATCH, DELETE"
    r = client.post(f"/v1/schedules/{uuid.uuid4()}")
    assert r.headers["Allow"] == "GET, DELETE"
    r = client.put(f"/v1/evaluations/{uuid.uuid4()}/pin")
    assert r.headers["Allow"] == "POST, DELETE"
