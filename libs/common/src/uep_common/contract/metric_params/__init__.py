"""One typed parameter model per metric (:mod:`.registry` says how they are used); importing this package
registers every model: :mod:`.text` (text comparison) and :mod:`.answers` (single answers, programs)."""

from __future__ import annotations

from . import answers, text
from .registry import (
    MetricParams,
    ParamProblem,
    UnknownMetricParamsError,
    metric_params,
    param_problems,
    params_model,
    params_schema,
    registered_params,
    validate_params,
)

__all__ = [
    "MetricParams",
    "ParamProblem",
    "UnknownMetricParamsError",
    "answers",
    "metric_params",
    "param_problems",
    "params_model",
    "params_schema",
    "registered_params",
    "text",
    "validate_params",
]
