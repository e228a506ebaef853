"""The published API contract: the OpenAPI document's security schemes, error responses and offline docs.

FastAPI generates the document from the routes; :func:`install` replaces ``app.openapi`` with a version that
post-processes it once, so that routes need not repeat any of this:

- **Security.** Two schemes, ``apiKey`` (``Authorization: Bearer uep_…``) and ``session`` (the
  ``uep_session`` cookie; writes echo the session's CSRF token in ``X-CSRF-Token``). Every operation whose
  :mod:`uep_gateway.access` entry is not public requires one of them; public operations say ``security: []``.
- **Tenant headers.** ``X-UEP-Tenant`` (pick the tenant) and ``X-UEP-Site-Admin`` (a site admin acting
  across tenants) are optional header parameters of every operation that needs a principal.
- **Errors.** Every ``/v1`` operation documents 401, 403, 404, 409, 422 and 429 (and 413 when it takes a
  body) with one schema, ``Error`` = ``{"detail": [{"loc": [...], "msg": str, "type": str}]}`` — the shape of
  :class:`uep_gateway.errors.FieldError`. The 422 schema accepts FastAPI's own validation errors too.
- **Operation ids** come from the matrix; :func:`contract` raises ``RuntimeError`` when two operations share
  one or one has none.
- **Docs.** ``/docs`` (Swagger UI) and ``/redoc`` serve their scripts and styles from the installed
  ``fastapi_offline`` package under ``/static-offline-docs``: the pages load no CDN asset. They are plain
  Starlette routes (outside the role matrix, public).
- **Error shape.** :func:`http_error` answers FastAPI's and Starlette's own plain-string HTTP errors (400
  unparsable body, 404 unknown path, 405) in the ``Error`` shape too.
"""

from __future__ import annotations

import copy
from importlib.resources import files
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Match

from uep_gateway.access import entry
from uep_gateway.auth import CSRF_HEADER, SESSION_COOKIE, SITE_ADMIN_HEADER, TENANT_HEADER

STATIC_URL = "/static-offline-docs"
DOCS_URL = "/docs"
REDOC_URL = "/redoc"
HTTP_METHODS = frozenset({"get", "put", "post", "delete", "patch", "head", "options", "trace"})
SECURITY: list[dict[str, list[str]]] = [{"apiKey": []}, {"session": []}]

SECURITY_SCHEMES: dict[str, Any] = {
    "apiKey": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "uep_…",
        "description": (
            "An API key: `Authorization: Bearer uep_…` (made by a tenant admin with `POST /v1/api-keys` or "
            "`uep-admin create-api-key`). The caller is the key's tenant with the key's role. "
            f"`{TENANT_HEADER}: <slug>` may name only the key's own tenant (a site admin's key may name any, "
            f"acting as its admin); `{SITE_ADMIN_HEADER}: true` makes a site admin's call act across tenants."
        ),
    },
    "session": {
        "type": "apiKey",
        "in": "cookie",
        "name": SESSION_COOKIE,
        "description": (
            f"A signed-in session: the `{SESSION_COOKIE}` cookie set by `POST /v1/auth/login`. Writes (any "
            f"method but GET, HEAD and OPTIONS) must echo the session's CSRF token in `{CSRF_HEADER}` (403 "
            f"otherwise). `{TENANT_HEADER}: <slug>` picks one of the user's tenants (default: the oldest "
            "membership)."
        ),
    },
}

ERROR_ITEM: dict[str, Any] = {
    "title": "FieldError",
    "type": "object",
    "required": ["loc", "msg", "type"],
    "properties": {
        "loc": {
            "title": "Location",
            "type": "array",
            "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "description": "Path to the field: ['body', 'model'], ['path', 'evaluation_id'], ['header', 'Authorization'] …",
        },
        "msg": {"title": "Message", "type": "string"},
        "type": {"title": "Error Type", "type": "string", "description": "Machine-readable kind, e.g. not_found."},
    },
    "additionalProperties": True,
}
ERROR: dict[str, Any] = {
    "title": "Error",
    "type": "object",
    "required": ["detail"],
    "properties": {"detail": {"title": "Detail", "type": "array", "items": {"$ref": "#/components/schemas/FieldError"}}},
    "description": "Every error answer: one item per problem, each naming the field and the reason.",
}

ERROR_REF = {"$ref": "#/components/schemas/Error"}
RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before trying again.", "schema": {"type": "integer"}}}
ERRORS: dict[str, tuple[str, dict[str, Any]]] = {
    "401": (
        "No, malformed, unknown, revoked or expired credentials (the header or cookie is named).",
        {"WWW-Authenticate": {"description": 'Bearer realm="uep"', "schema": {"type": "string"}}},
    ),
    "403": ("The caller's role may not make this call, or a tenant/site-admin/CSRF header was refused.", {}),
    "404": ("An object of the path (or a tenant named by a header) does not exist for the caller's tenant.", {}),
    "409": ("The call conflicts with the object's state.", {}),
    "422": ("A field of the request is invalid (FastAPI's validation errors have the same shape).", {}),
    "429": ("Past a rate limit of the caller, its tenant or its address.", RETRY_AFTER),
}
BODY_ERRORS: dict[str, tuple[str, dict[str, Any]]] = {
    "400": ("The request body could not be parsed (e.g. a form or encoding that is not what it says).", {}),
    "413": ("The request body is larger than allowed.", {}),
}
EXTRA: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {
    "getReportFile": {"410": ("The report's file was deleted by retention.", {})},
    "readyz": {"503": ("Not ready: a dependency does not answer (each check is listed).", {})},
}

# Creations that answer 200 (with the same body as their 201) when the object already exists.
EXISTING: dict[str, str] = {
    "createAnnotator": "An annotator of that name exists: it is returned.",
    "uploadBenchmark": "The same content was uploaded before: that version is returned.",
}

HEADER_PARAMETERS: list[dict[str, Any]] = [
    {
        "name": TENANT_HEADER,
        "in": "header",
        "required": False,
        "description": "The tenant to act for (a slug). Default: the key's tenant, or the user's oldest membership.",
        "schema": {"type": "string", "minLength": 1, "maxLength": 64},
    },
    {
        "name": SITE_ADMIN_HEADER,
        "in": "header",
        "required": False,
        "description": "`true`: a site admin acts across tenants (refused, 403, for anyone else); `false`: the same "
        "as leaving it out; any other value: 422.",
        "schema": {"type": "string", "enum": ["true", "false"]},
    },
]


def _error_response(description: str, headers: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    response: dict[str, Any] = {"description": description, "content": {"application/json": {"schema": schema}}}
    if headers:
        response["headers"] = copy.deepcopy(headers)
    return response


def _document_errors(operation: dict[str, Any], errors: dict[str, tuple[str, dict[str, Any]]]) -> None:
    responses: dict[str, Any] = operation.setdefault("responses", {})
    for status, (description, headers) in errors.items():
        if status == "422":
            schema: dict[str, Any] = {"anyOf": [ERROR_REF, {"$ref": "#/components/schemas/HTTPValidationError"}]}
            responses[status] = _error_response(description, headers, schema)
        elif status not in responses:
            responses[status] = _error_response(description, headers, ERROR_REF)


def _add_headers(operation: dict[str, Any]) -> None:
    parameters: list[dict[str, Any]] = operation.setdefault("parameters", [])
    have = {(p.get("in"), str(p.get("name", "")).lower()) for p in parameters}
    for parameter in HEADER_PARAMETERS:
        if ("header", parameter["name"].lower()) not in have:
            parameters.append(copy.deepcopy(parameter))


def contract(schema: dict[str, Any]) -> dict[str, Any]:
    """Post-process FastAPI's generated ``schema`` in place (and return it): security schemes and requirements,
    tenant headers, the shared ``Error`` responses (see the module's docstring). Raises LookupError for an
    operation without a matrix entry and RuntimeError for a missing or repeated ``operationId``."""
    components: dict[str, Any] = schema.setdefault("components", {})
    components.setdefault("securitySchemes", {}).update(copy.deepcopy(SECURITY_SCHEMES))
    schemas: dict[str, Any] = components.setdefault("schemas", {})
    schemas["FieldError"] = copy.deepcopy(ERROR_ITEM)
    schemas["Error"] = copy.deepcopy(ERROR)
    schemas.setdefault(
        "HTTPValidationError",
        {"title": "HTTPValidationError", "type": "object", "properties": {"detail": {"type": "array", "items": ERROR_ITEM}}},
    )
    seen: dict[str, str] = {}
    for path, item in schema.get("paths", {}).items():
        for method, operation in item.items():
            if method not in HTTP_METHODS:
                continue
            where = f"{method.upper()} {path}"
            access = entry(method, path)
            op = operation.get("operationId")
            if not op or op != access.op:
                raise RuntimeError(f"{where}: operationId {op!r}, the matrix says {access.op!r}")
            if op in seen:
                raise RuntimeError(f"operationId {op!r} of {where} is also that of {seen[op]}")
            seen[op] = where
            if access.public:
                operation["security"] = []
            else:
                operation["security"] = copy.deepcopy(SECURITY)
                _add_headers(operation)
            if path.startswith("/v1/"):
                _document_errors(operation, ERRORS)
                if "requestBody" in operation:
                    _document_errors(operation, BODY_ERRORS)
            _document_errors(operation, EXTRA.get(op, {}))
            created = operation.get("responses", {}).get("201")
            if op in EXISTING and created is not None:
                operation["responses"].setdefault("200", {**copy.deepcopy(created), "description": EXISTING[op]})
            operation["responses"] = dict(sorted(operation["responses"].items()))
    return schema


async def swagger_ui(request: Request) -> HTMLResponse:
    """``GET /docs``: Swagger UI, its assets served by this app (no CDN)."""
    root = request.scope.get("root_path", "")
    app: FastAPI = request.app
    return get_swagger_ui_html(
        openapi_url=f"{root}{app.openapi_url}",
        title=f"{app.title} — Swagger UI",
        swagger_js_url=f"{root}{STATIC_URL}/swagger-ui-bundle.js",
        swagger_css_url=f"{root}{STATIC_URL}/swagger-ui.css",
        swagger_favicon_url=f"{root}{STATIC_URL}/favicon.png",
        oauth2_redirect_url=None,
        swagger_ui_parameters={"validatorUrl": None, "persistAuthorization": True},
    )


async def redoc(request: Request) -> HTMLResponse:
    """``GET /redoc``: ReDoc, its script served by this app (no CDN)."""
    root = request.scope.get("root_path", "")
    app: FastAPI = request.app
    return get_redoc_html(
        openapi_url=f"{root}{app.openapi_url}",
        title=f"{app.title} — ReDoc",
        redoc_js_url=f"{root}{STATIC_URL}/redoc.standalone.js",
        redoc_favicon_url=f"{root}{STATIC_URL}/favicon.png",
        with_google_fonts=False,
    )


PLAIN_ERRORS: dict[int, tuple[list[str], str]] = {
    400: (["body"], "invalid_body"),
    404: (["path"], "not_found"),
    405: (["method"], "method_not_allowed"),
}


METHOD_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(request: Request) -> list[str]:
    """Every method of :data:`METHOD_ORDER` that some route of the app answers at the request's path, in that
    order. FastAPI makes one route per method, and Starlette's own 405 names only the methods of the first
    route whose path matched; here each method is matched against the app's routes (included routers too)."""
    base = {k: request.scope[k] for k in ("type", "path", "root_path", "headers", "query_string") if k in request.scope}
    return [
        method
        for method in METHOD_ORDER
        if any(route.matches({**base, "method": method})[0] == Match.FULL for route in request.app.router.routes)
    ]


async def http_error(request: Request, exc: Exception) -> Response:
    """Exception handler: an HTTP error whose ``detail`` is a plain string (raised by FastAPI or Starlette
    themselves: unparsable body 400, unknown path 404, method not allowed 405 …) answers in the ``Error``
    shape, ``{"detail": [{"loc": [...], "msg": detail, "type": ...}]}``; a list ``detail`` is kept as it is (the
    gateway's own errors answer through :mod:`uep_gateway.error_responses`). Headers are kept; 204/304 have no body. A 405's
    ``Allow`` lists every method of the path (:func:`allowed_methods`)."""
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 405 and (methods := allowed_methods(request)):
        headers = {k: v for k, v in headers.items() if k.lower() != "allow"} | {"Allow": ", ".join(methods)}
    if exc.status_code in (204, 304):
        return Response(status_code=exc.status_code, headers=headers)
    detail: Any = exc.detail
    if not isinstance(detail, list):
        loc, kind = PLAIN_ERRORS.get(exc.status_code, ([], "http_error"))
        detail = [{"loc": loc, "msg": str(detail), "type": kind}]
    return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=headers)


def install(app: FastAPI) -> None:
    """Make ``app.openapi`` return the contract (computed once, on first use) and serve ``/docs``, ``/redoc``
    and their assets offline. ``app`` must be built with ``docs_url=None, redoc_url=None``."""
    generate = app.openapi
    done: list[bool] = []

    def openapi() -> dict[str, Any]:
        schema = generate()
        if not done:
            contract(schema)
            done.append(True)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
    app.add_exception_handler(StarletteHTTPException, http_error)
    static = files("fastapi_offline") / "static"
    app.mount(STATIC_URL, StaticFiles(directory=str(static)), name="static-offline-docs")
    app.add_route(DOCS_URL, swagger_ui, methods=["GET"], include_in_schema=False)
    app.add_route(REDOC_URL, redoc, methods=["GET"], include_in_schema=False)
