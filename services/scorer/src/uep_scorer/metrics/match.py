"""String-match metrics: ``exact_match``, ``contains`` and ``regex_match``.

All three are binary and share the answer normalisation of :mod:`uep_scorer.metrics.normalize`
(params ``ignore_case``, ``ignore_punctuation``, ``ignore_articles``, ``ignore_whitespace`` (default
on), ``regexes_to_ignore``, ``squad``), applied identically to the output and to every reference.

Sources: ``exact_match`` follows lm-evaluation-harness / HF ``evaluate``'s ``exact_match`` options
(``regexes_to_ignore``, ``ignore_case``, ``ignore_punctuation``) and, with ``squad: true``, SQuAD v1.1's
``normalize_answer`` + ``==`` (Rajpurkar et al. 2016); ``regex_match`` reads the answer like
lm-eval's ``RegexFilter`` (first match of the pattern, its capture group).

References are ``{"answer": str}`` or ``{"answers": [str, ...]}``: the output is correct if it matches
any reference. A reference that normalises to nothing is compared in a relaxed form (articles, then
punctuation kept; :func:`uep_scorer.metrics.normalize.normal_forms`), never as the empty string.

``details["extraction"]``: ``"no_answer"`` when there was nothing to compare: a blank output
(``exact_match``, ``contains``), or a pattern that found nothing or whose answer group took no part in the
match (``regex_match``); ``"ok"`` otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from uep_common.contract.metric_params.text import NormalizationParams, RegexMatchParams

from .base import TEXT_REFERENCE, MetricResult, Params, binary_result, extraction_label, read_params
from .normalize import (
    NormalizeOptions,
    RelaxedOutput,
    normal_forms,
    normalization_options,
    reference_answers,
)
from .registry import register_metric


def _compare(
    text: str, refs: list[str], options: NormalizeOptions, test: Callable[[str, str], bool]
) -> tuple[str, int | None, list[str]]:
    """``(normalised text, index of the first reference for which test(text form, reference form) holds or
    None, the references compared in a relaxed form)``; each reference is compared with the text normalised
    at that reference's relaxation."""
    output = RelaxedOutput(text, options)
    index = None
    relaxed = []
    for i, (form, relax) in enumerate(normal_forms(refs, options)):
        if relax:
            relaxed.append(refs[i])
        if index is None and test(output.at(relax), form):
            index = i
    return output.at(0), index, relaxed


def _details(
    output: str, prediction: str, refs: list[str], index: int | None, relaxed: list[str], options: NormalizeOptions
) -> dict[str, Any]:
    details: dict[str, Any] = {
        "prediction": prediction,
        "matched_reference": None if index is None else refs[index],
        "matched_index": index,
        "normalization": options.describe(),
        "extraction": extraction_label(bool(output.strip())),
    }
    if relaxed:
        details["relaxed_references"] = relaxed
    return details


def _equal(text: str, ref: str) -> bool:
    return text == ref


def _contains(text: str, ref: str) -> bool:
    return ref in text


@register_metric
class ExactMatch:
    """``exact_match``: the normalised output equals a normalised reference.

    Reference: ``{"answer": "Paris"}`` or ``{"answers": ["Paris", "paris, France"]}``. Params: the
    normalisation options (all default false except ``ignore_whitespace``; ``squad: true`` is
    SQuAD's ``normalize_answer``). ``extracted`` is the normalised output. ``details``:
    ``prediction`` (normalised output), ``matched_reference`` (the original text of the first
    reference that matched, or ``None``), ``matched_index``, ``normalization`` (the options used),
    ``extraction``, and ``relaxed_references`` when a reference had to be compared in a relaxed form.

    Example: ``"The  Cat!"`` vs ``{"answer": "cat"}`` with ``{"squad": true}`` -> correct; ``"An"`` vs
    ``{"answer": "An"}`` with ``{"squad": true}`` -> correct (compared as ``"an"``), ``"B"`` or ``"the"`` -> wrong.

    Raises:
        MetricInputError: missing/non-text references, a reference empty even in relaxed form, or
            malformed normalisation params.
    """

    name = "exact_match"
    version = "2"
    params_model = NormalizationParams
    reference_schema: dict[str, Any] = TEXT_REFERENCE
    source = "lm-evaluation-harness / HF evaluate exact_match options; SQuAD v1.1 normalize_answer (Rajpurkar et al. 2016)"

    def score(self, output: str, reference: dict[str, Any], params: Params) -> MetricResult:
        """Score one model output; see the class docstring for shapes."""
        options = normalization_options(read_params(NormalizationParams, params))
        refs = reference_answers(reference)
        text = output or ""
        prediction, index, relaxed = _compare(text, refs, options, _equal)
        details = _details(text, prediction, refs, index, relaxed, options)
        return binary_result(self, correct=index is not None, extracted=prediction, details=details)


@register_metric
class Contains:
    """``contains``: a normalised reference occurs as a substring of the normalised output.

    Same reference shapes, params and ``details`` as ``exact_match``. Plain substring test: no word
    boundaries, so ``"4"`` occurs in ``"14"`` and ``"cat"`` in ``"concatenate"`` (use ``regex_match``
    with ``\\b`` for whole words).

    A reference that normalises to nothing is looked for in its relaxed form (module docstring), never as
    the empty string, which occurs in every output.

    Raises:
        MetricInputError: as ``exact_match``.
    """

    name = "contains"
    version = "2"
    params_model = NormalizationParams
    reference_schema: dict[str, Any] = TEXT_REFERENCE
    source = "substring match after lm-eval / SQuAD-style normalisation"

    def score(self, output: str, reference: dict[str, Any], params: Params) -> MetricResult:
        """Score one model output; see the class docstring for shapes."""
        options = normalization_options(read_params(NormalizationParams, params))
        refs = reference_answers(reference)
        text = output or ""
        prediction, index, relaxed = _compare(text, refs, options, _contains)
        details = _details(text, prediction, refs, index, relaxed, options)
        return binary_result(self, correct=index is not None, extracted=prediction, details=details)


@lru_cache(maxsize=256)
def _compile_pattern(pattern: str, flags: int) -> re.Pattern[str]:
    return re.compile(pattern, flags)


@register_metric
class RegexMatch:
    """``regex_match``: the pattern is found in the output, or what it captures equals the answer.

    Params: ``pattern`` (required), ``flags`` (letters of ``imsxa`` = IGNORECASE, MULTILINE, DOTALL,
    VERBOSE, ASCII; default none) and the normalisation options of ``exact_match``.

    Rule (``re.search``, i.e. the **first** match, as lm-eval's ``RegexFilter`` with its defaults):

    * The *extracted* text is the group named ``answer`` if the pattern has one, else group 1 if the
      pattern has any group, else the whole match.
    * Reference without answers (``{}``): correct iff the pattern matches (a format check).
    * Reference ``{"answer": ...}`` / ``{"answers": [...]}``: correct iff the pattern matches and the
      extracted text equals a reference after normalisation (so ``pattern: "answer is (\\\\w+)"`` reads
      the answer and compares it like ``exact_match``). A group that did not take part in the match
      extracts nothing (wrong).

    ``details``: ``matched`` (bool), ``span`` (of the match, or ``None``), ``prediction`` (the
    normalised extracted text), ``matched_reference``, ``mode`` (``"search"`` or ``"compare"``),
    ``extraction`` (``"no_answer"`` when the pattern found nothing or its answer group took no part in the
    match, in both modes, so a hybrid evaluation sends the item to the judge; ``"ok"`` otherwise).

    Raises:
        MetricInputError: ``pattern`` missing or invalid, bad ``flags`` or normalisation params,
            malformed answers (each message names the param).
    """

    name = "regex_match"
    version = "2"
    params_model = RegexMatchParams
    reference_schema: dict[str, Any] = {"type": "object", "properties": TEXT_REFERENCE["properties"]}
    source = "Python re.search, first match and capture group as lm-evaluation-harness RegexFilter"

    def score(self, output: str, reference: dict[str, Any], params: Params) -> MetricResult:
        """Score one model output; see the class docstring for shapes."""
        p = read_params(RegexMatchParams, params)
        pattern = _compile_pattern(p.pattern, p.regex_flags)
        options = normalization_options(p)
        refs = reference_answers(reference, required=False)
        match = pattern.search(output or "")
        details: dict[str, Any] = {
            "mode": "compare" if refs else "search",
            "matched": match is not None,
            "span": None if match is None else list(match.span()),
        }
        if match is None:
            extracted = None
        elif "answer" in pattern.groupindex:
            extracted = match.group("answer")
        else:
            extracted = match.group(1) if pattern.groups else match.group(0)
        details["extraction"] = extraction_label(extracted is not None)
        if not refs:
            return binary_result(self, correct=match is not None, extracted=extracted, details=details)
        prediction = index = None
        relaxed: list[str] = []
        if extracted is not None:
            prediction, index, relaxed = _compare(extracted, refs, options, _equal)
        else:
            normal_forms(refs, options)  # a malformed reference is reported whatever the output
        details.update(
            prediction=prediction,
            matched_reference=None if index is None else refs[index],
            normalization=options.describe(),
        )
        if relaxed:
            details["relaxed_references"] = relaxed
        return binary_result(self, correct=index is not None, extracted=extracted, details=details)
