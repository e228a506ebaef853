"""The one place where a domain error's kind becomes an HTTP status.

Use cases and request checks raise :class:`uep_gateway.errors.DomainError` (or :class:`~uep_gateway.errors.FieldError`)
carrying a :data:`~uep_gateway.errors.Kind`; :func:`install` registers :func:`domain_error` as the app's
handler, which answers ``{"detail": [...]}`` with the status :data:`STATUS_OF_KIND` gives and the error's
headers. Errors raised by FastAPI or Starlette themselves keep their own handler
(:func:`uep_gateway.openapi_contract.http_error`).
"""

from __future__ import annotations

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from uep_gateway.errors import DomainError, Kind

STATUS_OF_KIND: dict[Kind, int] = {
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
"""HTTP status of each kind (RFC 9110 section 15; 429 is RFC 6585 section 4)."""


def status_of(exc: DomainError) -> int:
    """The HTTP status a domain error answers with."""
    return STATUS_OF_KIND[exc.kind]


async def domain_error(request: Request, exc: Exception) -> Response:
    """Exception handler: a :class:`~uep_gateway.errors.DomainError` answers ``{"detail": problems}`` with the
    status of its kind and its headers."""
    assert isinstance(exc, DomainError)
    return JSONResponse({"detail": exc.detail}, status_code=status_of(exc), headers=exc.headers)


def install(app: FastAPI) -> None:
    """Register :func:`domain_error` on ``app``."""
    app.add_exception_handler(DomainError, domain_error)
