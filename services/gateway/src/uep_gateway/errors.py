"""Error responses that name the field and the reason, in FastAPI's validation-error shape::

    {"detail": [{"loc": ["body", "benchmark"], "msg": "unknown benchmark 'nope'", "type": "unknown_benchmark"}]}
"""

from __future__ import annotations

from fastapi import HTTPException


class FieldError(HTTPException):
    """An HTTP error about one request field (``loc`` is the path to it, e.g. ``("body", "model")``)."""

    def __init__(self, status_code: int, loc: tuple[str, ...], msg: str, type_: str) -> None:
        super().__init__(status_code, detail=[{"loc": list(loc), "msg": msg, "type": type_}])


class FieldErrors(HTTPException):
    """An HTTP error listing several problems, each ``{"loc": [...], "msg": str, "type": str}``."""

    def __init__(self, status_code: int, problems: list[dict]) -> None:
        super().__init__(status_code, detail=problems)
