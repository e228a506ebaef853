"""``fuzzy_match``: string similarity with rapidfuzz, thresholded.

Rule: after the normalisation of :mod:`uep_scorer.metrics.normalize` (same params as
``exact_match``; by default only whitespace is collapsed), each reference is compared with
``rapidfuzz.fuzz.ratio`` (normalised Indel similarity of the *full* strings, 0-100; rapidfuzz >= 3
applies no preprocessing of its own). The best reference counts: ``score = best / 100`` and the output
is correct iff ``best >= threshold`` (default 90, inclusive).

``partial: true`` uses ``fuzz.partial_ratio`` (best alignment of the shorter string inside the longer
one) instead, but **only** for a reference of at least ``min_reference_length`` characters (default
20, after normalisation): a short reference such as ``"a"`` or ``"42"`` would otherwise score 100
against almost any output that contains it. A shorter reference falls back to the full ``ratio`` and
``details`` says so.

A reference that normalises to nothing is compared in a relaxed form (articles, then punctuation kept;
:func:`uep_scorer.metrics.normalize.normal_forms`), not as ``""`` (which ``ratio`` scores 100 against every
empty output). ``details["extraction"]`` is ``"no_answer"`` for a blank output, else ``"ok"``.

Source: rapidfuzz ``fuzz.ratio`` / ``fuzz.partial_ratio`` (Indel distance, as python-Levenshtein /
fuzzywuzzy).
"""

from __future__ import annotations

from typing import Any

from rapidfuzz import fuzz

from uep_common.contract.metric_params.text import FuzzyMatchParams

from .base import TEXT_REFERENCE, MetricResult, Params, extraction_label, read_params
from .normalize import (
    RelaxedOutput,
    normal_forms,
    normalization_options,
    reference_answers,
)
from .registry import register_metric


@register_metric
class FuzzyMatch:
    """``fuzzy_match``: rapidfuzz similarity of output and reference reaches ``threshold``.

    Reference: ``{"answer": str}`` or ``{"answers": [...]}`` (the most similar one counts). Params:
    ``threshold`` (0-100, default 90), ``partial`` (default false), ``min_reference_length`` (default
    20), plus the normalisation options. Result: binary ``is_correct``, but ``score`` is the
    similarity / 100 (e.g. 0.93), not 1.0/0.0. ``extracted`` is the normalised output. ``details``:
    ``ratio`` (best, 0-100), ``method`` (``"ratio"`` or ``"partial_ratio"`` for the best reference),
    ``matched_reference`` (best reference text), ``threshold``, ``partial_fallback`` (true when
    ``partial`` was asked for but the best reference was shorter than ``min_reference_length``, so the
    full ``ratio`` was used), ``normalization``.

    Raises:
        MetricInputError: missing/non-text references, or a bad ``threshold``/``partial``/
            ``min_reference_length``/normalisation param (the message names it).
    """

    name = "fuzzy_match"
    version = "2"
    params_model = FuzzyMatchParams
    reference_schema: dict[str, Any] = TEXT_REFERENCE
    source = "rapidfuzz fuzz.ratio / fuzz.partial_ratio (normalised Indel similarity)"

    def score(self, output: str, reference: dict[str, Any], params: Params) -> MetricResult:
        """Score one model output; see the class docstring for shapes."""
        p = read_params(FuzzyMatchParams, params)
        threshold, partial, min_len = p.threshold, p.partial, p.min_reference_length
        options = normalization_options(p)
        refs = reference_answers(reference)
        text = output or ""
        relaxed_output = RelaxedOutput(text, options)
        prediction = relaxed_output.at(0)
        best: tuple[float, int, str, bool] | None = None  # (ratio, index, method, fell_back)
        relaxed = []
        for i, (norm, relax) in enumerate(normal_forms(refs, options)):
            if relax:
                relaxed.append(refs[i])
            use_partial = partial and len(norm) >= min_len
            ratio = (fuzz.partial_ratio if use_partial else fuzz.ratio)(relaxed_output.at(relax), norm)
            if best is None or ratio > best[0]:
                best = (ratio, i, "partial_ratio" if use_partial else "ratio", partial and not use_partial)
        assert best is not None  # reference_answers never returns an empty list when required
        ratio, index, method, fell_back = best
        details: dict[str, Any] = {
            "ratio": ratio,
            "method": method,
            "matched_reference": refs[index],
            "threshold": threshold,
            "partial_fallback": fell_back,
            "normalization": options.describe(),
            "extraction": extraction_label(bool(text.strip())),
        }
        if relaxed:
            details["relaxed_references"] = relaxed
        if fell_back:
            details["partial_fallback_reason"] = f"reference shorter than min_reference_length={min_len}; full ratio used"
        # Binary verdict, graded score (not binary_result's 1.0/0.0).
        return MetricResult(self.name, self.version, ratio >= threshold, ratio / 100.0, prediction, details)
