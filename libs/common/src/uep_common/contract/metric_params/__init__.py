"""One typed parameter model per metric (:mod:`.registry` says how they are used); importing this package
registers every model: :mod:`.text` (text comparison), :mod:`.answers` (single answers, programs) and
:mod:`.agents` (agent runs)."""

from __future__ import annotations

from . import agents, answers, text
from .registry import (
    MetricParams,
    ParamProblem,
    UnknownMetricParamsError,
    describe_params,
    metric_params,
    param_problems,
    params_model,
    params_schema,
    problems_of,
    registered_params,
    validate_params,
)

__all__ = [
    "MetricParams",
    "ParamProblem",
    "UnknownMetricParamsError",
    "agents",
    "answers",
    "describe_params",
    "metric_params",
    "param_problems",
    "params_model",
    "params_schema",
    "problems_of",
    "registered_params",
    "text",
    "validate_params",
]
