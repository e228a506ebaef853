"""Judge diagnostics per judge model and template version, from ``judge_verdicts`` rows.

For each (judge model, template, template version):

- ``parse_failure_rate`` = judge replies that could not be used (no JSON, missing/ill-typed field, score off
  the scale) / judge replies received; ``invalid_rate`` = verdicts with no valid answer after the re-asks /
  verdicts.
- ``position_swap_inconsistency_rate`` = pairwise comparisons whose two orders (candidate first 'AB',
  baseline first 'BA') were both answered validly but name different winners for the candidate / such
  comparisons (Zheng et al. 2023, MT-bench, "position bias": the share of swapped pairs that disagree).
  ``first_position_rate`` = valid pairwise answers naming the first answer ('A') / valid pairwise answers.
- ``length_correlation``: Spearman's rank correlation (``scipy.stats.spearmanr``) between the candidate
  answer's length in characters and the overall score, over valid rubric/reference verdicts; None with
  fewer than 3 points or a constant input (undefined).
- ``self_preference`` (only where the judge model was itself a candidate): rubric — mean overall score
  the judge gave its OWN answers minus the mean it gave other models' answers; pairwise — the judge's own
  answers' win rate (win 1, tie 0.5, loss 0) in comparisons it judged against another model's answers.
"""

from __future__ import annotations

import math
import statistics
import uuid
import warnings
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from scipy import stats

VALUE = {"win": 1.0, "tie": 0.5, "loss": 0.0}
FLIP = {"win": "loss", "loss": "win", "tie": "tie"}


@dataclass(frozen=True)
class VerdictRow:
    """The fields of one ``judge_verdicts`` row the diagnostics need."""

    item: tuple[Any, ...]  # (evaluation_id, sample_id, repeat, arm)
    judge_model_id: uuid.UUID
    judge_model_name: str
    template: str
    template_version: str
    mode: str
    position: str
    valid: bool
    replies: int  # replies received (attempts whose raw text came back)
    parse_failures: int
    overall: float | None
    winner: str | None
    candidate_outcome: str | None
    answer_chars: int | None
    candidate_model_id: uuid.UUID
    opponent_model_id: uuid.UUID | None

    @classmethod
    def from_record(cls, r: dict[str, Any]) -> VerdictRow:
        """From a ``judge_verdicts`` row as a dict (column → value)."""
        log = r.get("attempts_log") or []
        return cls(
            item=(r["evaluation_id"], r["sample_id"], r["repeat"], r["arm"]),
            judge_model_id=r["judge_model_id"],
            judge_model_name=r["judge_model_name"],
            template=r["template"],
            template_version=r["template_version"],
            mode=r["mode"],
            position=r["position"],
            valid=r["valid"],
            replies=sum(1 for a in log if a.get("raw") is not None),
            parse_failures=sum(1 for a in log if a.get("raw") is not None and a.get("error")),
            overall=r.get("overall"),
            winner=r.get("winner"),
            candidate_outcome=r.get("candidate_outcome"),
            answer_chars=r.get("answer_chars"),
            candidate_model_id=r["candidate_model_id"],
            opponent_model_id=r.get("opponent_model_id"),
        )


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def spearman(xs: list[float], ys: list[float]) -> dict[str, Any]:
    """``{"rho", "p_value", "n"}`` of Spearman's rank correlation (scipy.stats.spearmanr); rho and p are None
    with fewer than 3 pairs or when either input is constant (the coefficient is undefined)."""
    n = len(xs)
    if n < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return {"rho": None, "p_value": None, "n": n}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.spearmanr(xs, ys)
    rho, p = float(res.statistic), float(res.pvalue)
    return {"rho": None if math.isnan(rho) else rho, "p_value": None if math.isnan(p) else p, "n": n}


def _group(rows: list[VerdictRow]) -> dict[str, Any]:
    replies = sum(r.replies for r in rows)
    failures = sum(r.parse_failures for r in rows)
    pair_rows: dict[tuple[Any, ...], dict[str, VerdictRow]] = defaultdict(dict)
    for r in rows:
        if r.mode == "pairwise" and r.position in ("AB", "BA"):
            pair_rows[r.item][r.position] = r
    comparisons, inconsistent = 0, 0
    own_pairwise: list[float] = []
    for orders in pair_rows.values():
        ab, ba = orders.get("AB"), orders.get("BA")
        if not (ab and ba and ab.valid and ba.valid):
            continue
        comparisons += 1
        consistent = ab.candidate_outcome == ba.candidate_outcome
        inconsistent += not consistent
        outcome = ab.candidate_outcome if consistent else "tie"
        if ab.candidate_model_id == ab.judge_model_id and ab.opponent_model_id != ab.judge_model_id:
            assert outcome is not None  # a valid pairwise verdict has its outcome (uep_judge.store.verdict_rows)
            own_pairwise.append(VALUE[outcome])
        elif ab.opponent_model_id == ab.judge_model_id and ab.candidate_model_id != ab.judge_model_id:
            assert outcome is not None  # as above
            own_pairwise.append(VALUE[FLIP[outcome]])
    pairwise_valid = [r for r in rows if r.mode == "pairwise" and r.valid]
    graded = [
        (r, r.overall, r.answer_chars)
        for r in rows
        if r.mode != "pairwise" and r.valid and r.overall is not None and r.answer_chars is not None
    ]
    own = [overall for r, overall, _ in graded if r.candidate_model_id == r.judge_model_id]
    others = [overall for r, overall, _ in graded if r.candidate_model_id != r.judge_model_id]
    self_pref: dict[str, Any] = {}
    if own:
        self_pref["rubric"] = {
            "own_mean": statistics.fmean(own),
            "others_mean": statistics.fmean(others) if others else None,
            "delta": statistics.fmean(own) - statistics.fmean(others) if others else None,
            "n_own": len(own),
            "n_others": len(others),
        }
    if own_pairwise:
        self_pref["pairwise"] = {"own_win_rate": statistics.fmean(own_pairwise), "n": len(own_pairwise)}
    first = rows[0]
    return {
        "judge_model": first.judge_model_name,
        "template": first.template,
        "template_version": first.template_version,
        "modes": sorted({r.mode for r in rows}),
        "verdicts": len(rows),
        "replies": replies,
        "parse_failures": failures,
        "parse_failure_rate": _rate(failures, replies),
        "invalid_verdicts": sum(not r.valid for r in rows),
        "invalid_rate": _rate(sum(not r.valid for r in rows), len(rows)),
        "pairwise_comparisons": comparisons,
        "position_swap_inconsistent": inconsistent,
        "position_swap_inconsistency_rate": _rate(inconsistent, comparisons),
        "first_position_rate": _rate(sum(r.winner == "A" for r in pairwise_valid), len(pairwise_valid)),
        "length_correlation": spearman([float(chars) for _, _, chars in graded], [overall for _, overall, _ in graded]),
        "self_preference": self_pref or None,
    }


def diagnostics(rows: Iterable[VerdictRow]) -> list[dict[str, Any]]:
    """Diagnostics of each (judge model, template, template version), sorted by those keys (module docstring)."""
    groups: dict[tuple[Any, ...], list[VerdictRow]] = defaultdict(list)
    for r in rows:
        groups[(r.judge_model_name, r.template, r.template_version)].append(r)
    return [_group(groups[k]) for k in sorted(groups)]
