"""Typed, versioned models of the two JSON configuration columns: ``benchmarks.config`` and
``evaluations.config``.

Every writer checks what it stores (:func:`check_benchmark_config`, :func:`check_evaluation_config`:
unknown top-level keys refused) and every reader parses the column (:func:`parse_benchmark_config`,
:func:`parse_evaluation_config`) instead of reading keys of the dict. The stored JSON keeps the keys it
always had: a check returns the dict it was given (copied), so a benchmark's content hash
(:func:`uep_common.contract.benchmarks.content_hash`) does not change.

Versions: ``schema_version`` is absent from rows of version 1 (every row written so far) and parses as 1;
a later incompatible change writes ``schema_version: 2`` and parses rows of both versions. A version this
code does not know is refused, naming ``schema_version``.

Unknown keys: reads keep them (``model_extra``), so a row written by a newer writer stays readable; writes
refuse them. Every key the services read is a field here.

Example (``benchmarks.config`` of the built-in GSM8K)::

    {"prompt": {"template": "...", "max_tokens": 256, "stop": ["\\n\\nQuestion:"]},
     "metric": {"name": "gsm8k_numeric_exact_match", "params": {"variant": "flexible"}},
     "language": "en"}

Several metrics, one primary (``metrics``, beside or instead of ``metric``)::

    {"metric": {"name": "label_match"}, "class_names": ["benign", "malignant"],
     "metrics": [{"name": "f1_macro", "primary": true}, {"name": "roc_auc"}]}

Each entry of ``metrics`` names either a per-item metric of the scorer's registry (every item is scored
with it; the first per-item metric, ``metric`` when given, decides each item's verdict) or a set-level
metric computed over the evaluation's items (:data:`SET_METRICS`, :func:`is_set_metric`: ``f1_macro``,
``roc_auc``, ``ndcg@10``, ``mrr``…; ``uep_common.analytics.set_metrics``). The primary one
(:attr:`BenchmarkConfig.primary_score`) is what leaderboards rank by default.

Example (``evaluations.config`` of an A/B arm with a cap, after the budget check)::

    {"max_in_flight": 4, "fewshot_k": 2, "prompt_template": "...", "max_cost": 1.5,
     "cost_estimate": {"estimate": 0.42, "items": 100, "currency": "EUR", ...}}
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from uep_common.contract.events import PromptSpec
from uep_common.contract.judge_config import JudgeConfig

CONFIG_SCHEMA_VERSION: Literal[1] = 1
"""The version this code writes (and the one a row without ``schema_version`` has)."""

DEFAULT_PROMPT = PromptSpec(template="{{ prompt }}")
"""The prompt of a benchmark whose config has none: the sample's ``prompt`` field as it is."""


class EvaluationType(StrEnum):
    """How an evaluation's items get their scores (``benchmarks.evaluation_type``, overridden per evaluation by
    :attr:`EvaluationConfig.evaluation_type`).

    ``automatic``: the benchmark's metric, in the scorer. ``llm_judge``: every item judged by the judge
    service. ``hybrid``: the metric first, the items it cannot decide to the judge, and those the judge cannot
    decide to annotators. ``human``: the evaluation holding annotators' answers (built by an annotation task).

    The member order is that of the ``ck_benchmarks_evaluation_type`` constraint. ``repr`` is the value's, so
    pydantic's messages (``Input should be 'automatic' or …``) and SQL lists name a type as it is written.
    """

    automatic = "automatic"
    llm_judge = "llm_judge"
    human = "human"
    hybrid = "hybrid"

    def __repr__(self) -> str:
        return repr(self.value)


class MetricConfig(BaseModel):
    """The ``metric`` block: a name of the scorer's registry (``GET /v1/metrics``) and its parameters."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str = Field(min_length=1, max_length=100)
    params: dict[str, Any] = Field(default_factory=dict)

    @field_validator("params", mode="before")
    @classmethod
    def _no_params_when_null(cls, v: object) -> object:
        return {} if v is None else v


CLASSIFICATION_SET_METRICS = (
    "accuracy",
    "balanced_accuracy",
    "precision_macro",
    "recall_macro",
    "f1_macro",
    "precision_micro",
    "recall_micro",
    "f1_micro",
    "precision_weighted",
    "recall_weighted",
    "f1_weighted",
    "roc_auc",
    "pr_auc",
    "log_loss",
    "brier",
    "ece",
)
"""Set-level metrics of a classification evaluation (definitions: ``uep_common.analytics.set_metrics``)."""
RANKING_AT_K = ("ndcg", "map", "recall", "precision", "hit")
"""Ranking set-level metrics taken at a cut-off: ``<name>@<k>`` (``ndcg@10``); ``mrr`` has none."""
SET_METRICS = (*CLASSIFICATION_SET_METRICS, "mrr", *(f"{m}@k" for m in RANKING_AT_K))
"""Every set-level metric name (``@k`` stands for a cut-off, an integer from 1 to 1000)."""
LOWER_IS_BETTER = frozenset({"log_loss", "brier", "ece"})
"""Set-level metrics where a lower value is better (every other one: higher is better)."""
_AT_K = re.compile(r"^(ndcg|map|recall|precision|hit)@([1-9][0-9]{0,2}|1000)$")
SET_KIND_OF_METRIC = {"label_match": "classification", "ndcg": "ranking"}
"""Per-item metrics whose items make a set-level classification or ranking evaluation."""


def is_set_metric(name: str) -> bool:
    """Whether ``name`` is a set-level metric (:data:`SET_METRICS`; ``ndcg@10`` for ``ndcg@k``)."""
    return name in CLASSIFICATION_SET_METRICS or name == "mrr" or _AT_K.match(name) is not None


def check_positive_class(positive: str | None, class_names: list[str] | None) -> str | None:
    """``positive`` when it is one of exactly two ``class_names`` (or None). Raises ValueError naming the
    classes otherwise (a pydantic field validator's error, so it names ``positive_class``)."""
    if positive is None:
        return None
    if not class_names or len(class_names) != 2:
        raise ValueError("positive_class needs class_names with exactly two classes")
    if positive not in class_names:
        raise ValueError(f"positive_class {positive!r} is not one of class_names {class_names!r}")
    return positive


class MetricSpec(MetricConfig):
    """One entry of ``metrics``: a per-item metric (``{name, params}``) or a set-level one (``{name}``), and
    whether it is the primary (what leaderboards rank)."""

    primary: bool = False


ClassName = Annotated[str, Field(min_length=1, max_length=200)]


class BenchmarkConfig(BaseModel):
    """``benchmarks.config`` (see the module docstring).

    Attributes:
        schema_version: the row's format version (absent = 1).
        prompt: how a sample becomes a prompt (template, max_tokens, stop, fewshot_k, chat); None =
            :data:`DEFAULT_PROMPT`.
        metric: how outputs are scored; None for benchmarks scored by a judge or by people only.
        language: BCP 47 language of the samples (``en``).
        judge: the judge block of llm_judge and hybrid benchmarks (evaluations snapshot it, merged with
            their override, in :attr:`EvaluationConfig.judge`).
        default_sampling: how a limited evaluation picks its samples when the request does not say
            (:mod:`uep_common.records.sampling`); None = ``first``.
        metrics: several metrics, at most one ``primary`` (see the module docstring); None = ``metric`` only.
        class_names: a classification benchmark's classes, in order (the order of per-class tables and of
            the confusion matrix; an LLM's answer is read as the class it names).
        positive_class: two classes only: the class ROC-AUC, PR-AUC, the Brier score and the curves take as
            positive; one of ``class_names``. None = the second class (scikit-learn's convention).
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    schema_version: Literal[1] = CONFIG_SCHEMA_VERSION
    prompt: PromptSpec | None = None
    metric: MetricConfig | None = None
    language: str | None = Field(None, max_length=35)
    judge: JudgeConfig | None = None
    default_sampling: Literal["first", "random", "stratified"] | None = None
    metrics: list[MetricSpec] | None = Field(None, min_length=1, max_length=16)
    class_names: list[ClassName] | None = Field(None, min_length=2, max_length=1000)
    positive_class: ClassName | None = None

    @field_validator("positive_class")
    @classmethod
    def _positive_is_a_class(cls, v: str | None, info: ValidationInfo) -> str | None:
        return check_positive_class(v, info.data.get("class_names"))

    @model_validator(mode="after")
    def _one_primary(self) -> BenchmarkConfig:
        if self.metrics and sum(m.primary for m in self.metrics) > 1:
            raise ValueError("metrics: at most one entry may be primary")
        if self.class_names and len(set(self.class_names)) != len(self.class_names):
            raise ValueError("class_names must be distinct")
        return self

    @property
    def item_metrics(self) -> list[MetricConfig]:
        """The per-item metrics every item is scored with: ``metric`` (when set), then each entry of ``metrics``
        that is not a set-level metric, without repeats. The first decides an item's verdict."""
        out: list[MetricConfig] = [self.metric] if self.metric is not None else []
        for m in self.metrics or []:
            if is_set_metric(m.name):
                continue
            plain = MetricConfig(name=m.name, params=m.params)
            if all((o.name, o.params) != (plain.name, plain.params) for o in out):
                out.append(plain)
        return out

    @property
    def scoring_metric(self) -> MetricConfig | None:
        """The metric that decides each item's verdict (the first of :attr:`item_metrics`); None = no metric."""
        items = self.item_metrics
        return items[0] if items else None

    @property
    def primary_score(self) -> str | None:
        """The set-level metric leaderboards rank by default: the ``primary`` entry of ``metrics`` (else its
        first entry) when it is a set-level name; ``ndcg@<k>`` when it is the per-item ``ndcg`` metric. None
        when the primary is another per-item metric (its accuracy or mean score is ranked, as before
        ``metrics`` existed)."""
        entries = self.metrics or []
        chosen: MetricConfig | None = next((m for m in entries if m.primary), entries[0] if entries else self.metric)
        if chosen is None:
            return None
        if is_set_metric(chosen.name):
            return chosen.name
        if SET_KIND_OF_METRIC.get(chosen.name) == "ranking":
            k = chosen.params.get("k", 10)
            return f"ndcg@{k}"
        return None

    @property
    def prompt_spec(self) -> PromptSpec:
        """:attr:`prompt`, or :data:`DEFAULT_PROMPT` when the row has none."""
        return self.prompt or DEFAULT_PROMPT

    @property
    def metric_name(self) -> str | None:
        """The registry name of the metric deciding each item's verdict (:attr:`scoring_metric`); None when no
        metric is configured."""
        chosen = self.scoring_metric
        return chosen.name if chosen is not None else None

    @property
    def template(self) -> str | None:
        """The prompt template; None when the row has no prompt."""
        return self.prompt.template if self.prompt is not None else None

    @property
    def judge_block(self) -> dict[str, Any] | None:
        """The keys the row's judge block gives (what an evaluation's override is merged into, by
        :func:`uep_common.contract.judge_config.merge_judge_config`); None when there is no judge block."""
        return self.judge.model_dump(exclude_unset=True) if self.judge is not None else None


class ExpectedItem(BaseModel):
    """Expected size of one item in a cost estimate: tokens in and out, model latency in milliseconds."""

    model_config = ConfigDict(extra="allow", frozen=True)

    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_ms: float | None = None


class CostEstimate(BaseModel):
    """``evaluations.config["cost_estimate"]``: the estimate made at creation
    (``uep_common.records.budget.Plan.as_dict``); money in the site ``currency``, ``per_item`` per item."""

    model_config = ConfigDict(extra="allow", frozen=True)

    evaluation_id: uuid.UUID | None = None
    model: str | None = None
    benchmark: str | None = None
    arm: str | None = None
    items: int = Field(ge=0)
    cost_unit: str | None = None
    per_item: float | None = None
    estimate: float
    currency: str
    expected: ExpectedItem | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON form stored and returned by the API (the keys :meth:`uep_common.records.budget.Plan.as_dict` wrote)."""
        return self.model_dump(mode="json", exclude_unset=True)


class EvaluationConfig(BaseModel):
    """``evaluations.config`` (see the module docstring).

    Attributes:
        schema_version: the row's format version (absent = 1).
        max_in_flight: items of this evaluation in flight at most (the create option ``max_parallel``,
            also read under that name); None = the scheduler's default.
        fewshot_k: demonstrations per prompt; None = the benchmark prompt's ``fewshot_k``.
        chat_template: apply the model's chat template (True) or send raw text (False); None = the
            benchmark's.
        prompt_template: an A/B arm's Jinja2 template replacing the benchmark's.
        sample_timeout_s: timeout of each model call, seconds; None = the inference service's default.
        batch_size: items per model call (no creation path sets it; fingerprints report it).
        max_cost: the evaluation's own cap, site currency.
        cost_estimate: the estimate made at creation (:class:`CostEstimate`).
        judge: the judge configuration snapshot of llm_judge and hybrid evaluations.
        evaluation_type: overrides the benchmark's (``human`` for the evaluation holding annotations).
        source_evaluation_id: the evaluation whose outputs this one re-scores (an id as text).
        annotation_task_id: the annotation task whose answers this evaluation stores.
        compare_evaluation_id: pairwise annotation: the evaluation whose outputs are compared.
        release: an A/B arm marked at creation as a release run: it enters the leaderboards (other arms do
            not, :mod:`uep_common.analytics.leaderboards`); None/False for every other evaluation.
        group_index: 0-based position of the evaluation in its batch's ``models`` or its experiment's
            ``arms`` as requested (the rows of one request share ``created_at``); None outside a group.
        sampling: how the samples of a limited run were chosen (:mod:`uep_common.records.sampling`); None = first.
        sampling_seed: the seed of ``random`` and ``stratified`` sampling.
        sample_ordinals: the ordinals run, ascending (``random``/``stratified``); None = the first
            ``sample_limit`` ordinals. Item ``i`` of the evaluation is sample ``sample_ordinals[i // repeats]``.
    """

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)

    schema_version: Literal[1] = CONFIG_SCHEMA_VERSION
    max_in_flight: int | None = Field(None, ge=1, validation_alias=AliasChoices("max_in_flight", "max_parallel"))
    fewshot_k: int | None = Field(None, ge=0, le=16)
    chat_template: bool | None = None
    prompt_template: str | None = Field(None, min_length=1)
    sample_timeout_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    batch_size: int | None = Field(None, ge=1)
    max_cost: float | None = Field(None, ge=0, allow_inf_nan=False)
    cost_estimate: CostEstimate | None = None
    judge: JudgeConfig | None = None
    evaluation_type: EvaluationType | None = None
    source_evaluation_id: str | None = Field(None, min_length=1)
    annotation_task_id: uuid.UUID | None = None
    compare_evaluation_id: uuid.UUID | None = None
    release: bool | None = None
    group_index: int | None = Field(None, ge=0)
    sampling: Literal["first", "random", "stratified"] | None = None
    sampling_seed: int | None = None
    sample_ordinals: list[int] | None = None

    def ordinal(self, position: int) -> int:
        """The sample ordinal of the evaluation's ``position``-th sample (0-based; item ``i`` is position
        ``i // repeats``): ``sample_ordinals[position]``, or ``position`` itself when the run takes the first N."""
        return self.sample_ordinals[position] if self.sample_ordinals is not None else position

    @field_validator("judge", mode="before")
    @classmethod
    def _no_judge_when_empty(cls, v: object) -> object:
        return None if v == {} else v

    @property
    def max_parallel(self) -> int | None:
        """The create option's name of :attr:`max_in_flight`."""
        return self.max_in_flight

    @property
    def estimate_dict(self) -> dict[str, Any] | None:
        """:attr:`cost_estimate` as the JSON dict the create call returns; None when there is none."""
        return self.cost_estimate.as_dict() if self.cost_estimate is not None else None


_ModelT = TypeVar("_ModelT", bound=BaseModel)


def _parse(model: type[_ModelT], raw: object) -> _ModelT:
    if isinstance(raw, model):
        return raw
    if raw is None:
        return model()
    if not isinstance(raw, Mapping):
        raise ValidationError.from_exception_data(model.__name__, [{"type": "dict_type", "loc": (), "input": raw}])
    return model.model_validate(dict(raw))


def _check(model: type[BaseModel], raw: Mapping[str, Any]) -> dict[str, Any]:
    parsed = _parse(model, raw)
    extra = parsed.model_extra or {}
    if extra:
        raise ValidationError.from_exception_data(
            model.__name__, [{"type": "extra_forbidden", "loc": (k,), "input": v} for k, v in extra.items()]
        )
    return dict(raw)


def parse_benchmark_config(raw: Mapping[str, Any] | BenchmarkConfig | None) -> BenchmarkConfig:
    """``benchmarks.config`` as a :class:`BenchmarkConfig` (None or ``{}`` = every field at its default; a
    parsed one is returned as it is).

    Raises:
        pydantic.ValidationError: a value of the wrong type or out of bounds, or an unknown
            ``schema_version`` (``loc`` names the field, e.g. ``("prompt", "max_tokens")``).
    """
    return _parse(BenchmarkConfig, raw)


def parse_evaluation_config(raw: Mapping[str, Any] | EvaluationConfig | None) -> EvaluationConfig:
    """``evaluations.config`` as an :class:`EvaluationConfig` (None or ``{}`` = every field at its
    default; a parsed one is returned as it is).

    Raises:
        pydantic.ValidationError: as :func:`parse_benchmark_config` (e.g. ``("judge", "judges")``).
    """
    return _parse(EvaluationConfig, raw)


def item_prompt(
    benchmark: Mapping[str, Any] | BenchmarkConfig | None, evaluation: Mapping[str, Any] | EvaluationConfig | None
) -> PromptSpec:
    """The prompt an evaluation's items are rendered with: the benchmark's (:data:`DEFAULT_PROMPT` when it
    has none) with the evaluation's overrides applied — ``prompt_template`` (an A/B arm's template),
    ``chat_template`` and ``fewshot_k`` (None = the benchmark's). The one definition of "the template an
    evaluation used": the scheduler dispatches it and run fingerprints hash it.

    Raises:
        pydantic.ValidationError: a config does not parse (as :func:`parse_benchmark_config`).
    """
    prompt = parse_benchmark_config(benchmark).prompt_spec
    cfg = parse_evaluation_config(evaluation)
    update: dict[str, Any] = {}
    if cfg.chat_template is not None:
        update["chat"] = cfg.chat_template
    if cfg.prompt_template:
        update["template"] = cfg.prompt_template
    if cfg.fewshot_k is not None:
        update["fewshot_k"] = cfg.fewshot_k
    return prompt.model_copy(update=update) if update else prompt


def check_benchmark_config(raw: Mapping[str, Any]) -> dict[str, Any]:
    """What a writer stores in ``benchmarks.config``: ``raw`` checked (as :func:`parse_benchmark_config`,
    and no key outside the model's) and returned as a plain dict with the same keys and values.

    Raises:
        pydantic.ValidationError: a bad value, or an unknown key (type ``extra_forbidden``), named by ``loc``.
    """
    return _check(BenchmarkConfig, raw)


def check_evaluation_config(raw: Mapping[str, Any]) -> dict[str, Any]:
    """What a writer stores in ``evaluations.config``, checked as :func:`check_benchmark_config`.

    Raises:
        pydantic.ValidationError: a bad value, or an unknown key (type ``extra_forbidden``), named by ``loc``.
    """
    return _check(EvaluationConfig, raw)
