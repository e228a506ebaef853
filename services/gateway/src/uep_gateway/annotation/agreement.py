"""Inter-annotator agreement: Krippendorff's alpha per question (dimension), with the ``krippendorff``
package (Castro 2017, https://github.com/pln-fing-udelar/fast-krippendorff), which implements
Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", via the coincidence matrix:

    alpha = 1 - D_o / D_e = 1 - (n - 1) · Σ_ck o_ck δ²_ck / Σ_ck n_c n_k δ²_ck

Levels of measurement: interval for rating questions, nominal for pass/fail and pairwise preference.
Values are coded as numbers over the question's whole value domain (rating: every scale point; pass/fail:
pass = 1, fail = 0; pairwise: a = 0, b = 1, tie = 2), so a value nobody chose does not change alpha.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import krippendorff
import numpy as np

from uep_gateway.annotation.questions import Question

Level = Literal["nominal", "ordinal", "interval", "ratio"]
"""Krippendorff's levels of measurement."""

CODES = {"pass_fail": {"fail": 0, "pass": 1}, "pairwise": {"a": 0, "b": 1, "tie": 2}}


def level_of_measurement(q: Question) -> Level:
    """'interval' for rating questions, 'nominal' for pass/fail and pairwise."""
    return "interval" if q.type == "rating" else "nominal"


def value_domain(q: Question) -> list[int]:
    """Coded values a question can take, in order."""
    if q.type == "rating":
        return list(range(q.scale_min, q.scale_max + 1))
    return sorted(CODES[q.type].values())


def code(q: Question, value: Any) -> float:
    """The numeric code of one answer (NaN when missing)."""
    if value is None:
        return math.nan
    return float(value) if q.type == "rating" else float(CODES[q.type][value])


def alpha(
    reliability_data: Sequence[Sequence[float]], level: Level, domain: Sequence[float] | None = None
) -> tuple[float | None, str | None]:
    """Krippendorff's alpha of a coders × units matrix (NaN = missing) → ``(alpha, None)`` or
    ``(None, reason)`` when it is undefined: no unit coded by two coders ('too_few_pairable_values'), or
    every pairable value the same (no disagreement is possible: D_e = 0, 'no_variation')."""
    data = np.asarray(reliability_data, dtype=float)
    if data.size == 0 or ((~np.isnan(data)).sum(axis=0) >= 2).sum() == 0:
        return None, "too_few_pairable_values"
    pairable = data[:, (~np.isnan(data)).sum(axis=0) >= 2]
    if len(np.unique(pairable[~np.isnan(pairable)])) < 2:
        return None, "no_variation"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value = float(krippendorff.alpha(reliability_data=data, level_of_measurement=level, value_domain=domain))
    if math.isnan(value):
        return None, "no_variation"
    return value, None


def question_agreement(q: Question, answers: Mapping[Any, Mapping[Any, object]]) -> dict[str, Any]:
    """Alpha of one question over ``answers``: ``{(unit key): {coder key: answer}}``.

    Returns ``{"question", "type", "level", "alpha", "reason", "units", "pairable_units", "coders", "values"}``
    (units = items with any answer; pairable = items with ≥ 2 answers; values = answers counted).
    """
    units = [u for u, by_coder in answers.items() if any(v is not None for v in by_coder.values())]
    coders = sorted({c for u in units for c, v in answers[u].items() if v is not None}, key=str)
    matrix = [[code(q, answers[u].get(c)) for u in units] for c in coders]
    pairable = sum(1 for u in units if sum(answers[u].get(c) is not None for c in coders) >= 2)
    value, reason = alpha(matrix, level_of_measurement(q), value_domain(q)) if units else (None, "too_few_pairable_values")
    return {
        "question": q.name,
        "type": q.type,
        "level": level_of_measurement(q),
        "alpha": value,
        "reason": reason,
        "units": len(units),
        "pairable_units": pairable,
        "coders": len(coders),
        "values": sum(sum(answers[u].get(c) is not None for c in coders) for u in units),
    }
