"""Pure scoring core of the scorer service: metric registry and result types.

Usage::

    from uep_scorer.metrics import get_metric
    result = get_metric("gsm8k_numeric_exact_match").score("... #### 18", {"answer": "18"}, {})
    result.is_correct, result.score, result.extracted, result.details

Metrics are stateless singletons, safe to share between threads; ``humaneval_pass_at_1`` blocks
for up to its ``timeout_s`` (run it with ``asyncio.to_thread``). Each metric's module docstring states
its rule and where the rule comes from. A metric class registers itself with ``@register_metric``
(:mod:`.registry`), which ties it to its parameter model of :mod:`uep_common.contract.metric_params`.
"""

from __future__ import annotations

from . import agent, bleu, choice, classification, fuzzy, gsm8k, humaneval, loglik, match, passk, ranking, rouge, tokenf1
from .base import Metric, MetricInputError, MetricResult, PredictionMetric, TrajectoryMetric, read_params
from .registry import REGISTRY, register_metric

__all__ = [
    "Metric",
    "MetricInputError",
    "MetricResult",
    "PredictionMetric",
    "TrajectoryMetric",
    "UnknownMetricError",
    "available_metrics",
    "get_metric",
    "read_params",
    "register_metric",
]

METRIC_MODULES = (agent, bleu, choice, classification, fuzzy, gsm8k, humaneval, loglik, match, passk, ranking, rouge, tokenf1)
"""The modules whose ``@register_metric`` classes fill the registry on import (a new one is added here)."""


class UnknownMetricError(KeyError):
    """No metric is registered under the requested name; the message lists the known names."""

    def __init__(self, name: str) -> None:
        self.metric = name
        self.known = available_metrics()
        super().__init__(name)

    def __str__(self) -> str:
        # KeyError.__str__ would repr() the argument; give the readable message instead.
        return f"unknown metric {self.metric!r}; known metrics: {', '.join(self.known)}"


def get_metric(name: str) -> Metric:
    """Return the registered metric called ``name``.

    Raises:
        UnknownMetricError: (a ``KeyError``) when no metric has that name.
    """
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownMetricError(name) from None


def available_metrics() -> list[str]:
    """Names of all registered metrics, sorted."""
    return sorted(REGISTRY)
