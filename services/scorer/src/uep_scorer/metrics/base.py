"""Shared types of the scoring core: the result record, the metric protocol and the errors.

Contract used by every metric module and by the service wiring:

* ``Metric.score(output, reference, params)`` never raises because of what the *model* wrote: an
  unparseable or empty output is an ordinary wrong answer (``is_correct=False``), and an
  infrastructure failure while judging it (e.g. the code sandbox could not start) is
  ``is_correct=None`` with the reason in ``details``.
* It raises :class:`MetricInputError` when the *benchmark data or configuration* is malformed (a
  missing reference key, an unknown ``variant``, a reference letter outside the choice set). That is
  a bug in the dataset or run config, not a property of the model output, so it must surface loudly
  instead of being recorded as a wrong answer.
* A metric that reads an answer out of the output (a number, a letter, a label, a regex capture, the
  output text itself) says whether it found one in ``details["extraction"]``: :data:`NO_ANSWER` when
  nothing could be extracted, :data:`ANSWERED` (or a finer label naming how, e.g. ``"explicit"``)
  otherwise; :func:`extraction_label` gives the two. :attr:`MetricResult.no_answer` reads it; it is what the
  summary's extraction failure rate counts and what routes a hybrid evaluation's item to the judge
  (``uep_scorer.scoring.hybrid_route_reason``). Graded metrics that extract nothing (BLEU, ROUGE) leave it out.
* Every metric names its parameter model, ``params_model``: the
  :class:`uep_common.contract.metric_params.MetricParams` subclass registered under its name (types, defaults,
  bounds, units and descriptions). ``score`` accepts the parameters as a dict (validated by that model, a bad
  one is a :class:`MetricInputError` naming the field) or as an instance of the model (:func:`read_params`).
* A metric of agent items has ``score_trajectory(trajectory, output, reference, params)``
  (:class:`TrajectoryMetric`); the scorer calls it with the output's trajectory (:mod:`uep_scorer.metrics.agent`).
* Every metric publishes ``reference_schema``: the JSON Schema (draft 2020-12) of the sample reference it reads
  (e.g. ``label_match`` needs ``{"label": string}``). The scorer registers it in the metric catalogue and the
  gateway checks every row of an upload against it, so a reference the metric cannot read is refused at
  upload time, naming the line and the field, instead of failing every item at scoring time.
* A metric that reads a model's structured answer (a classifier's label, a ranker's ranking) has
  ``score_prediction(prediction, output, reference, params)`` (:class:`PredictionMetric`); the scorer calls it
  instead of ``score`` with the output's ``prediction`` (None for an LLM: the metric reads the text). Its
  result's ``prediction`` is the structured answer it scored (the model's, or the one it read from the text).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from pydantic import ValidationError

from uep_common.contract.metric_params import MetricParams, problems_of

if TYPE_CHECKING:
    from uep_common.contract.agents import Trajectory
    from uep_common.contract.events import Prediction

NO_ANSWER = "no_answer"
"""``details["extraction"]`` of a result whose output held no answer to extract."""
ANSWERED = "ok"
"""``details["extraction"]`` of a result whose answer was extracted (metrics may use a finer label)."""


def extraction_label(found: bool) -> str:
    """``details["extraction"]`` for an extraction that ``found`` an answer or not: ``"ok"`` / ``"no_answer"``."""
    return ANSWERED if found else NO_ANSWER


class MetricInputError(ValueError):
    """The reference or params given to a metric are malformed (data/config bug, not a model error)."""


Params = Mapping[str, Any] | MetricParams
"""A metric's parameters: the config's dict, or an instance of the metric's ``params_model``."""
M = TypeVar("M", bound=MetricParams)


def read_params(model: type[M], params: Params) -> M:
    """``params`` as an instance of ``model``: returned as is when it is one, else validated (defaults filled in).
    A dict of hashable values is validated once and the (frozen) result reused.

    Raises:
        MetricInputError: a bad, missing or unknown parameter; the message names each (pydantic's reasons).
    """
    if isinstance(params, model):
        return params
    if isinstance(params, MetricParams):
        params = params.model_dump(exclude_unset=True)
    try:
        # one validation per distinct parameter set: a benchmark's items all carry the same parameters
        key = tuple(_frozen(k, v) for k, v in params.items())
        return _validated(model, key)  # type: ignore[return-value]
    except TypeError:  # a value that is not hashable even so (a dict, a list of lists): validated each time
        return _validate(model, params)


def _frozen(name: str, value: Any) -> tuple[str, type, Any]:
    # the type is part of the key (1, 1.0 and True hash alike); a list is keyed by the tuple of its items
    if type(value) is list:
        return name, list, tuple((type(v), v) for v in value)
    return name, type(value), value


@lru_cache(maxsize=512)
def _validated(model: type[MetricParams], key: tuple[tuple[str, type, Any], ...]) -> MetricParams:
    return _validate(model, {k: [v for _, v in value] if kind is list else value for k, kind, value in key})


def _validate(model: type[M], params: Mapping[str, Any]) -> M:
    try:
        return model.model_validate(dict(params))
    except ValidationError as exc:
        raise MetricInputError(". ".join(f"param {p.path!r}: {p.msg}" for p in problems_of(model, exc))) from None


@dataclass(frozen=True)
class MetricResult:
    """Outcome of scoring one model output against one reference.

    Attributes:
        name: metric name, e.g. ``"gsm8k_numeric_exact_match"``.
        version: metric version string (bumped whenever a rule change can alter a verdict), e.g. ``"1"``.
        is_correct: ``True``/``False`` verdict; ``None`` when undecidable because of an infrastructure
            error (nothing extracted is a decidable ``False``).
        score: ``1.0``/``0.0`` for binary metrics, ``None`` together with ``is_correct=None``.
        extracted: the answer extracted from the output in canonical form (``"1234"``, ``"B"``, the
            code that was executed), ``None`` if none was found.
        details: JSON-serialisable diagnostics, e.g. ``{"extraction": "no_answer"}`` or
            ``{"status": "timed_out", "stderr_tail": "..."}``. ``details["submetrics"]`` (a dict name →
            number), when present, is stored as per-item metrics of their own (e.g. ``ndcg@10``, ``rr``).
        prediction: the structured answer scored, as the fields of :class:`uep_common.contract.events.Prediction`
            (``{"label": "spam"}``, ``{"ranking": ["d3", "d1"]}``); None for metrics that score free text.
    """

    name: str
    version: str
    is_correct: bool | None
    score: float | None
    extracted: str | None
    details: dict[str, Any] = field(default_factory=dict)
    prediction: dict[str, Any] | None = None

    @property
    def no_answer(self) -> bool:
        """Whether the metric found no answer in the output (``details["extraction"] == "no_answer"``)."""
        return self.details.get("extraction") == NO_ANSWER


@runtime_checkable
class Metric(Protocol):
    """A named, versioned, stateless scoring rule.

    Implementations must be safe to call concurrently from several threads (e.g. through
    ``asyncio.to_thread``): they keep no mutable state between calls.
    """

    name: str
    version: str

    @property
    def params_model(self) -> type[MetricParams]:
        """The model of its parameters, registered under ``name`` in :mod:`uep_common.contract.metric_params`."""
        ...

    source: str
    """Where the rule or formula comes from (paper, reference implementation)."""
    reference_schema: dict[str, Any]
    """JSON Schema (draft 2020-12) of the reference this metric reads (see the module docstring)."""

    def score(self, output: str, reference: dict[str, Any], params: Params) -> MetricResult:
        """Score ``output`` against ``reference`` under ``params`` (see :func:`read_params`).

        Raises:
            MetricInputError: malformed ``reference`` or ``params`` (never for a bad model output).
        """
        ...


@runtime_checkable
class PredictionMetric(Metric, Protocol):
    """A metric that can score a model's structured answer (see the module docstring)."""

    def score_prediction(
        self, prediction: Prediction | None, output: str, reference: dict[str, Any], params: Params
    ) -> MetricResult:
        """Score ``prediction`` (None: read the answer from ``output``) against ``reference``.

        Raises:
            MetricInputError: malformed ``reference`` or ``params``.
        """
        ...


@runtime_checkable
class TrajectoryMetric(Metric, Protocol):
    """A metric of agent items: it reads the item's trajectory (its steps, tool calls and results, answer)."""

    def score_trajectory(
        self, trajectory: Trajectory | None, output: str, reference: dict[str, Any], params: dict[str, Any]
    ) -> MetricResult:
        """Score the run ``trajectory`` (None: the item was not run as an agent) against ``reference``.

        Raises:
            MetricInputError: malformed ``reference`` or ``params``.
        """
        ...


def _answer_value() -> dict[str, Any]:
    return {"type": ["string", "number"]}


TEXT_REFERENCE: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": _answer_value(), "answers": {"type": "array", "minItems": 1, "items": _answer_value()}},
    "anyOf": [{"required": ["answer"]}, {"required": ["answers"]}],
}
"""Reference of the text metrics: ``{"answer": text}`` and/or ``{"answers": [text, ...]}``."""
ANSWER_REFERENCE: dict[str, Any] = {"type": "object", "properties": {"answer": _answer_value()}, "required": ["answer"]}
"""Reference ``{"answer": text or number}``."""
ANY_REFERENCE: dict[str, Any] = {"type": "object"}
"""A metric that needs no particular reference key."""


def binary_result(
    metric: Metric, correct: bool, extracted: str | None, details: dict[str, Any], prediction: dict[str, Any] | None = None
) -> MetricResult:
    """Build a decided binary result (score 1.0/0.0) for ``metric``."""
    return MetricResult(
        name=metric.name,
        version=metric.version,
        is_correct=correct,
        score=1.0 if correct else 0.0,
        extracted=extracted,
        details=details,
        prediction=prediction,
    )
