"""Request checks that every JSON route shares: no NUL characters, integers the database columns can hold.

**NUL characters.** PostgreSQL stores neither ``\\x00`` in ``text``/``varchar`` nor ``\\u0000`` in ``jsonb``, so a
NUL anywhere in a request that reaches the database would fail the INSERT or the query (a 500). The rule lives
in one request-validation step, :func:`reject_nul_characters`, which every router of the gateway declares as a
dependency (``APIRouter(dependencies=NUL_CHECK)``): it walks the JSON body (keys and values, at any depth),
the path parameters and the query string, and answers 422 naming the first field holding a NUL::

    {"detail": [{"loc": ["body", "arms", 1, "name"], "msg": "...", "type": "nul_character"}]}

One step rather than an annotated ``str`` type on each model field, because free-form fields (``judge``,
``answers``, metric ``params``, schedule ``options``) are dicts whose keys and nested values are stored as
``jsonb`` too, and query/path strings are not model fields: a type would have to be repeated on every field
and could be missed on a new one, while the step sees every string of every request of every router. It runs
before FastAPI validates the body and parameters, so malformed JSON still answers ``json_invalid``.

**Integers.** :data:`INT32_MAX` / :data:`INT64_MAX` bound the request integers that reach ``INTEGER`` /
``BIGINT`` columns or query parameters (``Field(le=INT32_MAX)``), so an out-of-range value is a 422 naming
the field instead of a database overflow.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Depends, Request

from uep_gateway.errors import FieldError

INT32_MAX = 2**31 - 1
"""Largest value of a PostgreSQL ``INTEGER`` column."""
INT64_MAX = 2**63 - 1
"""Largest value of a PostgreSQL ``BIGINT`` column."""
NUL = "\x00"


def _nul_path(value: object, loc: list[Any]) -> list[Any] | None:
    """The path to the first string (dict key or value) of a decoded JSON value that holds a NUL, or None."""
    if isinstance(value, str):
        return loc if NUL in value else None
    if isinstance(value, dict):
        for k, v in value.items():
            if NUL in k:
                return [*loc, k]
            if (found := _nul_path(v, [*loc, k])) is not None:
                return found
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if (found := _nul_path(v, [*loc, i])) is not None:
                return found
    return None


def _refuse(loc: list[Any], where: str) -> FieldError:
    return FieldError(
        "invalid", tuple(loc), f"{where} contains a NUL character (\\u0000), which cannot be stored", "nul_character"
    )


async def reject_nul_characters(request: Request) -> None:
    """FastAPI dependency: raise 422 (``type`` ``nul_character``) naming the first path parameter, query
    parameter or JSON body field (key or value, any depth) that contains a NUL character. Bodies that are not
    JSON, or not valid JSON, are left to the route's own validation."""
    for name, value in request.path_params.items():
        if isinstance(value, str) and NUL in value:
            raise _refuse(["path", name], f"path parameter {name!r}")
    for name, value in request.query_params.multi_items():
        if NUL in name or NUL in value:
            raise _refuse(["query", name.replace(NUL, "\\u0000")], f"query parameter {name!r}")
    if request.method in ("GET", "HEAD", "DELETE", "OPTIONS"):
        return
    if "json" not in request.headers.get("content-type", "").lower():
        return
    raw = await request.body()  # cached on the request: FastAPI reuses it
    # JSON can only carry a NUL as the escape \u0000 (a raw control character is invalid JSON): skip the
    # second parse for the bodies that cannot hold one
    if b"\\u0000" not in raw:
        return
    try:
        body = json.loads(raw)
    except ValueError:
        return
    if (loc := _nul_path(body, ["body"])) is not None:
        raise _refuse(loc, "field " + ".".join(map(str, loc[1:])) if len(loc) > 1 else "the body")


NUL_CHECK = [Depends(reject_nul_characters)]
"""``dependencies=`` of every gateway router."""
