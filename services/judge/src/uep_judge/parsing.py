"""Parsing judge answers: find the JSON object, then check it against the declared schema and scales.

Finding the object (:func:`extract_json_object`): the whole text strictly (``json.loads``) first; then a scan
with :meth:`json.JSONDecoder.raw_decode` from every ``{`` in the text, which recovers an object inside a code
fence or surrounded by prose without touching the object's own text (string contents containing braces,
quotes or fences decode exactly as written). The first decoded object with one of the expected keys wins,
else the first object found.

Checking it (:func:`parse_rubric`, :func:`parse_pairwise`): a score must be a JSON number (not a string, not a
boolean) inside its declared scale; an answer that fails is invalid — :class:`JudgeParseError` says why — and
is never replaced by a default score.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from uep_common.judge_config import JudgeConfig


class JudgeParseError(ValueError):
    """A judge answer is unusable; the message (fed back to the judge on retry) says why."""


def extract_json_object(text: str, expected_keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """The JSON object in ``text`` (see the module docstring).

    Raises:
        JudgeParseError: no JSON object in the text.
    """
    try:
        whole = json.loads(text.strip())
    except (json.JSONDecodeError, ValueError):
        whole = None
    if isinstance(whole, dict):
        return whole
    decoder = json.JSONDecoder()
    first: dict[str, Any] | None = None
    i = text.find("{")
    while i >= 0:
        try:
            obj, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            if not expected_keys or any(k in obj for k in expected_keys):
                return obj
            first = first if first is not None else obj
            i = text.find("{", end)
        else:
            i = text.find("{", i + 1)
    if first is not None:
        return first
    raise JudgeParseError("no JSON object found in the reply")


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise JudgeParseError(f"{what} must be a number, got {json.dumps(value)[:60]}")
    return float(value)


def _on_scale(value: float, lo: float, hi: float, what: str) -> float:
    if not lo <= value <= hi:
        raise JudgeParseError(f"{what} {value:g} is outside the scale [{lo:g}, {hi:g}]")
    return value


@dataclass(frozen=True)
class RubricVerdict:
    """A valid rubric answer: ``overall`` and the dimension ``scores`` it gave (on their scales), the names
    of declared dimensions it left out (``missing``), its ``reasoning``."""

    overall: float
    scores: dict[str, float]
    reasoning: str | None
    missing: list[str] = field(default_factory=list)


def parse_rubric(text: str, cfg: JudgeConfig) -> RubricVerdict:
    """Parse a rubric/reference answer ``{"scores": {dim: n}, "overall": n, "reasoning": str}``.

    ``overall`` is required; dimension scores are optional (missing ones are listed, never filled in) but
    every one given must be a number on its scale; keys that are not declared dimensions are ignored.

    Raises:
        JudgeParseError: no JSON object, ``overall`` missing or not a number, or any score off its scale.
    """
    obj = extract_json_object(text, ("overall", "scores"))
    if "overall" not in obj:
        raise JudgeParseError('the JSON object has no "overall" score')
    overall = _on_scale(_number(obj["overall"], '"overall"'), cfg.overall_min, cfg.overall_max, '"overall"')
    raw_scores = obj.get("scores", {})
    if raw_scores is None:
        raw_scores = {}
    if not isinstance(raw_scores, dict):
        raise JudgeParseError('"scores" must be an object of dimension → number')
    scores: dict[str, float] = {}
    missing: list[str] = []
    for d in cfg.dimensions:
        if d.name not in raw_scores:
            missing.append(d.name)
            continue
        scores[d.name] = _on_scale(_number(raw_scores[d.name], f'"scores.{d.name}"'), d.min, d.max, f'"scores.{d.name}"')
    reasoning = obj.get("reasoning")
    return RubricVerdict(overall, scores, reasoning if isinstance(reasoning, str) else None, missing)


@dataclass(frozen=True)
class PairwiseVerdict:
    """A valid pairwise answer: ``winner`` 'A', 'B' or 'tie' (as answered, i.e. by position)."""

    winner: str
    reasoning: str | None


def parse_pairwise(text: str) -> PairwiseVerdict:
    """Parse a pairwise answer ``{"winner": "A" | "B" | "tie", "reasoning": str}`` (case-insensitive).

    Raises:
        JudgeParseError: no JSON object, or ``winner`` missing or not one of A, B, tie.
    """
    obj = extract_json_object(text, ("winner",))
    winner = obj.get("winner")
    if not isinstance(winner, str) or winner.strip().lower() not in ("a", "b", "tie"):
        raise JudgeParseError(f'"winner" must be "A", "B" or "tie", got {json.dumps(winner)[:60]}')
    w = winner.strip().lower()
    reasoning = obj.get("reasoning")
    return PairwiseVerdict("tie" if w == "tie" else w.upper(), reasoning if isinstance(reasoning, str) else None)
