"""Answer-text normalisation and reference parsing shared by the text metrics.

Normalisation (:func:`normalize_text`) applies these steps, in this order; each is off unless its
option is set (``ignore_whitespace`` is on by default):

1. ``regexes_to_ignore``: every match of each regex is deleted, in list order (as the
   ``regexes_to_ignore`` argument of lm-evaluation-harness / HF ``evaluate``'s ``exact_match``).
2. ``ignore_case``: ``str.lower()``.
3. ``ignore_punctuation``: deletes every character of ``string.punctuation`` (ASCII, as SQuAD and
   lm-eval) **and** every Unicode punctuation character (category ``P*``: ``，。！？「」—…`` ...), so
   that it also works for Chinese/Japanese answers.
4. ``ignore_articles``: the English articles ``a``/``an``/``the`` as whole words (case-insensitive)
   are replaced by a space.
5. ``ignore_whitespace``: whitespace runs collapse to one space and the ends are stripped
   (``" ".join(text.split())``).

``squad=True`` replaces steps 2-5 by SQuAD v1.1's ``normalize_answer`` verbatim (lower case, delete
ASCII ``string.punctuation``, delete ``\\b(a|an|the)\\b``, fix whitespace; Rajpurkar et al. 2016, official
``evaluate-v1.1.py``); ``regexes_to_ignore`` still runs first, the other options are ignored.

**A reference that normalises to nothing** (the option letter or word ``"An"`` under article removal, ``"?"``
under punctuation removal) is not compared in that empty form, which would equal every output that also
normalises to nothing (and occur in every output, for ``contains``). :func:`normal_forms` relaxes the
normalisation for that reference only, step by step, until it keeps some text: first the articles are kept
(relaxation 1), then the punctuation too (relaxation 2); the output is normalised with the same relaxation
before it is compared with that reference, so gold ``"An"`` with ``squad: true`` matches the output ``"An"``
(both ``"an"``) and not ``"B"`` or ``"the"``. A reference that is still empty (blank, or deleted whole by
``regexes_to_ignore``) is a :class:`~uep_scorer.metrics.base.MetricInputError`.

:func:`normalization_options` reads these options from a metric's ``params`` and raises
:class:`~uep_scorer.metrics.base.MetricInputError` (naming the param) for a malformed value;
:func:`reference_answers` reads ``{"answer": ...}`` / ``{"answers": [...]}`` references.
"""

from __future__ import annotations

import re
import string
import sys
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .base import MetricInputError

_ASCII_PUNCT = frozenset(string.punctuation)
_ASCII_PUNCT_TABLE = str.maketrans("", "", string.punctuation)


@lru_cache(maxsize=1)
def _punct_table() -> dict[int, None]:
    """Every Unicode punctuation character (categories Pc, Pd, Ps, Pe, Pi, Pf, Po) plus ASCII
    punctuation (which also holds symbols such as ``$ + < = > ^ ` | ~``), as a ``str.translate`` table
    deleting them. Built on first use (about 0.2 s: it scans every code point)."""
    return {
        cp: None for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)).startswith("P") or chr(cp) in _ASCII_PUNCT
    }


_ARTICLES = re.compile(r"\b(a|an|the)\b", re.IGNORECASE)
_SQUAD_ARTICLES = re.compile(r"\b(a|an|the)\b")


def squad_normalize(text: str, relax: int = 0) -> str:
    """SQuAD v1.1 ``normalize_answer``: lower, drop ASCII punctuation, articles, extra whitespace.

    Same steps as the official ``evaluate-v1.1.py`` (Rajpurkar et al. 2016), e.g.
    ``squad_normalize("The  Cat!") == "cat"``. ``relax`` 1 keeps the articles, 2 also the punctuation
    (see the module docstring; 0, the default, is the official function).
    """
    text = text.lower()
    if relax < 2:
        text = text.translate(_ASCII_PUNCT_TABLE)  # = "".join(ch for ch in text if ch not in set(string.punctuation))
    if relax < 1:
        text = _SQUAD_ARTICLES.sub(" ", text)
    return " ".join(text.split())


@dataclass(frozen=True)
class NormalizeOptions:
    """Which normalisation steps to apply (see the module docstring for their order)."""

    ignore_case: bool = False
    ignore_punctuation: bool = False
    ignore_articles: bool = False
    ignore_whitespace: bool = True
    regexes_to_ignore: tuple[str, ...] = ()
    squad: bool = False

    def describe(self) -> dict[str, Any]:
        """JSON-serialisable summary of the options, for ``details``."""
        if self.squad:
            return {"squad": True, "regexes_to_ignore": list(self.regexes_to_ignore)}
        return {
            "ignore_case": self.ignore_case,
            "ignore_punctuation": self.ignore_punctuation,
            "ignore_articles": self.ignore_articles,
            "ignore_whitespace": self.ignore_whitespace,
            "regexes_to_ignore": list(self.regexes_to_ignore),
        }


DEFAULT_OPTIONS = NormalizeOptions()

NORMALIZATION_PARAMS: dict[str, str] = {
    "ignore_case": "lower-case both sides before comparing (default false)",
    "ignore_punctuation": "delete ASCII and Unicode punctuation (default false)",
    "ignore_articles": "delete the English articles a/an/the as whole words (default false)",
    "ignore_whitespace": "collapse whitespace runs to one space and strip the ends (default true)",
    "regexes_to_ignore": "list of regexes whose matches are deleted first, as lm-eval exact_match (default [])",
    "squad": "use SQuAD v1.1 normalize_answer instead of the flags above (default false)",
}
NORMALIZATION_PARAM_TYPES: dict[str, str] = {
    "ignore_case": "bool",
    "ignore_punctuation": "bool",
    "ignore_articles": "bool",
    "ignore_whitespace": "bool",
    "regexes_to_ignore": "string_list",
    "squad": "bool",
}
"""Types of :data:`NORMALIZATION_PARAMS` (see :mod:`uep_common.contract.params`)."""
"""Param descriptions shared by every metric that normalises its inputs."""


@lru_cache(maxsize=256)
def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _bool_param(params: dict[str, Any], name: str, default: bool) -> bool:
    value = params.get(name, default)
    if not isinstance(value, bool):
        raise MetricInputError(f"param {name!r} must be true or false; got {value!r}")
    return value


def normalization_options(params: dict[str, Any]) -> NormalizeOptions:
    """Read the normalisation params (names in :data:`NORMALIZATION_PARAMS`) from ``params``.

    Raises:
        MetricInputError: a flag that is not a bool, or ``regexes_to_ignore`` that is not a list of
            valid regex strings (the message names the param).
    """
    if not any(name in params for name in NORMALIZATION_PARAMS):
        return DEFAULT_OPTIONS
    raw = params.get("regexes_to_ignore") or ()
    if isinstance(raw, str):
        raw = (raw,)
    if not isinstance(raw, (list, tuple)) or not all(isinstance(r, str) for r in raw):
        raise MetricInputError(f"param 'regexes_to_ignore' must be a list of regex strings; got {raw!r}")
    for pattern in raw:
        try:
            _compile(pattern)
        except re.error as exc:
            raise MetricInputError(f"param 'regexes_to_ignore': invalid regex {pattern!r}: {exc}") from exc
    return NormalizeOptions(
        ignore_case=_bool_param(params, "ignore_case", False),
        ignore_punctuation=_bool_param(params, "ignore_punctuation", False),
        ignore_articles=_bool_param(params, "ignore_articles", False),
        ignore_whitespace=_bool_param(params, "ignore_whitespace", True),
        regexes_to_ignore=tuple(raw),
        squad=_bool_param(params, "squad", False),
    )


def normalize_text(text: str, options: NormalizeOptions = DEFAULT_OPTIONS, relax: int = 0) -> str:
    """Normalise ``text`` under ``options`` (steps and order in the module docstring); ``relax`` 1 skips
    article removal, 2 also punctuation removal (used for references that would otherwise be empty).

    Example: ``normalize_text("The  Cat!", NormalizeOptions(squad=True)) == "cat"``.
    """
    for pattern in options.regexes_to_ignore:
        text = _compile(pattern).sub("", text)
    if options.squad:
        return squad_normalize(text, relax)
    if options.ignore_case:
        text = text.lower()
    if options.ignore_punctuation and relax < 2:
        text = text.translate(_punct_table())
    if options.ignore_articles and relax < 1:
        text = _ARTICLES.sub(" ", text)
    if options.ignore_whitespace:
        text = " ".join(text.split())
    return text


MAX_RELAX = 2


def normal_forms(refs: list[str], options: NormalizeOptions) -> list[tuple[str, int]]:
    """``(normal form, relaxation)`` of each reference: the form under ``options`` (relaxation 0) unless that
    is empty, else the first relaxation (1: keep articles, 2: keep punctuation too) that keeps some text.

    Example: ``normal_forms(["An", "Paris"], NormalizeOptions(squad=True)) == [("an", 1), ("paris", 0)]``.

    Raises:
        MetricInputError: a reference that is empty even with every step relaxed (the message quotes it).
    """
    forms = []
    for ref in refs:
        for relax in range(MAX_RELAX + 1):
            norm = normalize_text(ref, options, relax)
            if norm.strip():
                forms.append((norm, relax))
                break
        else:
            raise MetricInputError(f"reference {ref!r} is empty after normalisation; it would match every empty output")
    return forms


class RelaxedOutput:
    """The output normalised under ``options`` at each relaxation asked for (each computed once)."""

    __slots__ = ("_forms", "_options", "_text")

    def __init__(self, text: str, options: NormalizeOptions) -> None:
        self._text = text
        self._options = options
        self._forms: dict[int, str] = {}

    def at(self, relax: int) -> str:
        """The output's normal form at relaxation ``relax`` (0: the options as given)."""
        form = self._forms.get(relax)
        if form is None:
            form = self._forms[relax] = normalize_text(self._text, self._options, relax)
        return form


def _as_text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise MetricInputError(f"reference {where} must be a string (or number); got {type(value).__name__}")


def reference_answers(reference: dict[str, Any], *, required: bool = True) -> list[str]:
    """The reference texts of ``{"answer": str}`` and/or ``{"answers": [str, ...]}``.

    Both keys may be present (the texts are united, ``answer`` first, duplicates dropped). Numbers
    are turned into strings. With ``required=False`` a reference with neither key gives ``[]``.

    Raises:
        MetricInputError: neither key (when required), an empty ``answers`` list, or a non-text value.
    """
    texts: list[str] = []
    if "answer" in reference:
        texts.append(_as_text(reference["answer"], "'answer'"))
    if "answers" in reference:
        answers = reference["answers"]
        if not isinstance(answers, (list, tuple)) or not answers:
            raise MetricInputError("reference 'answers' must be a non-empty list of strings")
        texts.extend(_as_text(a, "'answers' item") for a in answers)
    if not texts and required:
        raise MetricInputError("text reference needs an 'answer' string or an 'answers' list, e.g. {'answer': 'Paris'}")
    return list(dict.fromkeys(texts))
