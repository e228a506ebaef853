"""The typed parameters of a metric: one pydantic model per metric, registered under the metric's name.

A model (a subclass of :class:`MetricParams`) holds each parameter's type, default, bounds, unit and description
in its ``Field``. It is the only description of a metric's parameters: the gateway validates a benchmark's
``metric.params`` with it at upload (a bad value is a 422 naming ``params.<field>`` and pydantic's reason), the
scorer validates and reads the parameters through it, and the metric catalogue publishes its
``model_json_schema()`` as ``params_schema`` (``GET /v1/metrics``), from which the UI and the CLIs show them.

Register a model with :func:`metric_params`::

    @metric_params("starts_with")
    class StartsWithParams(MetricParams):
        ignore_case: bool = Field(False, description="compare case-insensitively")
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

__all__ = [
    "MetricParams",
    "describe_params",
    "ParamProblem",
    "UnknownMetricParamsError",
    "metric_params",
    "param_problems",
    "params_model",
    "problems_of",
    "params_schema",
    "registered_params",
    "validate_params",
]


class MetricParams(BaseModel):
    """Base of every metric's parameter model: unknown parameters are refused (``extra="forbid"``), values are
    not coerced (``strict``: ``"true"`` is not a bool, ``"5"`` not an integer; an integer is a number) and a
    parameter given as ``null`` takes its default (a benchmark config may spell "the default" as ``null``)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _null_is_default(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            return {k: v for k, v in data.items() if v is not None}
        return data


P = TypeVar("P", bound=type[MetricParams])

_MODELS: dict[str, type[MetricParams]] = {}


class UnknownMetricParamsError(KeyError):
    """No parameter model is registered under a metric name (``metric``: the name)."""

    def __init__(self, metric: str) -> None:
        self.metric = metric
        super().__init__(metric)

    def __str__(self) -> str:
        return f"no parameter model is registered for metric {self.metric!r}"


def metric_params(*names: str) -> Callable[[P], P]:
    """Class decorator: register the decorated :class:`MetricParams` subclass as the parameters of each metric
    in ``names``. Raises ``ValueError`` when a name has a model already (two models for one metric)."""

    def register(model: P) -> P:
        for name in names:
            if name in _MODELS and _MODELS[name] is not model:
                raise ValueError(f"metric {name!r} has parameter model {_MODELS[name].__name__} already")
            _MODELS[name] = model
        return model

    return register


def params_model(metric: str) -> type[MetricParams]:
    """The parameter model of ``metric``.

    Raises:
        UnknownMetricParamsError: no model is registered under that name.
    """
    try:
        return _MODELS[metric]
    except KeyError:
        raise UnknownMetricParamsError(metric) from None


def registered_params() -> dict[str, type[MetricParams]]:
    """Metric name → parameter model, for every registered metric (a copy)."""
    return dict(_MODELS)


def params_schema(metric: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12, pydantic's ``model_json_schema()``) of ``metric``'s parameters, as the
    catalogue publishes it. Raises :class:`UnknownMetricParamsError` as :func:`params_model`."""
    return params_model(metric).model_json_schema()


def describe_params(model: type[MetricParams]) -> dict[str, str]:
    """Parameter name → one line for people: the description, then its default (or "required"), bounds and
    unit, all read from the model's JSON Schema, e.g. ``{"k": "the k of pass@k (default 1; >= 1; samples)"}``."""
    schema = model.model_json_schema()
    required = set(schema.get("required", ()))
    lines = {}
    for name, prop in schema.get("properties", {}).items():
        for branch in prop.get("anyOf", ()):  # an optional value: its bounds are in the non-null branch
            prop = {**branch, **prop}
        facts = ["required" if name in required else f"default {json.dumps(prop.get('default'), ensure_ascii=False)}"]
        facts += [f"{op} {prop[key]}" for key, op in _BOUNDS if key in prop]
        facts += [prop["unit"]] if "unit" in prop else []
        lines[name] = f"{prop.get('description', '')} ({'; '.join(facts)})".strip()
    return lines


_BOUNDS = (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<"))


def validate_params(metric: str, params: Mapping[str, Any]) -> MetricParams:
    """``params`` validated by ``metric``'s model: defaults filled in, bounds checked.

    Raises:
        pydantic.ValidationError: a bad, missing or unknown parameter (each error's ``loc`` names it).
        UnknownMetricParamsError: no model is registered for ``metric``.
    """
    return params_model(metric).model_validate(dict(params))


@dataclass(frozen=True)
class ParamProblem:
    """One refused parameter: ``loc`` its path inside ``params`` (``("regexes_to_ignore", 1)``), ``msg``
    pydantic's reason, ``kind`` ``"unknown_param"`` (not a parameter of the metric) or ``"bad_param"``."""

    loc: tuple[str | int, ...]
    msg: str
    kind: str

    @property
    def path(self) -> str:
        """``loc`` joined with dots (``"regexes_to_ignore.1"``); ``"params"`` for the parameters as a whole."""
        return ".".join(str(p) for p in self.loc) or "params"

    def message(self, metric: str) -> str:
        """The problem as one sentence naming the metric and the parameter path."""
        return f"{metric} parameter {self.path!r}: {self.msg}"


def problems_of(model: type[MetricParams], exc: ValidationError) -> list[ParamProblem]:
    """``exc`` (raised by ``model``) as one :class:`ParamProblem` per error, in pydantic's order; an unknown
    parameter's reason lists the parameters the model takes."""
    takes = ", ".join(sorted(model.model_fields)) or "none"
    return [
        ParamProblem(tuple(e["loc"]), f"{e['msg']}; the metric takes {takes}", "unknown_param")
        if e["type"] == "extra_forbidden"
        else ParamProblem(tuple(e["loc"]), e["msg"], "bad_param")
        for e in exc.errors(include_url=False)
    ]


def param_problems(metric: str, params: Mapping[str, Any]) -> list[ParamProblem]:
    """The problems of ``params`` for ``metric`` (:func:`problems_of`); empty when they are fine.

    Raises:
        UnknownMetricParamsError: no model is registered for ``metric``.
    """
    try:
        validate_params(metric, params)
    except ValidationError as exc:
        return problems_of(params_model(metric), exc)
    return []
