"""How long an evaluation is expected to take, shown beside its cost before it is created.

An item takes the model's expected latency (:attr:`uep_common.records.budget.Plan.expected`, the model's
``expected_latency_ms`` or the benchmark's cost profile: the figure the cost of a GPU-second model is
estimated from), and a model serves ``parallel`` items at once: its registered capacity
(``models.max_in_flight``; 1 when it has none), lowered to the evaluation's ``max_parallel`` when set. So
``seconds = ceil(items / parallel) × latency``. Evaluations on one model share its capacity and run one after
another in this estimate; evaluations on different models run side by side, so a batch takes as long as its
busiest model. Queueing behind other tenants' work is not counted: the figure is a lower bound.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def evaluation_seconds(items: int, latency_ms: float, capacity: int | None, max_parallel: int | None) -> float:
    """Expected wall time of one evaluation, seconds (module docstring)."""
    parallel = max(1, capacity or 1)
    if max_parallel:
        parallel = min(parallel, max(1, max_parallel))
    return math.ceil(max(0, items) / parallel) * max(0.0, latency_ms) / 1000


def batch_seconds(per_evaluation: Iterable[tuple[str, float]]) -> float:
    """Expected wall time of evaluations created together, from ``(model, seconds)`` pairs: the largest sum
    of one model's evaluations."""
    by_model: dict[str, float] = {}
    for model, seconds in per_evaluation:
        by_model[model] = by_model.get(model, 0.0) + seconds
    return max(by_model.values(), default=0.0)
