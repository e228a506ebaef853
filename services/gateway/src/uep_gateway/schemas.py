"""Request and response bodies of the REST API (pydantic v2; unknown fields are refused)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from uep_common.analytics.summary import Headline
from uep_common.contract.configs import EvaluationType, check_positive_class
from uep_common.contract.events import EvaluationSummary, Priority, PromptSpec
from uep_common.records.sampling import MAX_SAMPLED
from uep_gateway.validation import INT32_MAX

MAX_MONEY = 10**13
"""Largest amount of money a request may give (``NUMERIC(24, 10)`` holds 14 integer digits)."""


class ArmCreate(BaseModel):
    """One arm of an A/B experiment: its own evaluation over the same samples; what it varies (model, prompt
    template, chat template, few-shot) overrides the request's."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", description="Arm name, unique in the experiment.")
    model: str | None = Field(
        None, min_length=1, max_length=301, description="Default: the request's model (name, name@version or id)."
    )
    model_version: str | None = Field(None, max_length=100)
    prompt_template: str | None = Field(
        None, min_length=1, max_length=20_000, description="Jinja2 template replacing the benchmark's for this arm."
    )
    chat_template: bool | None = None
    fewshot_k: int | None = Field(None, ge=0, le=16)
    release: bool = Field(False, description="A release run: this arm enters the leaderboards (other A/B arms never do).")


class EvaluationOptions(BaseModel):
    """The options of one evaluation, shared by ``POST /v1/evaluations`` (:class:`EvaluationCreate`) and the
    runs of a schedule (``POST /v1/schedules`` ``options``): one set of fields and bounds for both. Integers
    are bounded by their database columns (INTEGER); the site's and tenant's work limits (repeats, items per
    evaluation) are checked by the routes (``uep_gateway.usecases.planning.check_options``)."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=(), populate_by_name=True)

    benchmark_version: str | None = Field(None, max_length=64, description="Content hash; default: the newest active version.")
    model_version: str | None = Field(None, max_length=100, description="Default: the most recently registered version.")
    sample_limit: int | None = Field(
        None, ge=1, le=INT32_MAX, description="Evaluate N samples (which ones: `sampling`; default the first N)."
    )
    sampling: Literal["first", "random", "stratified"] | None = Field(
        None,
        description="Which samples a limited run takes: the first N (benchmark order), a seeded random N, or N "
        "stratified by category in proportion (uep_common.records.sampling); default: the benchmark's default_sampling "
        f"(stratified for MMLU), else first. random/stratified take at most {MAX_SAMPLED:,} samples.",
    )
    sampling_seed: int = Field(0, ge=0, le=INT32_MAX, description="Seed of random and stratified sampling.")
    repeats: int = Field(1, ge=1, le=INT32_MAX, description="Attempts per sample (for pass@k and stability).")
    priority: Priority = Priority.normal
    max_parallel: int | None = Field(
        None,
        ge=1,
        le=1024,
        validation_alias=AliasChoices("max_parallel", "max_in_flight"),
        description="Items of this evaluation in flight at most (alias: max_in_flight); default: the scheduler's.",
    )
    fewshot_k: int | None = Field(
        None, ge=0, le=16, description="Demonstrations per prompt; default: the benchmark's (0 for the built-ins)."
    )
    chat_template: bool | None = Field(
        None, description="Apply the model's chat template (true) or send raw text (false); default: the benchmark's."
    )
    sample_timeout_s: float | None = Field(
        None,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="Per-sample timeout of each model call, seconds; default: the inference service's UEP_INFERENCE_TIMEOUT_S.",
    )

    @property
    def max_in_flight(self) -> int | None:
        """Old name of :attr:`max_parallel`."""
        return self.max_parallel


class RobustnessCreate(BaseModel):
    """``robustness`` of ``POST /v1/evaluations``: run the chosen samples and their perturbed variants
    (``uep_gateway.robustness.perturbations``); the summary reports each perturbation's accuracy, consistency,
    flips with McNemar's test and, for choice_rotation, the position bias."""

    model_config = ConfigDict(extra="forbid")

    perturbations: list[Annotated[str, Field(min_length=1, max_length=50)]] = Field(
        min_length=1,
        max_length=8,
        description="Names, optionally name@version: choice_rotation, typos, casing, distractor, char_noise.",
    )
    seed: int = Field(0, ge=0, le=INT32_MAX, description="Seed of the seeded perturbations (recorded with each item).")


class EvaluationCreate(EvaluationOptions):
    """``POST /v1/evaluations``: one evaluation; a batch (``models``: one evaluation per model, linked by
    ``batch_id``); or an A/B experiment (``arms``: one evaluation per arm, linked by ``experiment_id``,
    dispatched together so that item i of every arm goes out together). The options are
    :class:`EvaluationOptions`."""

    benchmark: str = Field(min_length=1, max_length=100, description="Benchmark slug or id.")
    model: str | None = Field(
        None, min_length=1, max_length=301, description="Model name, name@version or id (or give `models` or `arms`)."
    )
    models: list[str] | None = Field(
        None, min_length=1, max_length=20, description="Batch: one evaluation per model (name or id), linked by batch_id."
    )
    arms: list[ArmCreate] | None = Field(
        None, min_length=2, max_length=8, description="A/B experiment: one evaluation per arm, linked by experiment_id."
    )
    max_cost: float | None = Field(
        None,
        ge=0,
        le=MAX_MONEY,
        allow_inf_nan=False,
        description="Cap of each evaluation created (site currency): it runs until the cap is reached, then "
        "ends budget_exhausted (see POST /v1/evaluations/estimate for what it would cost).",
    )
    robustness: RobustnessCreate | None = Field(
        None, description="A robustness evaluation: the samples chosen and their perturbed variants (RobustnessCreate)."
    )
    judge: dict[str, Any] | None = Field(
        None,
        description="llm_judge/hybrid benchmarks: keys overriding the benchmark's judge configuration "
        "(uep_common.contract.judge_config.JudgeConfig: mode, judges, aggregate, dimensions, template, max_retries, "
        "baseline_evaluation_id, ...).",
    )


class EvaluationRef(BaseModel):
    """One evaluation created by a batch or A/B request."""

    model_config = ConfigDict(protected_namespaces=())

    id: uuid.UUID
    status: str
    total_items: int
    model: str
    arm: str
    links: dict[str, str]


class EvaluationAccepted(BaseModel):
    """202 answer of ``POST /v1/evaluations``. A batch or A/B request lists every evaluation it created in
    ``evaluations`` (the top-level fields are the first one's)."""

    id: uuid.UUID
    status: str
    total_items: int
    links: dict[str, str]
    batch_id: uuid.UUID | None = None
    experiment_id: uuid.UUID | None = None
    arm: str = "main"
    evaluations: list[EvaluationRef] = Field(default_factory=list)
    estimated_cost: dict[str, Any] | None = Field(
        None,
        description="The estimate before anything ran: {estimate, currency, items, per_item, …} (all evaluations "
        "of a batch or A/B request together in `estimate` and `items`).",
    )


class Progress(BaseModel):
    """Items stored so far out of the total."""

    completed: int
    errors: int
    total: int
    fraction: float
    discarded: int = Field(0, description="Results that arrived after a cancel and were not stored.")
    correct: int | None = Field(None, description="Stored items with a true verdict (once ended: the summary's).")
    scored: int | None = Field(None, description="Stored items with a true/false verdict (once ended: the summary's).")
    accuracy: float | None = Field(None, description="correct / scored so far (None before a verdict).")
    ci_low: float | None = Field(None, description="95 % Wilson score interval of `accuracy`, low end.")
    ci_high: float | None = Field(None, description="95 % Wilson score interval of `accuracy`, high end.")


class EvaluationView(BaseModel):
    """``GET /v1/evaluations/{id}``."""

    model_config = ConfigDict(protected_namespaces=())

    id: uuid.UUID
    status: str
    priority: str
    benchmark: dict[str, Any]
    model: dict[str, Any]
    sample_limit: int | None
    repeats: int
    max_parallel: int | None = None
    batch_id: uuid.UUID | None = None
    experiment_id: uuid.UUID | None = None
    arm: str = "main"
    schedule_id: uuid.UUID | None = None
    pinned: bool = Field(False, description="The pinned baseline of its model and benchmark in this tenant.")
    progress: Progress
    summary: EvaluationSummary | None
    headline: Headline | None = Field(
        None,
        description="The figure to show (uep_common.analytics.summary.headline_of): the benchmark's primary set-level metric "
        "(e.g. ndcg@10 of a ranker) where the summary has set-level metrics, else the accuracy (or a graded mean); "
        "its interval is the one every view shows, `method` names it (wilson for a proportion, bootstrap for any other "
        "set-level metric), and `errors`, `excluded` and `note` say which items it leaves out "
        "('7 errors, excluded from the headline').",
    )
    error: str | None
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    awaiting_human: int | None = Field(
        None,
        description="A hybrid evaluation: items the judge sent to people (no verdict it could stand by) whose "
        "annotation has not come in yet; null for other evaluation types.",
    )
    awaiting_human_task_id: uuid.UUID | None = Field(
        None, description="The newest annotation task over this evaluation's items sent to people, if one was created."
    )


class ResultItem(BaseModel):
    """One item's stored result."""

    sample_id: uuid.UUID
    sample_ordinal: int
    external_id: str | None
    input: dict[str, Any] = Field(description="The sample's input fields (what the prompt template sees).")
    reference: dict[str, Any] = Field(description="The sample's reference (what the scorer compares with).")
    prompt: str | None = Field(
        None,
        description="The prompt the item was sent (the evaluation's template over the input, with its few-shot "
        "demonstrations); null for a model that takes no prompt (classifier, ranker) or when it cannot be rendered.",
    )
    prompt_error: str | None = Field(None, description="Why ``prompt`` is null for a generated item.")
    repeat: int
    arm: str
    output: str | None
    extracted: str | None
    is_correct: bool | None
    score: float | None
    metric_name: str | None
    metric_version: str | None
    metrics: dict[str, Any]
    latency_ms: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    error: dict[str, Any] | None
    attempt: int
    prediction: dict[str, Any] | None = Field(
        None,
        description="Classification and ranking items: the stored prediction the set-level metrics are computed from "
        "(`label`, and `probabilities` by class name when the model gave them — an LLM's answer read as a class has "
        "none; a ranking's `ranking`, `scores`); null for other items.",
    )
    transcript: dict[str, Any] | None = Field(
        None,
        description="Conversation items: the transcript (`messages` [{role, content, reference?}], `simulated`, `turns`, "
        "`ended`, `persona`, `goal`; uep_common.contract.dialogue.Transcript); null for single-prompt items.",
    )
    trajectory: dict[str, Any] | None = Field(
        None,
        description="Agent items: the run's steps (thought, tool, arguments, result, status, model and tool time, "
        "tokens), `stop_reason`, `answer` and totals (uep_common.contract.agents.Trajectory); null for other items.",
    )


class ResultsPage(BaseModel):
    """A page of results; pass ``next_cursor`` as ``cursor`` for the next page (None at the end)."""

    items: list[ResultItem]
    next_cursor: str | None


class BenchmarkView(BaseModel):
    """A benchmark version in the catalogue."""

    id: uuid.UUID
    slug: str
    name: str
    description: str
    version: str
    category: str
    status: str
    is_builtin: bool
    evaluation_type: str
    capability_dimensions: list[str]
    sample_count: int
    license: str | None
    metric: str | None
    created_at: datetime


class ModelCostView(BaseModel):
    """A model's cost unit, prices (site currency) and expected item size (uep_common.contract.costs)."""

    cost_unit: str
    price_per_1k_input_tokens: float
    price_per_1k_output_tokens: float
    price_per_gpu_second: float
    price_per_call: float
    expected_input_tokens: int
    expected_output_tokens: int
    expected_latency_ms: float


class ModelView(BaseModel):
    """A registered model as the caller sees it (docs/models.md). Its API key is never shown: ``has_api_key``
    says whether one is stored (encrypted) or referenced (``api_key_ref``)."""

    model_config = ConfigDict(protected_namespaces=())

    id: uuid.UUID
    name: str
    version: str
    description: str
    kind: str = Field(description="generation | classification | ranking | embedding")
    backend: str
    contract: str = Field(description="The tensor or API contract (docs/models.md), e.g. uep, vllm, text.")
    endpoint: str
    triton_model_name: str | None
    triton_model_version: str | None
    spec: dict[str, Any] = Field(description="class_names, input, n_features (classification); dimension (embedding).")
    decoding_defaults: dict[str, Any]
    supports_logprobs: bool
    max_in_flight: int | None = Field(description="Serving capacity: calls in flight per inference replica.")
    visibility: Literal["private", "shared", "site"] = Field(
        description="private: its owner tenant only; shared: every tenant may see and evaluate it; site: a site model."
    )
    owned: bool = Field(description="True when the caller's tenant owns it (may change and deactivate it).")
    active: bool = Field(description="False once deactivated: no new evaluations.")
    has_api_key: bool
    api_key_ref: str | None = Field(None, description="The inference service's variable holding the key (site models).")
    cost: ModelCostView
    created_by: str | None = Field(None, description="Who registered it (shown to its owner only).")
    created_at: datetime
    notes: list[str] = Field(
        default_factory=list,
        description="What the request that wrote it chose for the caller, e.g. the served model name requests will "
        "send when the endpoint lists its model under another (a llama.cpp server lists it by file path).",
    )


class RescoreView(BaseModel):
    """A rescore: what changed when stored outputs were scored again with the current metric versions."""

    id: uuid.UUID
    evaluation_id: uuid.UUID
    status: str
    total_items: int
    done_items: int
    flipped_items: int
    to_correct: int
    to_incorrect: int
    old_metric_versions: dict[str, Any]
    new_metric_versions: dict[str, Any]
    old_summary: EvaluationSummary | None
    new_summary: EvaluationSummary | None
    error: str | None
    requested_at: datetime
    completed_at: datetime | None


class MetricRef(BaseModel):
    """The metric a benchmark is scored with (a name from ``GET /v1/metrics``) and its parameters."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100)
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="The metric's parameters; they must fit its `params_schema` (GET /v1/metrics), else 422 naming "
        "`metric.params.<field>` and the reason.",
    )


class MetricEntry(BaseModel):
    """One entry of a spec's ``metrics`` (as built-ins declare it, :class:`uep_common.contract.configs.MetricSpec`): a
    per-item metric of ``GET /v1/metrics`` with its parameters, or a set-level metric (``f1_macro``,
    ``roc_auc``, ``ndcg@10``, ``mrr``…: :data:`uep_common.contract.configs.SET_METRICS`, no parameters), and whether it
    is the primary one."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100)
    params: dict[str, Any] = Field(default_factory=dict)
    primary: bool = False


class BenchmarkSpec(BaseModel):
    """The ``spec`` form field of ``POST /v1/benchmarks`` (JSON)."""

    model_config = ConfigDict(extra="forbid")

    slug: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]{1,99}$", description="URL-safe name; versions share it.")
    name: str = Field(min_length=1, max_length=200)
    description: str = Field("", max_length=5000)
    category: Literal["nlp", "code", "math", "reasoning", "safety", "custom"] = "custom"
    status: Literal["active", "draft"] = "active"
    evaluation_type: Literal[EvaluationType.automatic, EvaluationType.llm_judge, EvaluationType.hybrid] = Field(
        EvaluationType.automatic,
        description="automatic (the metric), llm_judge (the judge configuration in `judge`), hybrid "
        "(the metric first; items it cannot decide go to the judge, unsure verdicts to human annotators)",
    )
    judge: dict[str, Any] | None = Field(
        None, description="llm_judge/hybrid: uep_common.contract.judge_config.JudgeConfig as JSON."
    )
    capability_dimensions: list[str] = Field(default_factory=list, max_length=20)
    language: str = Field("en", pattern=r"^[a-z]{2,3}(-[A-Za-z]{2,4})?$")
    prompt: PromptSpec
    metric: MetricRef
    metrics: list[MetricEntry] | None = Field(
        None,
        min_length=1,
        max_length=16,
        description="Further metrics, at most one `primary` (what leaderboards rank and list views headline; "
        "default: the first entry). Set-level classification metrics need `metric` label_match, set-level ranking "
        "metrics need ndcg. Unknown or repeated names are 422 naming the entry.",
    )
    class_names: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        None,
        min_length=2,
        max_length=1000,
        description="A classification benchmark's classes, in order: every reference label must be one of them, "
        "and a classifier is evaluated on it only if it names the same classes.",
    )
    positive_class: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="Binary classification: the class ROC-AUC, PR-AUC and the positive-class precision/recall "
        "refer to; one of `class_names` (default: the second class).",
    )
    license: str | None = Field(None, max_length=200)
    source: str | None = Field(None, max_length=2000)

    @field_validator("positive_class")
    @classmethod
    def _positive_is_a_class(cls, v: str | None, info: ValidationInfo) -> str | None:
        return check_positive_class(v, info.data.get("class_names"))


class SampleView(BaseModel):
    """A sample in a benchmark preview, with the prompt its template renders."""

    ordinal: int
    external_id: str | None
    input: dict[str, Any]
    reference: dict[str, Any]
    prompt: str


class MetricView(BaseModel):
    """A metric the scorer registered, with the JSON Schema of its parameters and of the reference it reads."""

    name: str
    version: str
    source: str
    params_schema: dict[str, Any] = Field(
        default_factory=dict,
        description="JSON Schema (draft 2020-12) of the metric's parameters: its typed model's model_json_schema() "
        "(uep_common.contract.metric_params), with each parameter's type, default, bounds, unit and description; "
        "`additionalProperties: false` (an unknown parameter is refused). A benchmark's `metric.params` must fit it.",
    )
    reference_schema: dict[str, Any] = Field(
        default_factory=dict, description="JSON Schema of the sample reference the metric reads (uploads are checked against it)."
    )


class CatalogBenchmarkView(BenchmarkView):
    """A benchmark version in the catalogue, with who may read it."""

    visibility: Literal["private", "shared", "site"] = Field(
        description="private: its owner tenant only; shared: every tenant may read it; site: the site catalogue "
        "(built-ins and benchmarks without an owner), readable by every tenant."
    )
    owned: bool = Field(description="True when the caller's tenant owns it (may upload new versions of its slug).")
