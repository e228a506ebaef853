"""The gateway's domain errors: each names the field, the reason and a *kind* — what went wrong, never an HTTP
status. :mod:`uep_gateway.error_responses` is the one place that turns a kind into a status; the body keeps
FastAPI's validation-error shape::

    {"detail": [{"loc": ["body", "benchmark"], "msg": "unknown benchmark 'nope'", "type": "unknown_benchmark"}]}

Kinds (:data:`Kind`): ``invalid`` (the request can never succeed as written), ``not_found`` (unknown, or another
tenant's), ``conflict`` (the object's state refuses it now), ``forbidden`` (the caller's role or tenant may not),
``unauthenticated`` (no valid credential), ``gone`` (it existed and is no more), ``too_large`` (a body over its
size bound), ``rate_limited`` (too many requests now; ``Retry-After``), ``over_budget`` (the tenant's budget
refuses the cost) and ``unavailable`` (a dependency did not answer).

This module imports no web framework: use cases (:mod:`uep_gateway.usecases`) raise these errors, and so do the
request checks (authentication, rate limits, cursors).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from uep_common.records.budget import BudgetRefused
    from uep_common.records.creation import WorkLimitRefused
    from uep_common.registry.model_registry import RegistryError

Kind = Literal[
    "invalid", "not_found", "conflict", "forbidden", "unauthenticated", "gone", "too_large", "rate_limited",
    "over_budget", "unavailable",
]  # fmt: skip
"""What went wrong, in words a client and the status mapping (:mod:`uep_gateway.error_responses`) both read."""

_KIND_OF_REFUSAL: dict[int, Kind] = {
    402: "over_budget", 403: "forbidden", 404: "not_found", 409: "conflict", 422: "invalid", 429: "rate_limited",
}  # fmt: skip
"""The kind of a shared-library refusal (:class:`~uep_common.records.creation.WorkLimitRefused`,
:class:`~uep_common.records.budget.BudgetRefused`, :class:`~uep_common.registry.model_registry.RegistryError`),
which still says what it is by an HTTP-style number."""


class DomainError(Exception):
    """A domain error listing problems, each ``{"loc": [...], "msg": str, "type": str}``, of one ``kind``.
    ``headers`` (e.g. ``Retry-After``) go on the response."""

    def __init__(self, kind: Kind, problems: list[dict[str, Any]], headers: dict[str, str] | None = None) -> None:
        super().__init__(problems[0]["msg"] if problems else kind)
        self.kind: Kind = kind
        self.detail = problems
        self.headers = headers


class FieldError(DomainError):
    """A domain error about one field: ``loc`` is the path to it (e.g. ``("body", "model")``), ``msg`` the
    reason in words, ``type_`` the machine string of that reason (``unknown_benchmark``)."""

    def __init__(
        self, kind: Kind, loc: tuple[str | int, ...], msg: str, type_: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(kind, [{"loc": list(loc), "msg": msg, "type": type_}], headers=headers)


def refusal_kind(status: int) -> Kind:
    """The :data:`Kind` of a shared-library refusal's number (402, 403, 404, 409, 422 or 429). Raises KeyError for
    another number: a refusal the gateway does not know is a bug, not a client error."""
    return _KIND_OF_REFUSAL[status]


def work_limit_error(exc: WorkLimitRefused | BudgetRefused, loc_prefix: tuple[Any, ...] = ("body",)) -> FieldError:
    """The error of a :class:`uep_common.records.creation.WorkLimitRefused` or
    :class:`uep_common.records.budget.BudgetRefused`: its kind, ``loc`` = ``loc_prefix`` + its field (a header
    field is named ``("header", name)``), and ``Retry-After`` (seconds) when it has one."""
    loc = ("header", exc.field) if exc.field.startswith("X-") else (*loc_prefix, exc.field)
    retry_after_s = getattr(exc, "retry_after_s", None)
    headers = {"Retry-After": str(retry_after_s)} if retry_after_s is not None else None
    return FieldError(refusal_kind(exc.status_code), loc, exc.reason, exc.kind, headers=headers)


def registry_error(exc: RegistryError) -> DomainError:
    """The error of a :class:`uep_common.registry.model_registry.RegistryError`: one item per problem, each
    naming the field."""
    if len(exc.problems) == 1:
        return FieldError(refusal_kind(exc.status), exc.loc, exc.msg, exc.kind)
    return DomainError(refusal_kind(exc.status), [{"loc": list(exc.loc), "msg": p, "type": exc.kind} for p in exc.problems])
