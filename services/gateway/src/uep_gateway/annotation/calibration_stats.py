"""Judge–human agreement statistics over paired answers (pure functions; no database).

- Labels (pass/fail, pairwise preference): Cohen's kappa (Cohen 1960), ``sklearn.metrics.cohen_kappa_score``:
  ``kappa = (p_o - p_e) / (1 - p_e)`` with ``p_o`` the observed share of equal answers and ``p_e`` the share
  expected from the two raters' marginal label frequencies.
- Scales (ratings on integer points): the same function with ``weights="quadratic"`` (Cohen 1968, weighted
  kappa; the disagreement of points ``i`` and ``j`` weighted ``(i - j)^2``), and Spearman's rank correlation
  (``scipy.stats.spearmanr``, via :func:`uep_gateway.judge_diagnostics.spearman`).
- Both: Krippendorff's alpha with the judge as one more coder beside the annotators
  (:func:`uep_gateway.annotation.agreement.alpha`, the ``krippendorff`` package) and the confusion of judge
  against human answers (``sklearn.metrics.confusion_matrix``, rows = the judge's answer, columns = the human's).
- Several annotators: each annotator's kappa with the judge, and their mean (Light 1971, "average pairwise
  kappa"), the headline ``agreement`` of a judge on a question.
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, Literal

from sklearn.metrics import cohen_kappa_score, confusion_matrix

from uep_gateway.annotation.agreement import Level, alpha
from uep_gateway.judge_diagnostics import spearman

Kind = Literal["labels", "scale"]
"""'labels': nominal answers (Cohen's kappa); 'scale': integer points of a rating scale (quadratic kappa)."""

MIN_PAIRS = 2
"""Fewer paired answers than this leave kappa undefined."""


def kappa(judge: Sequence[Hashable], human: Sequence[Hashable], domain: Sequence[Hashable], kind: Kind) -> float | None:
    """Cohen's kappa of two equally long answer lists over ``domain`` (every value either may take), unweighted
    for ``kind`` 'labels' and quadratically weighted for 'scale' (``domain`` then in scale order).

    Returns None when it is undefined: fewer than :data:`MIN_PAIRS` pairs, or chance agreement ``p_e`` = 1
    (both raters gave one and the same answer throughout). Raises ValueError for lists of unequal length."""
    if len(judge) != len(human):
        raise ValueError(f"paired answers of unequal length: {len(judge)} judge, {len(human)} human")
    if len(judge) < MIN_PAIRS:
        return None
    with warnings.catch_warnings():  # undefined kappa: scikit-learn warns and answers NaN
        warnings.simplefilter("ignore")
        value = float(
            cohen_kappa_score(list(judge), list(human), labels=list(domain), weights="quadratic" if kind == "scale" else None)
        )
    return None if math.isnan(value) else value


def confusion(judge: Sequence[Hashable], human: Sequence[Hashable], domain: Sequence[Hashable]) -> dict[str, Any]:
    """``{"labels": domain, "matrix": rows}``: ``rows[i][j]`` counts the pairs where the judge answered
    ``domain[i]`` and the human ``domain[j]`` (``sklearn.metrics.confusion_matrix``; the human is its
    ``y_true``)."""
    if not judge:
        return {"labels": list(domain), "matrix": [[0] * len(domain) for _ in domain]}
    m = confusion_matrix(list(human), list(judge), labels=list(domain))
    return {"labels": list(domain), "matrix": m.T.astype(int).tolist()}


def rescale(value: float, lo: float, hi: float, to_lo: int, to_hi: int) -> int:
    """``value`` on the scale [lo, hi] as the nearest integer point of [to_lo, to_hi] (linear map, halves
    rounded up; clipped to the target scale). Raises ValueError when ``hi <= lo``."""
    if hi <= lo:
        raise ValueError(f"empty scale [{lo}, {hi}]")
    x = to_lo + (value - lo) / (hi - lo) * (to_hi - to_lo)
    return int(min(max(math.floor(x + 0.5), to_lo), to_hi))


def judge_vs_humans(
    judge: Mapping[Any, Any],
    humans: Mapping[Any, Mapping[Any, Any]],
    domain: Sequence[Any],
    kind: Kind,
) -> dict[str, Any]:
    """Agreement of one judge with several annotators on one question.

    ``judge``: unit → the judge's answer; ``humans``: annotator → (unit → answer); ``domain``: every answer
    possible (scale points in order for 'scale'). Only units the judge answered count.

    Returns ``{"items", "annotations", "per_annotator": [{"annotator", "n", "kappa"}], "kappa_mean",
    "alpha", "alpha_reason", "human_alpha", "human_alpha_reason", "exact_agreement", "spearman", "confusion"}``:
    ``kappa_mean`` the mean of the defined per-annotator kappas (None when none is); ``alpha`` Krippendorff's
    alpha of the judge and every annotator as coders (nominal for labels, interval for a scale) and
    ``human_alpha`` the annotators' alone, on the same units; ``exact_agreement`` the share of (judge,
    annotator) pairs with equal answers; ``spearman`` (scale only) the judge's answer against the mean of
    the annotators' per unit; ``confusion`` pooled over every (judge, annotator) pair.
    """
    units = [u for u in judge if any(u in answers for answers in humans.values())]
    per_annotator: list[dict[str, Any]] = []
    pooled_j: list[Hashable] = []
    pooled_h: list[Hashable] = []
    for name in sorted(humans, key=str):
        shared = [u for u in units if u in humans[name]]
        js, hs = [judge[u] for u in shared], [humans[name][u] for u in shared]
        pooled_j += js
        pooled_h += hs
        if shared:
            per_annotator.append({"annotator": str(name), "n": len(shared), "kappa": kappa(js, hs, domain, kind)})
    defined: list[float] = [a["kappa"] for a in per_annotator if a["kappa"] is not None]
    index = {v: float(i) for i, v in enumerate(domain)}

    def code(v: Any) -> float:
        return float(v) if kind == "scale" else index[v]

    level: Level = "interval" if kind == "scale" else "nominal"
    coded_domain = [code(v) for v in domain]
    coders = sorted(humans, key=str)
    human_rows = [[code(humans[c][u]) if u in humans[c] else math.nan for u in units] for c in coders]
    a, a_reason = (
        alpha([[code(judge[u]) for u in units], *human_rows], level, coded_domain) if units else (None, "too_few_pairable_values")
    )
    ha, ha_reason = alpha(human_rows, level, coded_domain) if units else (None, "too_few_pairable_values")
    out: dict[str, Any] = {
        "items": len(units),
        "annotations": len(pooled_j),
        "per_annotator": per_annotator,
        "kappa_mean": statistics.fmean(defined) if defined else None,
        "alpha": a,
        "alpha_reason": a_reason,
        "human_alpha": ha,
        "human_alpha_reason": ha_reason,
        "exact_agreement": sum(j == h for j, h in zip(pooled_j, pooled_h, strict=True)) / len(pooled_j) if pooled_j else None,
        "confusion": confusion(pooled_j, pooled_h, domain),
    }
    if kind == "scale":
        means = [statistics.fmean(float(humans[c][u]) for c in coders if u in humans[c]) for u in units]
        out["spearman"] = spearman([float(judge[u]) for u in units], means)
    return out
