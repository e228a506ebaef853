"""Parsing judge answers: find the JSON object, then check it against the declared schema and scales.

Finding the object (:func:`extract_json_object`): the whole text strictly (``json.loads``) first; then a scan
with :meth:`json.JSONDecoder.raw_decode` from every ``{`` in the text, which recovers an object inside a code
fence or surrounded by prose without touching the object's own text (string contents containing braces,
quotes or fences decode exactly as written). The first decoded object with one of the expected keys wins,
else the first object found. Only when that strict pass finds no object with an expected key is a repair tried
(:func:`repair_trailing_commas`): from each ``{`` the object's text is scanned with JSON's string rules and a
comma directly before ``}`` or ``]`` *outside* a string is dropped (``{"overall": 4, "reasoning": "fine",}``).
Nothing else is changed, so string contents (``"steps 1, ] done"``) decode exactly as written.

Free text (:func:`parse_labelled`: when the configuration's ``score_label`` is set, e.g. ``Rating``, or when a
reply holds no JSON object at all): the verdict is read as a careful reader would (:mod:`uep_judge.freetext`):
a labelled score (``Rating: 4``, ``Score: 3``), a rating phrase (``I would give it 3``), MT-bench's ``[[4]]``,
``n/N`` with ``N`` the scale's top, or a reply that is only a number; a quoted scale or range (``on a 1 to 5
scale``, ``Rating (1 to 5): 4``, ``Rating: 1-5 scale``) is never taken for the score, and a quoted ``out of
N`` must be the top of the declared scale.

Checking it (:func:`parse_rubric`, :func:`parse_pairwise`): a score must be a JSON number (not a string, not a
boolean) inside its declared scale, and a whole number on a scale declared ``integer`` (``2.5`` on a 1-5 integer
scale is invalid; ``4.0`` is 4); an answer that fails is invalid — :class:`JudgeParseError` says why — and is
never replaced by a default score.

Two kinds of failure (:func:`failure_status`): :class:`UnparsedAnswerError` — no verdict can be read from the reply
at all (no JSON object and no score in its text, or an object without ``overall``/``winner``) — and
:class:`InvalidVerdictError` — a verdict was read but breaks the declared scale or label set (off the scale, a
fraction on an integer scale, a string for a number, an unknown winner). Both are stored as such with the raw
reply, and re-asked within ``max_retries``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from uep_common.contract.judge_config import JudgeConfig
from uep_judge.freetext import DEFAULT_LABELS, last_label, read_score, read_winner


class JudgeParseError(ValueError):
    """A judge answer is unusable; the message (fed back to the judge on retry) says why."""


class UnparsedAnswerError(JudgeParseError):
    """No verdict could be read from the reply."""


class InvalidVerdictError(JudgeParseError):
    """A verdict was read, but it is not on the declared scale or label set."""


def failure_status(exc: JudgeParseError) -> str:
    """``'invalid'`` for an :class:`InvalidVerdictError`, else ``'unparsed'``."""
    return "invalid" if isinstance(exc, InvalidVerdictError) else "unparsed"


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
    raise UnparsedAnswerError("no JSON object found in the reply")


def _number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidVerdictError(f"{what} must be a number, got {json.dumps(value)[:60]}")
    return float(value)


def _on_scale(value: float, lo: float, hi: float, what: str, integer: bool = False) -> float:
    if not lo <= value <= hi:
        raise InvalidVerdictError(f"{what} {value:g} is outside the scale [{lo:g}, {hi:g}]")
    if integer and not value.is_integer():
        raise InvalidVerdictError(f"{what} {value:g} is not a whole number; the scale [{lo:g}, {hi:g}] takes integers only")
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

    With ``cfg.score_label`` set the answer is labelled free text instead, and a reply without a JSON object
    that has ``overall`` (none at all, or one cut short by ``max_tokens``) is read as free text too
    (:func:`parse_labelled`): an object with ``overall`` is always the answer, never the prose around it.

    Raises:
        UnparsedAnswerError: no JSON object and no score in the text, or an object without ``overall``.
        InvalidVerdictError: a score not a number, or off its scale (or not whole on an integer scale).
    """
    if cfg.score_label is not None:
        return parse_labelled(text, cfg)
    try:
        obj: dict[str, Any] | None = extract_json_object(text, ("overall", "scores"))
    except UnparsedAnswerError:
        obj = None
    if obj is None or "overall" not in obj:  # no usable object (none, or cut short by max_tokens): read the text
        try:
            return parse_labelled(text, cfg)
        except UnparsedAnswerError:
            if obj is None:
                raise UnparsedAnswerError("no JSON object found in the reply, nor a score in its text") from None
            raise UnparsedAnswerError('the JSON object has no "overall" score, nor does the text give one') from None
    overall = _on_scale(_number(obj["overall"], '"overall"'), cfg.overall_min, cfg.overall_max, '"overall"', cfg.overall_integer)
    raw_scores = obj.get("scores", {})
    if raw_scores is None:
        raw_scores = {}
    if not isinstance(raw_scores, dict):
        raise InvalidVerdictError('"scores" must be an object of dimension → number')
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


def _check_quoted_scale(of: float | None, hi: float, what: str) -> None:
    if of is not None and of != hi:
        raise InvalidVerdictError(f"{what} is given out of {of:g}, but the scale's top is {hi:g}")


def parse_labelled(text: str, cfg: JudgeConfig) -> RubricVerdict:
    """Read a free-text rubric answer (:mod:`uep_judge.freetext`): the overall score from the labels
    ``cfg.score_label`` (when set) and :data:`~uep_judge.freetext.DEFAULT_LABELS`, a rating phrase,
    ``[[n]]``, ``n/N`` or a bare number; each dimension's from a ``<name>: <n>`` label when given (missing ones
    are listed); the whole reply as ``reasoning``.

    Example: ``parse_labelled("On a 1 to 5 scale this is good.\nRating: 4 out of 5", cfg).overall == 4.0``.

    Raises:
        UnparsedAnswerError: no score in the reply.
        InvalidVerdictError: a score off its scale or not whole on an integer scale, or a quoted ``out of N`` that
            is not the top of the declared scale.
    """
    label = cfg.score_label
    labels = ((label,) if label else ()) + tuple(x for x in DEFAULT_LABELS if not label or x != label.lower())
    what = f'"{label or "overall"}"'
    found = read_score(text, labels, cfg.overall_max)
    if found is None:
        raise UnparsedAnswerError(f'no "{label or "Score"}: <number>" or other score found in the reply')
    _check_quoted_scale(found.quoted_top, cfg.overall_max, what)
    overall = _on_scale(found.value, cfg.overall_min, cfg.overall_max, what, cfg.overall_integer)
    scores: dict[str, float] = {}
    missing: list[str] = []
    for d in cfg.dimensions:
        given = last_label(text, d.name) if label is None or d.name.lower() != label.lower() else None
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
    """Parse a pairwise answer ``{"winner": "A" | "B" | "tie", "reasoning": str}`` (case-insensitive); a
    reply without any JSON object is read as free text (:func:`uep_judge.freetext.read_winner`: ``[[A]]``,
    ``Winner: B``...), with the whole reply as reasoning.

    Raises:
        UnparsedAnswerError: no JSON object and no winner in the text, or an object without ``winner``.
        InvalidVerdictError: ``winner`` not one of A, B, tie.
    """
    try:
        obj = extract_json_object(text, ("winner",))
    except UnparsedAnswerError:
        read = read_winner(text)
        if read is None:
            raise UnparsedAnswerError("no JSON object found in the reply, nor a winner in its text") from None
        return PairwiseVerdict(read, text.strip()[:4000] or None)
    if "winner" not in obj:
        raise UnparsedAnswerError('the JSON object has no "winner"')
    winner = obj.get("winner")
    if not isinstance(winner, str) or winner.strip().lower() not in ("a", "b", "tie"):
        raise InvalidVerdictError(f'"winner" must be "A", "B" or "tie", got {json.dumps(winner)[:60]}')
    w = winner.strip().lower()
    reasoning = obj.get("reasoning")
    return PairwiseVerdict("tie" if w == "tie" else w.upper(), reasoning if isinstance(reasoning, str) else None)
