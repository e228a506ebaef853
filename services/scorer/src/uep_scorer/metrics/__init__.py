"""Pure scoring core of the scorer service: metric registry and result types.

Usage::

    from uep_scorer.metrics import get_metric
    result = get_metric("gsm8k_numeric_exact_match").score("... #### 18", {"answer": "18"}, {})
    result.is_correct, result.score, result.extracted, result.details

Metrics are stateless singletons, safe to share between threads; ``humaneval_pass_at_1`` blocks
for up to its ``timeout_s`` (run it with ``asyncio.to_thread``). Each metric's module docstring states
its rule and where the rule comes from.
"""

from __future__ import annotations

from .agent import AgentAnswer, AgentPath, AgentTraceable
from .base import Metric, MetricInputError, MetricResult, PredictionMetric, TrajectoryMetric
from .bleu import SentenceBleu, SentenceChrf
from .choice import MultipleChoiceLetter
from .classification import LabelMatch
from .fuzzy import FuzzyMatch
from .gsm8k import Gsm8kNumericExactMatch
from .humaneval import HumanEvalPassAt1
from .loglik import LoglikMultipleChoice
from .match import Contains, ExactMatch, RegexMatch
from .passk import PassAtK
from .ranking import Ndcg
from .rouge import Rouge
from .tokenf1 import TokenF1

__all__ = [
    "Metric",
    "MetricInputError",
    "MetricResult",
    "PredictionMetric",
    "TrajectoryMetric",
    "UnknownMetricError",
    "available_metrics",
    "get_metric",
]

_REGISTRY: dict[str, Metric] = {
    m.name: m
    for m in (
        Gsm8kNumericExactMatch(),
        MultipleChoiceLetter(),
        HumanEvalPassAt1(),
        PassAtK(),
        LabelMatch(),
        Ndcg(),
        LoglikMultipleChoice(),
        ExactMatch(),
        Contains(),
        RegexMatch(),
        FuzzyMatch(),
        SentenceBleu(),
        SentenceChrf(),
        Rouge(),
        TokenF1(),
        AgentAnswer(),
        AgentPath(),
        AgentTraceable(),
    )
}


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
        return _REGISTRY[name]
    except KeyError:
        raise UnknownMetricError(name) from None


def available_metrics() -> list[str]:
    """Names of all registered metrics, sorted."""
    return sorted(_REGISTRY)
