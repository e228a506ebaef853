"""Reading a judge's verdict out of prose, as a careful reader would, when the reply holds no JSON object.

Only a number that the reply *gives as its rating* is read; a number it merely mentions is not. In order of
precedence (the last occurrence of the first form found wins, so a judge that revises itself is read at its
final word):

1. a labelled score: ``<label>: <n>`` or ``<label> = <n>`` anywhere in the text, for the configured
   ``score_label`` and the usual labels (``overall score``, ``final score``, ``overall``, ``score``,
   ``rating``, ``grade``), markdown emphasis and MT-bench's ``[[n]]`` allowed, a short parenthetical note
   between label and colon allowed (``Score (1 to 5): 4``);
2. a rating phrase: a verb of rating, optionally followed by a few filler words, then the number:
   ``I would give it 3``, ``I'd rate this response a 4``, ``it deserves a 2``, ``a score of 3``; a phrase
   preceded by a negation (``would not give it a 5``) is skipped;
3. MT-bench's bare ``[[n]]``;
4. ``n/N`` or ``n out of N`` where ``N`` is the top of the declared scale;
5. a reply that is nothing but a number.

Never read as the rating: a quoted scale or range (``on a 0 to 3 scale``, ``0-3``, ``1–5``, ``between 1 and
5``, ``Rating: 1-5 scale``): a number followed by ``-``, ``–``, ``—`` or ``to`` and another number is a range,
and a bare number without one of the forms above is not read at all. ``n out of N`` / ``n/N`` after a
labelled or phrased score is the quoted top of the scale, which must then be the declared top.

The caller checks the value against the declared scale: a value outside it, or a fraction on an integer
scale, is an *invalid* verdict (never clamped, rounded or averaged away); a reply with none of the forms is
*unparsed* (never given a default).

Pairwise (:func:`read_winner`): MT-bench's ``[[A]]``, ``[[B]]``, ``[[C]]`` (tie), or a labelled ``winner:``,
``verdict:``, ``better:`` / ``better answer:`` followed by ``A``, ``B``, ``Assistant A`` or ``tie``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NUMBER = r"-?\d+(?:\.\d+)?"
DEFAULT_LABELS = ("overall score", "final score", "overall rating", "final rating", "overall", "score", "rating", "grade")
"""Labels read in every reply, after the configuration's own ``score_label``."""

_RANGE_AHEAD = r"(?![\d.]*[ \t]*(?:-|–|—|to\b|and\b)[ \t]*-?\d)"
"""Refuses a number that begins a range (``0-3``, ``1 to 5``, ``1 and 5``)."""

_OF = r"(?:[ \t]*(?:/|out[ \t]+of)[ \t]*(?P<of>" + NUMBER + r"))?"


@dataclass(frozen=True)
class ReadScore:
    """A score read from prose: ``value``, the scale top the reply quoted with it (``4 out of 5``: 5) or
    None, and ``form`` (which rule of the module docstring found it: 'label', 'phrase', 'brackets',
    'fraction', 'bare')."""

    value: float
    quoted_top: float | None
    form: str


def _words(label: str) -> str:
    return r"[\s_]+".join(re.escape(w) for w in re.split(r"[\s_]+", label.strip()))


def label_pattern(label: str, line_start: bool = False) -> re.Pattern[str]:
    """``<label>[ (note)]: <number>[ out of N | /N]`` (anywhere, or with ``line_start`` only at the start of a
    line after list or quote markers); the number is group ``n`` or ``bracketed``, the quoted top ``of``."""
    lead = r"^[ \t>#*_-]*(?:\d+[.)]\s*)?" if line_start else r"(?<![\w-])"
    return re.compile(
        lead + r"[*_\"']*" + _words(label) + r"[*_\"']*[ \t]*(?:\([^()\n]{0,40}\))?[ \t]*[*_]*[:：=][*_]*[ \t]*"
        r"(?:\[\[[ \t]*(?P<bracketed>" + NUMBER + r")[ \t]*\]\]|(?P<n>" + NUMBER + r"))[*_]*" + _RANGE_AHEAD + _OF,
        re.IGNORECASE | re.MULTILINE,
    )


_PHRASE = re.compile(
    r"(?P<neg>(?:\b(?:not|never|cannot)|n't)\s+(?:\w+\s+){0,2})?"
    r"\b(?:give|giving|gave|rate|rating|rated|score|scoring|scored|assign|assigning|award|awarding|deserves?|"
    r"merits?|earns?|gets?)\b"
    r"(?:[ \t]+(?:it|this|that|the|my|answer|response|reply|assistant's|assistant|a|an|overall|final|score|"
    r"rating|grade|of|as|at|with|solid|total))*"
    r"[ \t]+\**(?P<n>" + NUMBER + r")\**" + _RANGE_AHEAD + _OF,
    re.IGNORECASE,
)
_BRACKETS = re.compile(r"\[\[[ \t]*(?P<n>" + NUMBER + r")[ \t]*\]\]")
_FRACTION = re.compile(r"(?<![\w.])(?P<n>" + NUMBER + r")[ \t]*(?:/|out[ \t]+of)[ \t]*(?P<of>" + NUMBER + r")(?!\w|\.\d)")
_BARE = re.compile(r"^\s*\**(?P<n>" + NUMBER + r")\**\s*\.?\s*$")


def last_label(text: str, label: str) -> tuple[float, float | None] | None:
    """``(score, quoted top or None)`` of the last ``<label>: <n>`` in ``text`` (:func:`label_pattern`)."""
    m = _last(label_pattern(label), text)
    return None if m is None else (float(m.group("bracketed") or m.group("n")), _of(m))


def _last(pattern: re.Pattern[str], text: str, skip_negated: bool = False) -> re.Match[str] | None:
    found = None
    for m in pattern.finditer(text):
        if skip_negated and m.group("neg"):
            continue
        found = m
    return found


def _of(m: re.Match[str]) -> float | None:
    return float(m.group("of")) if m.group("of") else None


def read_score(text: str, labels: tuple[str, ...], top: float) -> ReadScore | None:
    """The score ``text`` gives (rules 1-5 of the module docstring), or None when it gives none.

    ``labels``: the labels of rule 1, most specific first (every label's last occurrence is considered and
    the one latest in the text wins); ``top``: the declared scale's top (rule 4 reads ``n/N`` only with
    ``N == top``).

    Example: ``read_score("On a 1 to 5 scale, I would give it 3.", ("score",), 5) == ReadScore(3.0, None,
    "phrase")``.
    """
    best: re.Match[str] | None = None
    for label in labels:
        m = _last(label_pattern(label), text)
        if m is not None and (best is None or m.start() > best.start()):
            best = m
    if best is not None:
        return ReadScore(float(best.group("bracketed") or best.group("n")), _of(best), "label")
    m = _last(_PHRASE, text, skip_negated=True)
    if m is not None:
        return ReadScore(float(m.group("n")), _of(m), "phrase")
    m = _last(_BRACKETS, text)
    if m is not None:
        return ReadScore(float(m.group("n")), None, "brackets")
    fractions = [f for f in _FRACTION.finditer(text) if float(f.group("of")) == top]
    if fractions:
        return ReadScore(float(fractions[-1].group("n")), top, "fraction")
    m = _BARE.match(text)
    if m is not None:
        return ReadScore(float(m.group("n")), None, "bare")
    return None


_WINNER_LABELLED = re.compile(
    r"(?<![\w-])[*_]*(?:final[ \t]+)?(?:winner|verdict|better(?:[ \t]+(?:answer|response))?)[*_]*[ \t]*(?:is)?[ \t]*[:：=]?"
    r"[*_ \t]*(?:assistant[ \t]+)?\[{0,2}(?P<w>(?-i:A|B)|tie)\]{0,2}(?![\w])",
    re.IGNORECASE,
)
_WINNER_BRACKETS = re.compile(r"\[\[[ \t]*(?P<w>(?-i:A|B|C)|tie)[ \t]*\]\]", re.IGNORECASE)


def read_winner(text: str) -> str | None:
    """The winner a pairwise reply gives in prose: 'A', 'B' or 'tie' (MT-bench's ``[[C]]`` is a tie), from
    the last ``[[X]]``, else the last labelled ``winner``/``verdict``/``better``; None when it gives none."""
    m = _last(_WINNER_BRACKETS, text) or _last(_WINNER_LABELLED, text)
    if m is None:
        return None
    w = m.group("w").strip().lower()
    return "tie" if w in ("tie", "c") else w.upper()
