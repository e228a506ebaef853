"""The published contract (``/openapi.json``, ``/docs``, ``/redoc``) of the gateway app, built without its
lifespan (no database, broker or Redis): security schemes on every non-public operation, the shared error
responses on every ``/v1`` operation, unique operation ids from the role matrix, and docs pages that load no
asset from outside the app."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from uep_gateway.access import entry
from uep_gateway.app import create_app
from uep_gateway.openapi_contract import contract

METHODS = {"get", "put", "post", "delete", "patch"}
ERRORS = {"401", "403", "404", "409", "422", "429"}
URL = re.compile(r"""(?:https?:)?//[\w.-]+""")


@pytest.fixture(scope="module")
def client():
    # Not entered as a context manager: the lifespan (database, broker) is not started.
    return TestClient(create_app())


@pytest.fixture(scope="module")
def schema(client):
    response = client.get("/openapi.json")
    assert response.status_code == 200
    return response.json()


def operations(schema):
    for path, item in schema["paths"].items():
        for method, op in item.items():
            if method in METHODS:
                yield method.upper(), path, op


def test_every_operation_is_in_the_matrix_with_a_unique_id(schema):
    ops = list(operations(schema))
    assert len(ops) >= 60
    ids = [op["operationId"] for _, _, op in ops]
    assert len(ids) == len(set(ids))
    for method, path, op in ops:
        assert op["operationId"] == entry(method, path).op, (method, path)


def test_security_schemes_and_requirements(schema):
    schemes = schema["components"]["securitySchemes"]
    assert schemes["apiKey"]["type"] == "http" and schemes["apiKey"]["scheme"] == "bearer"
    assert schemes["session"] == {**schemes["session"], "type": "apiKey", "in": "cookie", "name": "uep_session"}
    assert "X-CSRF-Token" in schemes["session"]["description"]
    public = {(m, p) for m, p, op in operations(schema) if entry(m, p).public}
    assert ("POST", "/v1/auth/login") in public or ("GET", "/healthz") in public
    for method, path, op in operations(schema):
        headers = {p["name"] for p in op.get("parameters", []) if p["in"] == "header"}
        if (method, path) in public:
            assert op["security"] == [], (method, path)
            assert "X-UEP-Site-Admin" not in headers
        else:
            assert op["security"] == [{"apiKey": []}, {"session": []}], (method, path)
            assert {"X-UEP-Tenant", "X-UEP-Site-Admin"} <= headers, (method, path)


def test_every_v1_operation_documents_the_shared_errors(schema):
    error = schema["components"]["schemas"]["Error"]
    assert error["required"] == ["detail"]
    assert error["properties"]["detail"]["items"] == {"$ref": "#/components/schemas/FieldError"}
    assert schema["components"]["schemas"]["FieldError"]["required"] == ["loc", "msg", "type"]
    checked = 0
    for method, path, op in operations(schema):
        if not path.startswith("/v1/"):
            continue
        responses = op["responses"]
        wanted = ERRORS | ({"413"} if "requestBody" in op else set())
        assert wanted <= set(responses), (method, path, sorted(responses))
        for status in wanted - {"422"}:
            assert responses[status]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
        refs = responses["422"]["content"]["application/json"]["schema"]["anyOf"]
        assert {"$ref": "#/components/schemas/Error"} in refs
        assert {"$ref": "#/components/schemas/HTTPValidationError"} in refs
        assert "Retry-After" in responses["429"]["headers"]
        checked += 1
    assert checked >= 55


def test_contract_refuses_a_repeated_operation_id():
    op = {"operationId": "getEvaluation", "responses": {}}
    repeated = {
        "paths": {
            "/v1/evaluations/{evaluation_id}": {"get": dict(op)},
            "/v1/evaluations/{evaluation_id}/results": {"get": dict(op)},
        }
    }
    with pytest.raises(RuntimeError, match="operationId"):
        contract(repeated)
    with pytest.raises(LookupError, match="no entry"):
        contract({"paths": {"/v1/nowhere": {"get": {"operationId": "x"}}}})


@pytest.mark.parametrize(
    ("page", "assets"), [("/docs", ("swagger-ui-bundle.js", "swagger-ui.css")), ("/redoc", ("redoc.standalone.js",))]
)
def test_docs_pages_load_no_external_asset(client, page, assets):
    response = client.get(page)
    assert response.status_code == 200
    html = response.text
    assert URL.findall(html) == [], URL.findall(html)
    assert "/openapi.json" in html
    for asset in assets:
        url = f"/static-offline-docs/{asset}"
        assert url in html
        served = client.get(url)
        assert served.status_code == 200
        assert len(served.content) > 100_000
