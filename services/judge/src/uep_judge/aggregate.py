"""From judges' verdicts to one item's outcome: jury aggregation (mean or majority), confidence, and the
flat ``metrics`` stored with the ScoreComputed.

Rubric / reference (scores on ``[overall_min, overall_max]``):
    ``mean``: overall = mean of the valid judges' overall scores (each dimension likewise, over the judges
    that gave it); correct iff overall >= the pass threshold. ``majority``: each judge votes pass
    (overall >= threshold) or fail; correct = the strict majority, None on a tied vote. ``score`` = overall
    rescaled to [0, 1]. Low confidence (a jury only): the overall scores spread (max − min) more than
    ``disagreement_threshold`` (mean), or the vote is not unanimous (majority), or a juror gave no valid answer.

Pairwise (outcome of the candidate vs the baseline; win = 1, tie = 0.5, loss = 0 — MT-bench's win rate
counts a tie as half a win):
    per judge, a swap-inconsistent comparison is a tie. ``mean``: score = mean of the judges' values,
    outcome win/loss/tie by score >, <, = 0.5. ``majority``: the outcome most judges gave if more than
    half did, else tie. correct = True (win), False (loss), None (tie). Low confidence: jurors differ.

An item with no valid verdict has no score (``valid`` False): it is never given a default. Its error type says
why: ``judge_call_failed`` (no judge could be called), ``judge_unparsed_output`` (no verdict could be read from
any reply) or ``judge_invalid_output`` (a verdict was read but was off the declared scale or label set).
``judge_constrained`` (1/0): every reply came from constrained decoding under the answer's JSON schema.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from uep_common.contract.judge_config import JudgeConfig
from uep_judge.modes import Comparison, Verdict

VALUE = {"win": 1.0, "tie": 0.5, "loss": 0.0}


@dataclass
class Outcome:
    """One item's judged outcome. ``human_reason`` (hybrid routing): 'judge_invalid', 'swap_inconsistent' or
    'jury_disagreement' when the judge's verdict should not be final, else None."""

    valid: bool
    score: float | None
    is_correct: bool | None
    extracted: str | None
    metrics: dict[str, Any] = field(default_factory=dict)
    human_reason: str | None = None
    error_type: str | None = None
    error_message: str | None = None


def _usage(verdicts: list[Verdict]) -> dict[str, Any]:
    attempts = [a for v in verdicts for a in v.attempts]
    answered = [a for a in attempts if a.raw is not None]
    return {
        "judge_attempts": len(attempts),
        "judge_parse_failures": sum(v.parse_failures for v in verdicts),
        "judge_constrained": int(bool(answered) and all(a.constrained for a in answered)),
    }


def _invalid(verdicts: list[Verdict], metrics: dict[str, Any]) -> Outcome:
    call_failed = all(v.call_failed for v in verdicts)
    failed = [v for v in verdicts if not v.valid]
    unparsed = all(v.status == "unparsed" for v in failed)
    parts = [
        f"{v.judge.name}{'' if v.position == '-' else ' ' + v.position}: {v.status}: {v.error}; raw: {v.raw_text!r}"[:1500]
        for v in failed
    ]
    metrics = {
        **metrics,
        "judge_invalid": 1,
        "judge_verdict_status": "call_failed" if call_failed else "unparsed" if unparsed else "invalid",
        "judge_raw": (verdicts[-1].raw_text or "")[:2000] if verdicts else "",
    }
    return Outcome(
        False,
        None,
        None,
        None,
        metrics,
        human_reason="judge_invalid",
        error_type="judge_call_failed" if call_failed else "judge_unparsed_output" if unparsed else "judge_invalid_output",
        error_message=" | ".join(parts)[:4000] or "no judge verdict",
    )


def rubric_outcome(cfg: JudgeConfig, verdicts: list[Verdict]) -> Outcome:
    """Aggregate rubric/reference verdicts (one per judge); see the module docstring."""
    base = {"judge_mode": cfg.mode, "judge_aggregate": cfg.aggregate, "judge_jury_size": len(verdicts), **_usage(verdicts)}
    valid = [v for v in verdicts if v.valid]
    if not valid:
        return _invalid(verdicts, base)
    overall = [v.rubric_result.overall for v in valid]
    mean_overall = statistics.fmean(overall)
    metrics = {**base, "judge_invalid": 0, "judge_overall": mean_overall}
    for d in cfg.dimensions:
        given = [v.rubric_result.scores[d.name] for v in valid if d.name in v.rubric_result.scores]
        if given:
            metrics[f"judge_{d.name}"] = statistics.fmean(given)
    spread = max(overall) - min(overall)
    threshold = cfg.threshold
    if cfg.aggregate == "majority":
        passes = sum(o >= threshold for o in overall)
        is_correct = True if 2 * passes > len(overall) else False if 2 * passes < len(overall) else None
        disagree = 0 < passes < len(overall)
    else:
        is_correct = mean_overall >= threshold
        disagree = spread > cfg.disagreement_threshold
    low = len(verdicts) > 1 and (disagree or len(valid) < len(verdicts))
    metrics.update({"judge_spread": spread, "judge_low_confidence": int(low)})
    if len(verdicts) > 1:
        for v in verdicts:
            metrics[f"juror_{v.judge.name}"] = v.rubric_result.overall if v.valid else None
    score = (mean_overall - cfg.overall_min) / (cfg.overall_max - cfg.overall_min)
    return Outcome(True, score, is_correct, f"{mean_overall:g}", metrics, "jury_disagreement" if low else None)


def pairwise_outcome(cfg: JudgeConfig, comparisons: list[Comparison]) -> Outcome:
    """Aggregate pairwise comparisons (one per judge, both orders each); see the module docstring."""
    verdicts = [v for c in comparisons for v in (c.ab, c.ba)]
    base = {"judge_mode": cfg.mode, "judge_aggregate": cfg.aggregate, "judge_jury_size": len(comparisons), **_usage(verdicts)}
    valid = [c for c in comparisons if c.valid]
    if not valid:
        return _invalid(verdicts, base)
    outcomes = [o for c in valid if (o := c.outcome) is not None]  # every valid comparison has one
    if cfg.aggregate == "majority":
        top, n = Counter(outcomes).most_common(1)[0]
        outcome = top if 2 * n > len(outcomes) else "tie"
        value = VALUE[outcome]
    else:
        value = statistics.fmean(VALUE[o] for o in outcomes)
        outcome = "win" if value > 0.5 else "loss" if value < 0.5 else "tie"
    inconsistent = [c.inconsistent for c in valid]
    low = len(comparisons) > 1 and (len(set(outcomes)) > 1 or len(valid) < len(comparisons))
    metrics = {
        **base,
        "judge_invalid": 0,
        "pairwise_win": value,
        "pairwise_outcome": outcome,
        "pairwise_inconsistent": statistics.fmean(int(x) for x in inconsistent),
        "judge_low_confidence": int(low),
        "winner_ab": valid[0].ab.pairwise_result.winner,
        "winner_ba": valid[0].ba.pairwise_result.winner,
    }
    is_correct = True if outcome == "win" else False if outcome == "loss" else None
    reason = "swap_inconsistent" if any(inconsistent) else "jury_disagreement" if low else None
    return Outcome(True, value, is_correct, outcome, metrics, reason)
