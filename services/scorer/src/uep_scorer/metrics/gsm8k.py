"""GSM8K numeric exact match, reporting lm-evaluation-harness's two filter variants.

Source: lm-evaluation-harness ``lm_eval/tasks/gsm8k/gsm8k.yaml`` (task version 3.0) defines two filter
pipelines, each reported as its own row:

* ``strict-match``: regex ``#### (\\-?[0-9\\.\\,]+)``, first match (``RegexFilter`` default
  ``group_select=0`` + ``take_first``);
* ``flexible-extract``: regex ``(-?[$0-9.,]{2,})|(-?[0-9]+)`` with ``group_select: -1``, i.e. the
  last number in the text.

Here the strict variant applies the same regex (to digit-folded text) and reads the first number in
its capture; the flexible variant is "the last number in the text" under the number rules of
:mod:`uep_scorer.metrics.numeric` (thousands separators only in well-formed groups, Unicode minus and
digits, ``$``/``%``/trailing ``.`` dropped, LaTeX ``{,}`` and thin-space thousands separators read as commas). Both are compared to the reference as exact decimals.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from uep_common.contract.metric_params.answers import Gsm8kParams

from .base import ANSWER_REFERENCE, MetricInputError, MetricResult, Params, binary_result, extraction_label, read_params
from .numeric import canonical, find_numbers, normalize_digits, parse_single_number
from .registry import register_metric

# Verbatim lm-eval strict-match pattern.
_STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")


def _strict(text: str) -> tuple[str | None, Decimal | None]:
    match = _STRICT.search(text)
    if match is None:
        return None, None
    numbers = find_numbers(match.group(1))
    return (match.group(1), numbers[0].value) if numbers else (match.group(1), None)


def _flexible(text: str) -> tuple[str | None, Decimal | None]:
    numbers = find_numbers(text)
    return (numbers[-1].raw, numbers[-1].value) if numbers else (None, None)


def _reference_value(reference: dict[str, Any]) -> Decimal:
    if "answer" not in reference:
        raise MetricInputError("gsm8k reference needs an 'answer' key, e.g. {'answer': '18'}")
    text = str(reference["answer"])
    if "####" in text:  # a full GSM8K solution: the final answer follows the last '####'
        text = text.rsplit("####", 1)[1]
    try:
        return parse_single_number(text)
    except ValueError as exc:
        raise MetricInputError(f"gsm8k reference answer is not a single number: {exc}") from exc


@register_metric
class Gsm8kNumericExactMatch:
    """``gsm8k_numeric_exact_match``: exact numeric match of the extracted final answer.

    Reference: ``{"answer": "18"}`` (a full GSM8K solution ending in ``#### 18`` also works).
    Params: ``{"variant": "flexible" | "strict"}`` (default ``"flexible"``; lm-eval's names
    ``"flexible-extract"``/``"strict-match"`` are accepted) picks the variant that decides
    ``is_correct``. ``details`` always carries both: ``strict_extracted``/``flexible_extracted``
    (canonical numbers or ``None``), ``strict_raw``/``flexible_raw`` (text as matched),
    ``strict_match``/``flexible_match`` (0/1), plus ``variant``, ``reference`` and ``extraction``
    (``"ok"`` or ``"no_answer"`` for the deciding variant).

    Raises:
        MetricInputError: missing/non-numeric reference answer or unknown variant.
    """

    name = "gsm8k_numeric_exact_match"
    version = "2"
    params_model = Gsm8kParams
    reference_schema: dict[str, Any] = ANSWER_REFERENCE
    source = "lm-evaluation-harness gsm8k task filters (strict-match, flexible-extract); Cobbe et al. 2021"
    submetrics = ("strict_match", "flexible_match")
    """Detail keys reported as metrics of their own (lm-eval reports both GSM8K variants as rows)."""

    def score(self, output: str, reference: dict[str, Any], params: Params) -> MetricResult:
        """Score one model output; see the class docstring for shapes."""
        variant = read_params(Gsm8kParams, params).extraction
        expected = _reference_value(reference)
        text = normalize_digits(output or "")

        found = {"strict": _strict(text), "flexible": _flexible(text)}
        details: dict[str, Any] = {"variant": variant, "reference": canonical(expected)}
        for key, (raw, value) in found.items():
            details[f"{key}_raw"] = raw
            details[f"{key}_extracted"] = None if value is None else canonical(value)
            details[f"{key}_match"] = int(value is not None and value == expected)

        value = found[variant][1]
        details["extraction"] = extraction_label(value is not None)
        return binary_result(
            self,
            correct=bool(details[f"{variant}_match"]),
            extracted=details[f"{variant}_extracted"],
            details=details,
        )
