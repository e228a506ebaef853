"""``token_f1``: token-level F1 of the output against the reference answer(s), SQuAD or DROP style.

Styles (param ``style``):

* ``squad`` (default): SQuAD v1.1's official ``evaluate-v1.1.py`` ``f1_score`` (Rajpurkar et al. 2016):
  tokens are ``normalize_answer(text).split()`` (lower case, ASCII punctuation and the articles a/an/the
  deleted, split on every whitespace character), the overlap is the multiset intersection (``Counter &``),
  ``precision = overlap / len(prediction tokens)``, ``recall = overlap / len(gold tokens)``, F1 their
  harmonic mean, 0 when nothing overlaps. ``exact_match`` is the script's ``exact_match_score``.
* ``drop``: DROP's F1 (Dua et al. 2019, ``drop_eval.py`` ``get_metrics``, as in lm-evaluation-harness
  ``tasks/drop/utils.py``) for a single-span answer: the text is split into tokens on whitespace and
  hyphens; each token is lower-cased, loses its ASCII punctuation unless it is a number, a number is
  written as a float (``"12"`` and ``"12.0"`` both become ``"12.0"``, ``"1,000"`` becomes ``"1000.0"``),
  articles are deleted; F1 compares the token **sets**, and is 0 when the gold answer holds numbers and the
  prediction none of them. ``exact_match`` is 1 when the normalised strings are equal.

  Deviation, a named parameter: ``split_on`` ``"whitespace"`` (default) splits on every whitespace
  character; the reference's ``re.split(" |-", ...)`` splits on the space only (``split_on: "space"``), so a
  prediction ``"12\\n\\nQuestion: ..."`` keeps ``"12\\n\\nquestion"`` as one token, never recognises the number
  12 and scores 0 against gold ``"12"``. With ``"whitespace"`` it scores P 0.25, R 1, F1 0.4. The reference
  rounds F1 to two decimals for its report; the score here is not rounded.

Common rules:

* Several references (``{"answers": [...]}``) are alternatives: F1 and exact match are each the maximum
  over them (SQuAD's ``metric_max_over_ground_truths``); ``precision``/``recall`` are the best-F1
  reference's. DROP's multi-span answers (one answer made of several spans) are not read.
* ``stop_at`` (list of strings, default none): the output is cut at the first occurrence of any of them
  before scoring, e.g. ``["\\n\\n", "Question:"]`` to drop the next few-shot turn a base model writes after
  its answer; then ``"12\\n\\nQuestion: how many..."`` scores F1 1.0 against ``"12"``.
* A reference that normalises to nothing (gold ``"An"``) is compared with its articles (then punctuation)
  kept, the prediction normalised the same way (:func:`uep_scorer.metrics.normalize.normal_forms`, the rule
  of ``exact_match``): the official scripts would score it 0 against everything (SQuAD) or 1 against every
  empty prediction (DROP's empty-bag precision and recall of 1).
* ``score`` is F1 in [0, 1]. ``is_correct`` is ``None`` (a graded metric) unless ``threshold`` (0-1) is
  given, then ``F1 >= threshold``. ``details["extraction"]`` is ``"no_answer"`` for a blank output (after
  ``stop_at``), else ``"ok"``.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Any

from uep_common.contract.metric_params.text import TokenF1Params

from .base import TEXT_REFERENCE, MetricInputError, MetricResult, Params, extraction_label, read_params
from .normalize import MAX_RELAX, reference_answers, squad_normalize
from .registry import register_metric

_SPLITS = {"whitespace": re.compile(r"\s+|-"), "space": re.compile(r" |-")}
_DROP_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_ASCII_PUNCT_TABLE = str.maketrans("", "", string.punctuation)


def _is_number(text: str) -> bool:
    """DROP's ``_is_number``: ``float(text)`` succeeds."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def drop_normalize(text: str, split: re.Pattern[str] = _SPLITS["whitespace"], relax: int = 0) -> str:
    """DROP's ``_normalize`` (module docstring) with the token ``split`` given; ``relax`` 1 keeps articles,
    2 also punctuation. Example: ``drop_normalize("The 12 cats-ago") == "12.0 cats ago"``."""
    tokens = []
    for token in split.split(text):
        token = token.lower()
        number = _is_number(token)
        if not number and relax < 2:
            token = token.translate(_ASCII_PUNCT_TABLE)
            number = _is_number(token)
        if number:
            token = str(float(token))
        if relax < 1:
            token = _DROP_ARTICLES.sub(" ", token)
        token = " ".join(token.split())
        if token:
            tokens.append(token)
    return " ".join(tokens)


def _squad_scores(prediction: list[str], gold: list[str]) -> tuple[float, float, float]:
    """SQuAD v1.1 ``f1_score`` with its precision and recall: ``(precision, recall, f1)``."""
    common = Counter(prediction) & Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0, 0.0, 0.0
    precision = same / len(prediction)
    recall = same / len(gold)
    return precision, recall, 2 * precision * recall / (precision + recall)


def _drop_scores(prediction: set[str], gold: set[str]) -> tuple[float, float, float]:
    """DROP ``_compute_f1`` behind ``_match_numbers_if_present``: ``(precision, recall, f1)``."""
    gold_numbers = {t for t in gold if _is_number(t)}
    if gold_numbers and not gold_numbers & {t for t in prediction if _is_number(t)}:
        return 0.0, 0.0, 0.0
    overlap = len(gold & prediction)
    precision = overlap / len(prediction) if prediction else 1.0
    recall = overlap / len(gold) if gold else 1.0
    f1 = 0.0 if precision == 0.0 and recall == 0.0 else 2 * precision * recall / (precision + recall)
    return precision, recall, f1


def cut_at(text: str, stops: tuple[str, ...]) -> str:
    """``text`` up to the first occurrence of any of ``stops`` (the whole text when none occurs)."""
    end = len(text)
    for stop in stops:
        i = text.find(stop, 0, end)
        if i >= 0:
            end = i
    return text[:end]


@register_metric
class TokenF1:
    """``token_f1``: SQuAD (default) or DROP token-level F1; rules in the module docstring.

    Reference: ``{"answer": str}`` or ``{"answers": [str, ...]}``. Params: ``style`` (``squad`` | ``drop``),
    ``stop_at`` (list of strings), ``split_on`` (``whitespace`` | ``space``, DROP only), ``threshold`` (0-1).

    Result: ``score`` = F1 (0-1); ``is_correct`` ``None`` unless ``threshold``; ``extracted`` = the
    normalised prediction. ``details``: ``precision``, ``recall``, ``f1``, ``exact_match`` (0/1), ``style``,
    ``matched_reference`` (the best-F1 reference), ``cut`` (whether ``stop_at`` shortened the output),
    ``extraction``, ``threshold``, and ``relaxed_references`` when a reference was compared in relaxed form.

    Example: ``"the cat sat"`` vs ``{"answer": "cat sat on the mat"}`` -> P 1.0, R 0.5, F1 2/3 (SQuAD).

    Raises:
        MetricInputError: missing/non-text references, a reference empty even in relaxed form, or a
            malformed param (the message names it).
    """

    name = "token_f1"
    version = "1"
    params_model = TokenF1Params
    reference_schema: dict[str, Any] = TEXT_REFERENCE
    source = "SQuAD v1.1 evaluate-v1.1.py f1_score (Rajpurkar et al. 2016); DROP drop_eval.py get_metrics (Dua et al. 2019)"
    submetrics = ("precision", "recall", "exact_match")
    """Detail keys reported as metrics of their own (SQuAD and DROP report exact match beside F1)."""

    def score(self, output: str, reference: dict[str, Any], params: Params) -> MetricResult:
        """Score one model output; see the class docstring for shapes."""
        p = read_params(TokenF1Params, params)
        style, split, stops, threshold = p.style, _SPLITS[p.split_on], tuple(p.stop_at), p.threshold
        refs = reference_answers(reference)
        raw = output or ""
        text = cut_at(raw, stops) if stops else raw

        def normalize(value: str, relax: int) -> str:
            return squad_normalize(value, relax) if style == "squad" else drop_normalize(value, split, relax)

        predictions: dict[int, str] = {}
        best = (-1.0, 0.0, 0.0, 0)  # (f1, precision, recall, index)
        exact = 0
        relaxed = []
        for i, ref in enumerate(refs):
            for relax in range(MAX_RELAX + 1):
                gold = normalize(ref, relax)
                if gold:
                    break
            else:
                raise MetricInputError(f"reference {ref!r} is empty after normalisation; it would match every empty output")
            if relax:
                relaxed.append(ref)
            if relax not in predictions:
                predictions[relax] = normalize(text, relax)
            prediction = predictions[relax]
            if style == "squad":
                precision, recall, f1 = _squad_scores(prediction.split(), gold.split())
            else:
                precision, recall, f1 = _drop_scores(set(prediction.split()), set(gold.split()))
            exact = max(exact, int(prediction == gold))
            if f1 > best[0]:
                best = (f1, precision, recall, i)
        f1, precision, recall, index = best
        details: dict[str, Any] = {
            "precision": precision,
            "recall": recall,
            "f1": f1,
            "exact_match": exact,
            "style": style,
            "matched_reference": refs[index],
            "cut": len(text) != len(raw),
            "extraction": extraction_label(bool(text.strip())),
            "threshold": threshold,
        }
        if relaxed:
            details["relaxed_references"] = relaxed
        correct = None if threshold is None else f1 >= threshold
        return MetricResult(self.name, self.version, correct, f1, predictions.get(0, normalize(text, 0)), details)
