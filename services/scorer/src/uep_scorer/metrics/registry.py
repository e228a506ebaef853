"""The scorer's metric registry: :func:`register_metric` is the class decorator each metric module puts on its
metric, so a metric is named, instantiated and tied to its parameter model in one place.

The parameter model a metric names (``params_model``) must be the one registered under the metric's name in
:mod:`uep_common.contract.metric_params` (the model the gateway validates uploads with and whose JSON Schema the
catalogue publishes); a metric whose model is another, or missing, fails at import, so the scorer, the gateway
and the catalogue can never read two descriptions of one metric's parameters.
"""

from __future__ import annotations

from typing import TypeVar

from uep_common.contract.metric_params import UnknownMetricParamsError, params_model

from .base import Metric

T = TypeVar("T", bound=type)

REGISTRY: dict[str, Metric] = {}
"""Metric name → the metric's singleton instance, filled by :func:`register_metric` as the modules load."""


def register_metric(cls: T) -> T:
    """Class decorator: register one instance of ``cls`` under its ``name``.

    Raises:
        ValueError: the name is registered already, or ``cls.params_model`` is not the parameter model
            registered for the name in :mod:`uep_common.contract.metric_params` (or none is).
    """
    metric = cls()
    if not isinstance(metric, Metric):
        raise ValueError(f"{cls.__name__} does not satisfy the Metric protocol")
    if metric.name in REGISTRY:
        raise ValueError(f"metric {metric.name!r} is registered twice")
    try:
        model = params_model(metric.name)
    except UnknownMetricParamsError:
        raise ValueError(f"metric {metric.name!r} has no parameter model in uep_common.contract.metric_params") from None
    if metric.params_model is not model:
        raise ValueError(f"metric {metric.name!r} names {metric.params_model.__name__}; its registered model is {model.__name__}")
    REGISTRY[metric.name] = metric
    return cls
