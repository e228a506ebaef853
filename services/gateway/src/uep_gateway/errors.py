"""Error responses that name the field and the reason, in FastAPI's validation-error shape::

{"detail": [{"loc": ["body", "benchmark"], "msg": "unknown benchmark 'nope'", "type": "unknown_benchmark"}]}
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import HTTPException

if TYPE_CHECKING:
    from uep_common.records.creation import WorkLimitRefused


class FieldError(HTTPException):
    """An HTTP error about one request field (``loc`` is the path to it, e.g. ``("body", "model")``)."""

    def __init__(
        self, status_code: int, loc: tuple[str | int, ...], msg: str, type_: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(status_code, detail=[{"loc": list(loc), "msg": msg, "type": type_}], headers=headers)


class FieldErrors(HTTPException):
    """An HTTP error listing several problems, each ``{"loc": [...], "msg": str, "type": str}``."""

    def __init__(self, status_code: int, problems: list[dict[str, Any]]) -> None:
        super().__init__(status_code, detail=problems)


def work_limit_error(exc: WorkLimitRefused, loc_prefix: tuple[Any, ...] = ("body",)) -> FieldError:
    """The HTTP error of a :class:`uep_common.records.creation.WorkLimitRefused`: its status, ``loc`` = ``loc_prefix``
    + its field (a header field is named ``("header", name)``), and ``Retry-After`` (seconds) when it has one."""
    loc = ("header", exc.field) if exc.field.startswith("X-") else (*loc_prefix, exc.field)
    headers = {"Retry-After": str(exc.retry_after_s)} if exc.retry_after_s is not None else None
    return FieldError(exc.status_code, loc, exc.reason, exc.kind, headers=headers)
