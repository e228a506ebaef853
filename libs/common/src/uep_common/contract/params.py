"""Type checks of metric parameters, shared by the gateway (benchmark uploads, from the scorer-registered
catalogue) and the scorer's CLI, so a wrong parameter is refused before any model is called.

A metric declares ``param_types``: parameter name → one of ``bool``, ``number`` (int or float),
``integer``, ``string``, ``string_list`` (a list of strings), ``letters`` (a string or a list of one-letter
strings), ``enum:a|b|c``; and ``required_params``.
"""

from __future__ import annotations

from typing import Any


def _ok(kind: str, value: Any) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "string_list":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if kind == "letters":
        return isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) and len(v) == 1 for v in value))
    if kind.startswith("enum:"):
        return value in kind[5:].split("|")
    return True  # an unknown kind is not checked here; the metric checks it when scoring


def _describe(kind: str) -> str:
    if kind.startswith("enum:"):
        return "one of " + ", ".join(repr(v) for v in kind[5:].split("|"))
    return {
        "bool": "true or false",
        "number": "a number",
        "integer": "an integer",
        "string": "a string",
        "string_list": "a list of strings",
        "letters": "a string of letters or a list of letters",
    }.get(kind, kind)


def param_problems(
    params: dict[str, Any], param_types: dict[str, str], required: list[str] | tuple[str, ...]
) -> list[tuple[str, str]]:
    """``(parameter, reason)`` for each unknown, missing or mistyped parameter; empty when all are fine.

    ``None`` is accepted for optional parameters (it means "the default").
    """
    problems = [
        (name, f"unknown parameter; the metric takes {sorted(param_types) or 'none'}")
        for name in sorted(set(params) - set(param_types))
    ]
    problems += [(name, "is required") for name in required if params.get(name) is None]
    for name, value in sorted(params.items()):
        kind = param_types.get(name)
        if kind is not None and value is not None and not _ok(kind, value):
            problems.append((name, f"must be {_describe(kind)}; got {value!r}"))
    return problems
