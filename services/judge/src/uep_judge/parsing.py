"""Parsing judge answers: find the JSON object, then check it against the declared schema and scales.

Finding the object (:func:`extract_json_object`): the whole text strictly (``json.loads``) first; then a scan
with :meth:`json.JSONDecoder.raw_decode` from every ``{`` in the text, which recovers an object inside a code
fence or surrounded by prose without touching the object's own text (string contents containing braces,
quotes or fences decode exactly as written). The first decoded object with one of the expected keys wins,
else the first object found. Only when that strict pass finds no object with an expected key is a repair tried
(:func:`repair_trailing_commas`): from each ``{`` the object's text is scanned with JSON's string rules and a
comma directly before ``}`` or ``]`` *outside* a string is dropped (``{"overall": 4, "reasoning": "fine",}``).
Nothing else is changed, so string contents (``"steps 1, ] done"``) decode exactly as written.

Labelled free text (:func:`parse_labelled`, when the configuration's ``score_label`` is set, e.g. ``Rating``): the
score is the number right after ``<label>:`` at the start of a line (markdown ``**`` and MT-bench's ``[[4]]``
allowed), optionally followed by ``out of N`` or ``/N``, which must then be the top of the declared scale; the
last such line wins. Only the labelled number is read, so a scale the judge quotes (``on a 1 to 5 scale``,
``Rating (1 to 5): 4``, ``Rating: 1-5 scale``) is never taken for the score.

Checking it (:func:`parse_rubric`, :func:`parse_pairwise`): a score must be a JSON number (not a string, not a
boolean) inside its declared scale, and a whole number on a scale declared ``integer`` (``2.5`` on a 1-5 integer
scale is invalid; ``4.0`` is 4); an answer that fails is invalid — :class:`JudgeParseError` says why — and is
never replaced by a default score.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from uep_common.contract.judge_config import JudgeConfig


class JudgeParseError(ValueError):
    """A judge answer is unusable; the message (fed back to the judge on retry) says why."""


def _scan_objects(text: str, expected_keys: tuple[str, ...]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Strict scan: ``(first object with an expected key, first object)`` decoded from some ``{`` of ``text``."""
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
                return obj, first if first is not None else obj
            first = first if first is not None else obj
            i = text.find("{", end)
        else:
            i = text.find("{", i + 1)
    return None, first


def repair_trailing_commas(text: str, start: int) -> str | None:
    """The object text starting at the ``{`` at ``start`` with every comma that directly precedes (whitespace
    aside) a ``}`` or ``]`` outside a JSON string removed, up to the brace that closes it; ``None`` when the
    braces never close. String contents, escapes included, are copied unchanged."""
    out: list[str] = []
    depth = 0
    in_string = escaped = False
    pending_comma = -1  # index in out of a comma outside strings not yet followed by a non-space
    for ch in text[start:]:
        if in_string:
            out.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch in "}]" and pending_comma >= 0:
            del out[pending_comma]
        if not ch.isspace():
            pending_comma = -1
        out.append(ch)
        if ch == '"':
            in_string = True
        elif ch == ",":
            pending_comma = len(out) - 1
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return "".join(out)
    return None


def _repaired_objects(text: str, expected_keys: tuple[str, ...]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """As :func:`_scan_objects`, over the objects that decode only after :func:`repair_trailing_commas`."""
    first: dict[str, Any] | None = None
    i = text.find("{")
    while i >= 0:
        repaired = repair_trailing_commas(text, i)
        obj = None
        if repaired is not None:
            try:
                obj = json.loads(repaired)
            except json.JSONDecodeError:
                obj = None
        if isinstance(obj, dict):
            if not expected_keys or any(k in obj for k in expected_keys):
                return obj, first if first is not None else obj
            first = first if first is not None else obj
        i = text.find("{", i + 1)
    return None, first


_REPAIR_LIMIT = 200_000
"""Longest reply (characters) the trailing-comma repair scans; it is quadratic in the number of braces."""


def extract_json_object(text: str, expected_keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """The JSON object in ``text`` (see the module docstring): strict parsing first, the trailing-comma
    repair only when that finds no object with one of ``expected_keys``.

    Raises:
        JudgeParseError: no JSON object in the text.
    """
    try:
        whole = json.loads(text.strip())
    except (json.JSONDecodeError, ValueError):
        whole = None
    if isinstance(whole, dict):
        return whole
    found, first = _scan_objects(text, expected_keys)
    if found is not None:
        return found
    if "," in text and len(text) <= _REPAIR_LIMIT:
        repaired, repaired_first = _repaired_objects(text, expected_keys)
        if repaired is not None:
            return repaired
        first = first if first is not None else repaired_first
    if first is not None:
        return first
    raise JudgeParseError("no JSON object found in the reply")


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise JudgeParseError(f"{what} must be a number, got {json.dumps(value)[:60]}")
    return float(value)


def _on_scale(value: float, lo: float, hi: float, what: str, integer: bool = False) -> float:
    if not lo <= value <= hi:
        raise JudgeParseError(f"{what} {value:g} is outside the scale [{lo:g}, {hi:g}]")
    if integer and not value.is_integer():
        raise JudgeParseError(f"{what} {value:g} is not a whole number; the scale [{lo:g}, {hi:g}] takes integers only")
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

    With ``cfg.score_label`` set the answer is labelled free text instead (:func:`parse_labelled`).

    Raises:
        JudgeParseError: no JSON object, ``overall`` missing or not a number, or any score off its scale
            (or not whole on an integer scale).
    """
    if cfg.score_label is not None:
        return parse_labelled(text, cfg)
    obj = extract_json_object(text, ("overall", "scores"))
    if "overall" not in obj:
        raise JudgeParseError('the JSON object has no "overall" score')
    overall = _on_scale(_number(obj["overall"], '"overall"'), cfg.overall_min, cfg.overall_max, '"overall"', cfg.overall_integer)
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
        scores[d.name] = _on_scale(
            _number(raw_scores[d.name], f'"scores.{d.name}"'), d.min, d.max, f'"scores.{d.name}"', d.integer
        )
    reasoning = obj.get("reasoning")
    return RubricVerdict(overall, scores, reasoning if isinstance(reasoning, str) else None, missing)


_NUMBER = r"-?\d+(?:\.\d+)?"


def _label_pattern(label: str) -> re.Pattern[str]:
    """``<label>[ (note)]: <number>[ out of N | /N]`` at a line start (rules in the module docstring)."""
    words = r"[\s_]+".join(re.escape(w) for w in re.split(r"[\s_]+", label.strip()))
    return re.compile(
        r"^[ \t>#*_-]*(?:\d+[.)]\s*)?[*_]*" + words + r"[*_]*[ \t]*(?:\([^()\n]{0,40}\))?[ \t]*[*_]*[:：=][*_]*[ \t]*"
        r"(?:\[\[[ \t]*(?P<bracketed>" + _NUMBER + r")[ \t]*\]\]|(?P<n>" + _NUMBER + r"))[*_]*"
        r"(?![\d.]*[ \t]*(?:-|–|—|to\b)[ \t]*\d)"
        r"(?:[ \t]*(?:/|out[ \t]+of)[ \t]*(?P<of>" + _NUMBER + r"))?",
        re.IGNORECASE | re.MULTILINE,
    )


def _labelled_score(text: str, label: str) -> tuple[float, float | None] | None:
    """``(score, quoted top of scale or None)`` of the last ``label`` line of ``text``, or None."""
    found = None
    for m in _label_pattern(label).finditer(text):
        found = m
    if found is None:
        return None
    value = float(found.group("bracketed") or found.group("n"))
    return value, float(found.group("of")) if found.group("of") else None


def _check_quoted_scale(of: float | None, hi: float, what: str) -> None:
    if of is not None and of != hi:
        raise JudgeParseError(f"{what} is given out of {of:g}, but the scale's top is {hi:g}")


def parse_labelled(text: str, cfg: JudgeConfig) -> RubricVerdict:
    """Parse a labelled free-text rubric answer (``cfg.score_label``, e.g. ``"Rating: 4 out of 5"``): the
    overall score from the last ``<score_label>:`` line, each dimension's from a ``<name>:`` line when given
    (missing ones are listed), the whole reply as ``reasoning``.

    Example: ``parse_labelled("On a 1 to 5 scale this is good.\\nRating: 4 out of 5", cfg).overall == 4.0``.

    Raises:
        JudgeParseError: no labelled score line, a score off its scale or not whole on an integer scale, or a
            quoted ``out of N`` that is not the top of the declared scale.
    """
    label = cfg.score_label or "Rating"
    found = _labelled_score(text, label)
    if found is None:
        raise JudgeParseError(f'no "{label}: <number>" line found in the reply')
    value, of = found
    _check_quoted_scale(of, cfg.overall_max, f'"{label}"')
    overall = _on_scale(value, cfg.overall_min, cfg.overall_max, f'"{label}"', cfg.overall_integer)
    scores: dict[str, float] = {}
    missing: list[str] = []
    for d in cfg.dimensions:
        given = _labelled_score(text, d.name) if d.name.lower() != label.lower() else None
        if given is None:
            missing.append(d.name)
            continue
        _check_quoted_scale(given[1], d.max, f'"{d.name}"')
        scores[d.name] = _on_scale(given[0], d.min, d.max, f'"{d.name}"', d.integer)
    return RubricVerdict(overall, scores, text.strip()[:4000] or None, missing)


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
