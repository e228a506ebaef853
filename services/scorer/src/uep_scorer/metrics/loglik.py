"""Log-likelihood multiple choice: ``acc`` and ``acc_norm`` as in lm-evaluation-harness.

Source: lm-evaluation-harness ``ConfigurableTask.process_results`` for ``output_type:
multiple_choice``: ``pred = np.argmax(lls)``, ``completion_len = np.array([float(len(i)) for i in
choices])``, ``pred_norm = np.argmax(lls / completion_len)``; ``acc = pred == gold``, ``acc_norm =
pred_norm == gold``. ``lls`` are the summed log-likelihoods of each choice's continuation given the
context; the length is that of the choice text in **characters** (Python ``len``, code points, without
the target delimiter), not tokens.

Ties: ``np.argmax`` returns the first maximal index, so a tie goes to the earliest choice (the same
in both ``acc`` and ``acc_norm``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from uep_common.contract.metric_params.answers import LoglikParams

from .base import MetricInputError, MetricResult, Params, binary_result, read_params
from .registry import register_metric


def _check(logprobs: Sequence[float], choice_texts: Sequence[str], gold: int) -> np.ndarray[Any, Any]:
    if not isinstance(choice_texts, (list, tuple)) or not choice_texts:
        raise ValueError("choice_texts must be a non-empty list of strings")
    if any(not isinstance(t, str) or not t for t in choice_texts):
        raise ValueError("every choice text must be a non-empty string (its length divides acc_norm)")
    if isinstance(gold, bool) or not isinstance(gold, (int, np.integer)) or not 0 <= gold < len(choice_texts):
        raise ValueError(f"gold must be an index into the {len(choice_texts)} choices, got {gold!r}")
    if isinstance(logprobs, (str, bytes)) or not isinstance(logprobs, Sequence) or len(logprobs) != len(choice_texts):
        raise ValueError(f"logprobs must be a list with one value per choice ({len(choice_texts)})")
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in logprobs):
        raise ValueError("logprobs must be numbers")
    values = np.asarray(logprobs, dtype=float)
    if np.isnan(values).any() or (values == math.inf).any():
        raise ValueError("logprobs must not be NaN or +inf (-inf, probability 0, is allowed)")
    return values


def loglik_choice(logprobs: Sequence[float], choice_texts: Sequence[str], gold: int) -> dict[str, Any]:
    """Pick the choice with the highest log-likelihood, raw and per character (lm-eval acc/acc_norm).

    Args:
        logprobs: summed log-likelihood of each choice's continuation, one float per choice.
        choice_texts: the choice strings (their character lengths normalise ``acc_norm``).
        gold: 0-based index of the correct choice.

    Returns:
        ``{"acc": 1.0 | 0.0, "acc_norm": 1.0 | 0.0, "pred": int, "pred_norm": int, "gold": int}``;
        ties go to the lowest index.

    Raises:
        ValueError: empty/mismatched lists, an empty choice text, ``gold`` out of range, NaN or +inf.

    Example: ``loglik_choice([-4.0, -6.0], ["no", "yes indeed"], 1)`` -> ``acc`` 0.0 (pred 0),
    ``acc_norm`` 1.0 (-4/2 = -2.0 < -6/10 = -0.6, pred_norm 1).
    """
    values = _check(logprobs, choice_texts, gold)
    lengths = np.array([float(len(t)) for t in choice_texts])
    pred, pred_norm = int(np.argmax(values)), int(np.argmax(values / lengths))
    gold = int(gold)
    return {
        "acc": 1.0 if pred == gold else 0.0,
        "acc_norm": 1.0 if pred_norm == gold else 0.0,
        "pred": pred,
        "pred_norm": pred_norm,
        "gold": gold,
    }


@register_metric
class LoglikMultipleChoice:
    """``loglik_multiple_choice``: lm-eval ``acc`` (decides ``is_correct``) and ``acc_norm`` per item.

    Output: a JSON string ``{"logprobs": [float, ...]}`` (one summed log-likelihood per choice, produced
    by the inference step, not free text). Reference: ``{"gold": int, "choices": [str, ...]}``. No
    params. Result: ``is_correct`` = ``acc``; ``extracted`` = the predicted index as a string;
    ``details``: ``acc`` and ``acc_norm`` (0/1, also reported as metrics of their own), ``pred``,
    ``pred_norm``, ``gold``, ``extraction``. An output that is not such JSON, or whose ``logprobs`` do not
    fit the choices, is an infrastructure fault of the log-likelihood step: ``is_correct=None``,
    ``score=None``, ``details={"extraction": "invalid_logprobs", "error": ...}``.

    Raises:
        MetricInputError: a reference without a valid ``gold`` index or non-empty ``choices`` strings.
    """

    name = "loglik_multiple_choice"
    version = "1"
    params_model = LoglikParams
    reference_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "gold": {"type": "integer", "minimum": 0},
            "choices": {"type": "array", "minItems": 1, "items": {"type": "string"}},
        },
        "required": ["gold", "choices"],
    }
    source = "lm-evaluation-harness multiple_choice process_results (acc, acc_norm by character length)"
    submetrics = ("acc", "acc_norm")
    """Detail keys reported as metrics of their own (lm-eval reports acc and acc_norm)."""

    def score(self, output: str, reference: dict[str, Any], params: Params) -> MetricResult:
        """Score one item's log-likelihoods; see the class docstring for shapes."""
        read_params(LoglikParams, params)  # it takes none: an unknown one is a config error
        choices: Any = reference.get("choices")  # JSON from the benchmark: _check validates its shape
        gold: Any = reference.get("gold")
        try:
            _check([0.0] * len(choices) if isinstance(choices, (list, tuple)) else [], choices, gold)
        except ValueError as exc:
            raise MetricInputError(f"loglik_multiple_choice reference: {exc}") from exc
        try:
            parsed = json.loads(output)
            logprobs = parsed["logprobs"] if isinstance(parsed, dict) else None
            if logprobs is None:
                raise ValueError("output must be a JSON object with a 'logprobs' list")
            result = loglik_choice(logprobs, choices, gold)
        except (ValueError, TypeError, KeyError) as exc:
            details: dict[str, Any] = {"extraction": "invalid_logprobs", "error": str(exc)[:500]}
            return MetricResult(self.name, self.version, None, None, None, details)
        details = {**result, "acc": int(result["acc"]), "acc_norm": int(result["acc_norm"]), "extraction": "ok"}
        return binary_result(self, correct=result["acc"] == 1.0, extracted=str(result["pred"]), details=details)
