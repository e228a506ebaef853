"""How the command line writes an evaluation's figures: the gateway's ``headline`` (one figure, its 95 %
interval and the interval's method, as every other view shows them) in one format.

A proportion (``headline.proportion``: accuracy, hit@k) is a percentage with one decimal, ``75.0 %``, its
interval ``[30.0–95.0] Wilson``; any other figure has three decimals, ``0.755``, ``[0.700–0.810] bootstrap``.
The web UI (``ui.js``: ``headlineText``) and the report write the same text.
"""

from __future__ import annotations

from typing import Any

METHOD_NAMES = {"wilson": "Wilson", "bootstrap": "bootstrap"}
"""How an interval's method is named beside it."""


def figure(value: float | None, proportion: bool) -> str:
    """``75.0 %`` for a proportion, ``0.755`` otherwise; ``""`` for None."""
    if value is None:
        return ""
    return f"{100 * value:.1f} %" if proportion else f"{value:.3f}"


def interval(lo: float | None, hi: float | None, proportion: bool, method: str | None = None) -> str:
    """``[30.0–95.0] Wilson`` (percentage points) for a proportion, ``[0.700–0.810] bootstrap`` otherwise, the
    method left out when None; ``""`` when an end is missing."""
    if lo is None or hi is None:
        return ""
    text = f"[{100 * lo:.1f}–{100 * hi:.1f}]" if proportion else f"[{lo:.3f}–{hi:.3f}]"
    return f"{text} {METHOD_NAMES.get(method, method)}" if method else text


def headline(view: dict[str, Any]) -> dict[str, Any]:
    """The headline of an evaluation view or list item: the gateway's ``headline``; from an older gateway
    without one, the summary's accuracy with its Wilson interval; while nothing is summarised, the live
    accuracy of ``progress`` (named ``accuracy so far``). Keys of the gateway's ``Headline`` (``metric``,
    ``value``, ``ci_low``, ``ci_high``, ``method``, ``proportion``, ``note``)."""
    h = view.get("headline")
    if h and h.get("value") is not None:
        return dict(h)
    s = view.get("summary") or view
    if s.get("accuracy") is not None:
        return {
            "metric": "accuracy",
            "value": s["accuracy"],
            "ci_low": s.get("ci_low"),
            "ci_high": s.get("ci_high"),
            "method": "wilson" if s.get("ci_low") is not None else None,
            "proportion": True,
        }
    p = view.get("progress") or {}
    if p.get("accuracy") is not None:
        return {
            "metric": "accuracy so far",
            "value": p["accuracy"],
            "ci_low": p.get("ci_low"),
            "ci_high": p.get("ci_high"),
            "method": "wilson" if p.get("ci_low") is not None else None,
            "proportion": True,
        }
    return {"metric": (h or {}).get("metric") or "score", "value": None, "proportion": False}


def headline_text(view: dict[str, Any]) -> tuple[str, str]:
    """(``accuracy 75.0 %``, ``[30.0–95.0] Wilson``) of :func:`headline`; ``""`` for what is missing."""
    h = headline(view)
    value = figure(h.get("value"), bool(h.get("proportion")))
    ci = interval(h.get("ci_low"), h.get("ci_high"), bool(h.get("proportion")), h.get("method"))
    return (f"{h['metric']} {value}" if value else ""), ci
