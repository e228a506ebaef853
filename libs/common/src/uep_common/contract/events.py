"""The uep event contract: the one module downstream teams read to subscribe to uep's topics.

Every event is a pydantic v2 model serialised as UTF-8 JSON (``model_dump_json``) in the Kafka message
value. This module is the specification; ``docs/asyncapi.json`` is generated from the services' FastStream
apps (``make asyncapi``) and must agree with it.

Versioning
    ``schema_version`` is the major version of an event's schema. Additive, optional fields keep the
    version; a removed, renamed or retyped field, or a changed meaning, bumps it and publishes on a new
    topic (the topic name ends in ``.v<N>``), so old consumers keep working during a migration.

    Enumerations are open: a minor release may add a value (``EvaluationStatus`` gained ``interrupted``,
    ``stopped`` and ``budget_exhausted`` within ``.v1``), so a consumer must accept a value it does not
    know (treat an unknown status as "not completed"), not reject the event. Removing or renaming a value
    is a breaking change and bumps the version.

Common fields (every event)
    ``schema_version`` (int), ``event_id`` (UUID; the idempotency key: a consumer that sees an event_id
    twice must not change its state twice), ``evaluation_id`` (UUID), ``tenant_id`` (UUID),
    ``occurred_at`` (timezone-aware UTC timestamp).

Topics and keys (:class:`Topics`)
    ========================  ====================================  ==========================================
    event                     topic                                 key (partitioning)
    ========================  ====================================  ==========================================
    EvaluationRequested       ``uep.evaluation.requested.v1``       ``evaluation_id``
    SampleDispatched          ``uep.sample.dispatched.v1``          ``item key`` = evaluation:sample:repeat:arm
    OutputGenerated           ``uep.output.generated.v1``           item key
    ScoreComputed             ``uep.score.computed.v1``             item key
    EvaluationCompleted       ``uep.evaluation.completed.v1``       ``evaluation_id``
    JudgeRequested            ``uep.judge.requested.v1``            item key
    RescoreRequested          ``uep.rescore.requested.v1``          ``evaluation_id``
    ReportRequested           ``uep.report.requested.v1``           ``evaluation_id``
    ReportReady               ``uep.report.ready.v1``               ``evaluation_id``
    ========================  ====================================  ==========================================

    Evaluation-level events are keyed by evaluation so that all lifecycle events of one evaluation stay in
    order on one partition. Item-level events are keyed by the item (evaluation, sample, repeat, arm):
    the stages of one item stay ordered (a re-dispatch follows the dispatch it replaces), while the items of
    one large evaluation spread over every partition, so inference and scoring replicas share one
    evaluation's load instead of one replica taking it all.

Headers (:class:`Headers`)
    ``traceparent`` / ``tracestate`` (W3C Trace Context; every evaluation is one trace),
    ``uep-event-type`` (the class name), ``uep-schema-version``, ``uep-tenant-id``, ``content-type``
    (``application/json``).

Delivery
    At least once. Consumers are idempotent (keyed by ``event_id`` or by the item key); PostgreSQL is the
    system of record, so a redelivered or replayed event never changes a stored result twice.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from uep_common.contract.agents import AgentSpec, Trajectory
from uep_common.contract.dialogue import DialogueSpec, SimulationSpec, Transcript

SCHEMA_VERSION: Literal[1] = 1
"""Current major schema version of every event in this module."""


class Topics:
    """Topic names. The ``.v1`` suffix is the schema major version carried on that topic."""

    EVALUATION_REQUESTED = "uep.evaluation.requested.v1"
    SAMPLE_DISPATCHED = "uep.sample.dispatched.v1"
    OUTPUT_GENERATED = "uep.output.generated.v1"
    SCORE_COMPUTED = "uep.score.computed.v1"
    EVALUATION_COMPLETED = "uep.evaluation.completed.v1"
    JUDGE_REQUESTED = "uep.judge.requested.v1"
    RESCORE_REQUESTED = "uep.rescore.requested.v1"
    REPORT_REQUESTED = "uep.report.requested.v1"
    REPORT_READY = "uep.report.ready.v1"

    @classmethod
    def all(cls) -> list[str]:
        """Every topic uep creates at start-up (with ``UEP_KAFKA_PARTITIONS`` partitions each)."""
        return [v for k, v in vars(cls).items() if k.isupper()]


class Headers:
    """Kafka header names uep sets on every message."""

    TRACEPARENT = "traceparent"
    TRACESTATE = "tracestate"
    EVENT_TYPE = "uep-event-type"
    SCHEMA_VERSION = "uep-schema-version"
    TENANT_ID = "uep-tenant-id"
    CONTENT_TYPE = "content-type"


def utcnow() -> datetime:
    """Current time as a timezone-aware UTC datetime."""
    return datetime.now(UTC)


class Priority(StrEnum):
    """Scheduling priority class of an evaluation."""

    urgent = "urgent"
    high = "high"
    normal = "normal"
    low = "low"


class Backend(StrEnum):
    """How the inference service reaches a model."""

    triton = "triton"
    openai_compatible = "openai_compatible"


class ModelKind(StrEnum):
    """What a model does, and so which request the inference service sends it (contracts: docs/models.md).

    ``generation``: text in, text out (LLMs). ``classification``: text or a feature vector in, a label and one
    probability per class out. ``ranking``: a query and candidates in, one score per candidate out (the
    platform sorts). ``embedding``: text in, a vector out; the platform ranks candidates by cosine similarity.
    """

    generation = "generation"
    classification = "classification"
    ranking = "ranking"
    embedding = "embedding"


class EvaluationStatus(StrEnum):
    """Lifecycle: pending → running → completed | failed | cancelled | stopped.

    ``stopped``: ended by ``POST …/stop`` (nothing more dispatched, results in flight still stored, partial
    summary). ``interrupted``: was running when the scheduler restarted with no other live replica; not
    terminal, resumed only by an explicit ``POST …/retry``.
    """

    pending = "pending"
    running = "running"
    completed = "completed"
    failed = "failed"
    cancelled = "cancelled"
    interrupted = "interrupted"
    stopped = "stopped"
    budget_exhausted = "budget_exhausted"
    """A budget cap refused further dispatch; the items in flight finished and the partial summary is kept."""


class Event(BaseModel):
    """Fields every event carries. Subclasses set :attr:`topic` and :attr:`key_kind`."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    topic: ClassVar[str]
    key_kind: ClassVar[Literal["evaluation", "item"]]

    schema_version: Literal[1] = SCHEMA_VERSION
    event_id: uuid.UUID = Field(default_factory=uuid.uuid4, description="Idempotency key of this event.")
    evaluation_id: uuid.UUID
    tenant_id: uuid.UUID
    occurred_at: AwareDatetime = Field(default_factory=utcnow)

    def key(self) -> bytes:
        """Kafka message key (see the module docstring for what is partitioned on, and why)."""
        if self.key_kind == "evaluation":
            return str(self.evaluation_id).encode()
        item_key: str = self.item_key()  # type: ignore[attr-defined]  # defined by every item-keyed subclass
        return item_key.encode()

    def headers(self) -> dict[str, str]:
        """The Kafka headers of this event: type, schema version, tenant and content type (the telemetry layer adds
        the trace context)."""
        return {
            Headers.EVENT_TYPE: type(self).__name__,
            Headers.SCHEMA_VERSION: str(self.schema_version),
            Headers.TENANT_ID: str(self.tenant_id),
            Headers.CONTENT_TYPE: "application/json",
        }


class ItemEvent(Event):
    """An event about one item: one sample, one repeat, one arm of an evaluation."""

    key_kind: ClassVar[Literal["item"]] = "item"

    sample_id: uuid.UUID
    repeat: Annotated[int, Field(ge=0, description="0-based repeat index (n attempts per sample).")] = 0
    arm: Annotated[str, Field(min_length=1, max_length=64, description="A/B arm name; 'main' without A/B.")] = "main"
    attempt: Annotated[int, Field(ge=1, description="Dispatch attempt; >1 after a lease expired.")] = 1

    def item_key(self) -> str:
        """``evaluation_id:sample_id:repeat:arm``: the unique identity of a result row."""
        return f"{self.evaluation_id}:{self.sample_id}:{self.repeat}:{self.arm}"

    def item_fields(self) -> dict[str, Any]:
        """The fields that identify this item and its attempt, to build the next stage's event from."""
        return {
            "evaluation_id": self.evaluation_id,
            "tenant_id": self.tenant_id,
            "sample_id": self.sample_id,
            "repeat": self.repeat,
            "arm": self.arm,
            "attempt": self.attempt,
        }


class EvaluationRequested(Event):
    """The gateway accepted an evaluation; the scheduler admits and dispatches it."""

    topic: ClassVar[str] = Topics.EVALUATION_REQUESTED
    key_kind: ClassVar[Literal["evaluation"]] = "evaluation"

    benchmark_id: uuid.UUID
    benchmark_slug: str
    benchmark_version: str = Field(description="Content hash of the benchmark version evaluated.")
    model_id: uuid.UUID
    model_name: str
    sample_limit: int | None = Field(None, ge=1, description="First N samples in benchmark order; None = all.")
    repeats: int = Field(1, ge=1)
    priority: Priority = Priority.normal
    total_items: int = Field(ge=0, description="samples × repeats × arms to be scored.")
    arm: str = Field("main", min_length=1, max_length=64, description="A/B arm of this evaluation ('main' without A/B).")
    batch_id: uuid.UUID | None = Field(None, description="Set when one request created several evaluations (one per model).")
    experiment_id: uuid.UUID | None = Field(
        None, description="A/B experiment: every arm is its own evaluation with this id; arms are dispatched together."
    )
    schedule_id: uuid.UUID | None = Field(None, description="The cron schedule that created this run.")


class ModelTarget(BaseModel):
    """Where and how to call the model, copied from the model registry at dispatch time."""

    model_config = ConfigDict(extra="ignore", frozen=True, protected_namespaces=())

    model_id: uuid.UUID
    name: str
    backend: Backend
    endpoint: str = Field(description="Triton: host:port (gRPC) or http://host:port; OpenAI: base URL.")
    triton_model_name: str | None = None
    triton_model_version: str | None = Field(None, description="Empty/None = Triton's latest version.")
    max_tokens: int = Field(256, ge=1)
    temperature: float = Field(0.0, ge=0.0)
    stop: list[str] = Field(default_factory=list)
    max_concurrency: int | None = Field(
        None, ge=1, description="Serving capacity: calls in flight to this model per inference replica."
    )
    kind: ModelKind = Field(ModelKind.generation, description="What the model does (ModelKind).")
    contract: str = Field(
        "uep",
        max_length=40,
        description="The tensor or API contract the model speaks, e.g. 'uep', 'vllm', 'trtllm' for generation "
        "(the registry's model contracts, docs/models.md).",
    )
    spec: dict[str, Any] = Field(
        default_factory=dict,
        description="Kind-specific details from the registry: class_names (classification), input "
        "('text' | 'features'), tensor names, embedding dimension.",
    )
    api_key_encrypted: str | None = Field(
        None,
        repr=False,
        description="The endpoint's API key as the registry stores it: a Fernet token under the site key "
        "(UEP_MODEL_SECRET_KEY), which only the inference service holds to decrypt; never the key itself.",
    )
    api_key_ref: str | None = Field(
        None,
        pattern=r"^UEP_MODEL_KEY_[A-Z0-9_]{1,186}$",
        description="Or the name of the inference service's environment variable holding it (site models).",
    )
    tenant_model: bool = Field(
        False,
        description="Registered by a tenant (not a site model): such a model gets only its own API key, never the "
        "inference service's site-wide one.",
    )


class LoglikSpec(BaseModel):
    """Score a sample by log-likelihood instead of generating (lm-evaluation-harness ``output_type:
    multiple_choice``): the rendered template is the context, and each choice, preceded by
    ``target_delimiter``, a continuation whose summed log-probability the model returns.

    The choices are ``choices`` (the same for every sample, e.g. MMLU's letters) or the sample's input field
    ``choices_field`` (a list of strings, e.g. HellaSwag's endings): exactly one of the two is set.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    choices: list[Annotated[str, Field(min_length=1, max_length=2000)]] | None = Field(
        None, min_length=1, max_length=32, description="The continuations of every sample (without the delimiter)."
    )
    choices_field: str | None = Field(
        None, min_length=1, max_length=100, description="The input field holding each sample's list of choices."
    )
    target_delimiter: str = Field(
        " ", max_length=16, description="Put between the context and each choice (lm-eval's target_delimiter)."
    )

    @model_validator(mode="after")
    def _one_source(self) -> LoglikSpec:
        if (self.choices is None) == (self.choices_field is None):
            raise ValueError("give exactly one of choices and choices_field")
        return self


class PromptSpec(BaseModel):
    """How to turn a sample into a prompt: a Jinja2 template over the sample's input fields."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    template: str = Field(description="Jinja2 template; variables are the sample's input fields.")
    max_tokens: int | None = Field(None, ge=1, description="Benchmark override of the model's default.")
    stop: list[str] = Field(default_factory=list, description="Extra stop sequences of the benchmark.")
    fewshot_k: int = Field(0, ge=0, le=16, description="Demonstrations before the question (the template renders `fewshot`).")
    chat: bool | None = Field(
        None, description="Apply the model's chat template (True), send raw text (False), or the model's default."
    )
    loglik: LoglikSpec | None = Field(
        None,
        description="Score by the log-likelihood of each choice given the rendered prompt instead of generating; "
        'the output is then JSON {"logprobs": [...], "n_tokens": [...], "is_greedy": [...]}, one entry per choice.',
    )
    dialogue: DialogueSpec | None = Field(
        None, description="Each sample is a conversation; the model answers its last user turn (uep_common.contract.dialogue)."
    )
    simulation: SimulationSpec | None = Field(
        None, description="Each sample is a user persona and goal; a simulator model plays that user against the model."
    )

    agent: AgentSpec | None = Field(
        None,
        description="An agent benchmark: the rendered prompt is the task of an agent loop run by the platform with "
        "these tools and limits (uep_common.contract.agents); the output is the submitted answer.",
    )

    @model_validator(mode="after")
    def _one_item_kind(self) -> PromptSpec:
        kinds = [n for n in ("loglik", "dialogue", "simulation", "agent") if getattr(self, n) is not None]
        if len(kinds) > 1:
            raise ValueError(f"give at most one of loglik, dialogue, simulation and agent (got {', '.join(kinds)})")
        return self


class SampleDispatched(ItemEvent):
    """The scheduler leased one item to inference. Self-contained: inference needs no database."""

    topic: ClassVar[str] = Topics.SAMPLE_DISPATCHED

    benchmark_id: uuid.UUID
    sample_ordinal: int = Field(ge=0)
    input: dict[str, Any] = Field(description="The sample's input fields (never the reference answer).")
    fewshot: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Demonstrations, each {input, reference}: other samples of the benchmark (same subject when "
        "samples have one), never the sample itself.",
    )
    prompt: PromptSpec
    target: ModelTarget
    lease_expires_at: AwareDatetime
    timeout_s: float | None = Field(
        None,
        gt=0,
        description="Per-sample timeout of each model call, seconds (the evaluation's sample_timeout_s); "
        "None = the inference service's default.",
    )
    simulator: ModelTarget | None = Field(
        None, description="The model that plays the user of a simulated conversation (prompt.simulation), from the registry."
    )


class ErrorInfo(BaseModel):
    """Why a stage failed for one item (the item is still reported, never dropped)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    stage: Literal["inference", "scoring", "judge"]
    type: str = Field(description="Short machine-readable kind, e.g. 'triton_unavailable', 'timeout'.")
    message: str


class Prediction(BaseModel):
    """A non-generative model's answer to one item (classification, ranking, embedding retrieval).

    Classification: ``label`` and ``probabilities`` (class name -> probability, summing to 1). Ranking and
    retrieval: ``ranking`` (candidate ids, best first) and ``scores`` (one per candidate, in the sample's
    candidate order). An LLM evaluated as a classifier gets ``label`` from the scorer's extraction.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    label: str | None = Field(None, max_length=200)
    probabilities: dict[str, float] | None = Field(None, description="Class name -> probability in [0, 1].")
    ranking: list[str] | None = Field(None, description="Candidate ids, best first.")
    scores: list[float] | None = Field(None, description="One score per candidate, in the sample's candidate order.")


class OutputGenerated(ItemEvent):
    """The model answered one item, or failed to (``error`` set, ``output`` None)."""

    topic: ClassVar[str] = Topics.OUTPUT_GENERATED

    benchmark_id: uuid.UUID
    model_id: uuid.UUID
    prompt: str = Field(description="The rendered prompt sent to the model.")
    output: str | None
    latency_ms: float | None = Field(None, ge=0, description="Wall time of the model call, milliseconds.")
    prompt_tokens: int | None = Field(None, ge=0)
    completion_tokens: int | None = Field(None, ge=0)
    error: ErrorInfo | None = None
    throttled: bool = Field(
        False,
        description="The model endpoint refused an attempt for overload (rate limited, unavailable, timed out) before "
        "this outcome, even if a retry then answered: the scheduler's adaptive concurrency counts it as overload.",
    )
    prediction: Prediction | None = Field(
        None, description="A classifier's or ranker's structured answer (``output`` then holds its label or top id)."
    )
    transcript: Transcript | None = Field(
        None, description="A conversation item's transcript: the history and the model's replies (uep_common.contract.dialogue)."
    )
    trajectory: Trajectory | None = Field(
        None, description="An agent benchmark's run of the item: its steps, tool calls and results, stop reason, usage."
    )


class ScoreComputed(ItemEvent):
    """One item's score. ``is_correct``/``score`` are None when nothing could be scored (error set)."""

    topic: ClassVar[str] = Topics.SCORE_COMPUTED

    benchmark_id: uuid.UUID
    model_id: uuid.UUID
    metric_name: str
    metric_version: str
    is_correct: bool | None
    score: float | None
    extracted: str | None = Field(None, description="Answer extracted from the output, if any.")
    metrics: dict[str, float | int | str | bool | None] = Field(default_factory=dict)
    output: str | None
    latency_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: ErrorInfo | None = None
    rescore_id: uuid.UUID | None = Field(
        None, description="Set when this score re-scores a stored output (POST /v1/evaluations/{id}/rescore)."
    )
    throttled: bool = Field(
        False,
        description="The model endpoint refused an attempt for overload (rate limited, unavailable, timed out) before "
        "this outcome, even if a retry then answered: the scheduler's adaptive concurrency counts it as overload.",
    )
    prediction: Prediction | None = Field(
        None, description="The item's structured prediction (from the model, or the label the scorer extracted)."
    )
    transcript: Transcript | None = Field(
        None, description="A conversation item's transcript: the history and the model's replies (uep_common.contract.dialogue)."
    )
    trajectory: Trajectory | None = Field(None, description="An agent benchmark's run of the item (from OutputGenerated).")


class SetMetricValue(BaseModel):
    """One set-level metric: its value and 95 % interval (None when undefined, e.g. ROC-AUC with one class), and
    how the interval was computed: ``wilson`` (a proportion of items: accuracy, hit@k) or ``bootstrap``
    (None in summaries stored before the method was recorded: those intervals are all bootstrap ones)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    method: Literal["wilson", "bootstrap"] | None = None


class SetMetrics(BaseModel):
    """Set-level metrics of a classification or ranking evaluation (``uep_common.analytics.set_metrics``).

    ``headline``: metric name → value with its 95 % interval: classification ``accuracy``,
    ``balanced_accuracy``, ``precision_|recall_|f1_`` ``macro|micro|weighted`` and, from the model's
    probabilities, ``roc_auc``, ``pr_auc``, ``log_loss``, ``brier``, ``ece``; ranking ``mrr`` and ``ndcg@k``,
    ``map@k``, ``recall@k``, ``precision@k``, ``hit@k`` (k in 1, 3, 5, 10). ``n`` items entered (scored, with a
    gold label / an evaluated query); ``excluded`` items did not (errors, no gold label, queries without a
    relevant item). ``primary`` is what leaderboards rank (the benchmark's primary metric), None when the
    benchmark names none. ``classification`` / ``ranking`` hold the details: per-class rows, confusion matrix,
    reliability bins; values at each cut-off.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    kind: Literal["classification", "ranking"]
    n: int = Field(ge=0)
    excluded: int = Field(0, ge=0)
    primary: str | None = None
    confidence: float = 0.95
    method: str
    headline: dict[str, SetMetricValue] = Field(default_factory=dict)
    classification: dict[str, Any] | None = None
    ranking: dict[str, Any] | None = None


class PositionBias(BaseModel):
    """How often each option position was chosen (``chosen``: letter → items whose extracted answer is that
    letter; ``share``: its fraction of the items with an answer) beside where the gold answers were (``gold``),
    over an evaluation's multiple-choice originals and their ``choice_rotation`` variants. Each original's gold
    sits once at each position over its rotations, so an unbiased model's shares follow the gold's (1/n each).
    ``no_answer``: items without an extracted letter."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    chosen: dict[str, int]
    gold: dict[str, int]
    share: dict[str, float]
    no_answer: int = Field(0, ge=0)


class PerturbationFigures(BaseModel):
    """One perturbation's figures in a robustness evaluation (``uep_common.analytics.robustness``).

    ``items``/``scored``/``correct``/``accuracy`` (Wilson 95 % interval) over its perturbed items. ``pairs``:
    perturbed items paired with their original (same original item and repeat, both with a verdict);
    ``consistent``: pairs with the same verdict, ``consistency_rate`` = consistent / pairs. ``to_wrong``: pairs
    whose original is right and perturbed item wrong, ``to_right`` the reverse; ``flip_rate`` = (to_wrong +
    to_right) / pairs; ``mcnemar_p``: exact two-sided McNemar test on those two counts (pairs of one original's
    several variants are not independent: the p-value is then a rough guide). ``position_bias``: for
    ``choice_rotation``.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    perturbation: str
    seed: int | None = None
    items: int = Field(ge=0)
    scored: int = Field(ge=0)
    correct: int = Field(ge=0)
    accuracy: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    pairs: int = Field(ge=0)
    consistent: int = Field(ge=0)
    consistency_rate: float | None
    to_wrong: int = Field(ge=0)
    to_right: int = Field(ge=0)
    flip_rate: float | None
    mcnemar_p: float | None
    position_bias: PositionBias | None = None


class RobustnessSummary(BaseModel):
    """A robustness evaluation's figures: the originals (``original``, with ``perturbation`` = ``original``, no
    pairs) and each perturbation in request order. ``consistency_rate``: consistent pairs over every
    perturbation's pairs, the evaluation's robustness score (None without a pair)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    original: PerturbationFigures
    perturbations: list[PerturbationFigures]
    consistency_rate: float | None


class EvaluationSummary(BaseModel):
    """Aggregate of one evaluation, as stored in ``evaluations.summary``.

    ``accuracy`` = correct / scored, where scored = items with a true/false verdict; errored items are
    counted in ``errors`` and excluded from the denominator, never silently scored 0. Graded metrics
    (BLEU, ROUGE, …) give no verdict: their means are in ``metric_means`` and ``accuracy`` is None. The
    interval is the Wilson score interval at 95 % (Wilson 1927), None when scored = 0.
    ``extraction_failure_rate`` = items whose answer could not be extracted / items whose metric extracts
    (None when the metric does not extract). ``set_metrics``: :class:`SetMetrics` of a classification
    (``label_match``) or ranking (``ndcg``) evaluation, None otherwise. ``robustness``:
    :class:`RobustnessSummary` of a robustness evaluation (``n``, ``accuracy``… then count its originals and
    perturbed items together), None otherwise.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    n: int
    scored: int
    correct: int
    errors: int
    accuracy: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float = 0.95
    latency_ms_p50: float | None
    latency_ms_p90: float | None
    prompt_tokens: int
    completion_tokens: int
    metric_name: str | None
    metric_means: dict[str, float | None] = Field(default_factory=dict)
    metric_intervals: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="The 95 % Wilson interval of each per-item metric of ``metric_means`` whose every value is 0 or 1 "
        "(a proportion: an agent's agent_path, agent_traceable; an extra binary metric), over the items that have it.",
    )
    extraction_failure_rate: float | None = None
    set_metrics: SetMetrics | None = Field(
        None, description="Set-level metrics of a classification or ranking evaluation, with bootstrap intervals."
    )
    robustness: RobustnessSummary | None = Field(
        None, description="A robustness evaluation's figures per perturbation (accuracy, consistency, flips, McNemar)."
    )


class EvaluationCompleted(Event):
    """Every item of an evaluation is in; its summary is stored."""

    topic: ClassVar[str] = Topics.EVALUATION_COMPLETED
    key_kind: ClassVar[Literal["evaluation"]] = "evaluation"

    status: EvaluationStatus
    summary: EvaluationSummary | None
    error: str | None = None


class JudgeRequested(ItemEvent):
    """An item whose verdict needs an LLM judge: every item of an ``llm_judge`` evaluation, and the items of a
    ``hybrid`` evaluation that its automatic metric could not decide (``route_reason`` set)."""

    topic: ClassVar[str] = Topics.JUDGE_REQUESTED

    benchmark_id: uuid.UUID
    model_id: uuid.UUID
    prompt: str
    output: str | None
    latency_ms: float | None = Field(None, ge=0, description="The model call's wall time (carried to the score).")
    prompt_tokens: int | None = Field(None, ge=0)
    completion_tokens: int | None = Field(None, ge=0)
    throttled: bool = Field(
        False,
        description="The model endpoint refused an attempt for overload (rate limited, unavailable, timed out) before "
        "this outcome, even if a retry then answered: the scheduler's adaptive concurrency counts it as overload.",
    )
    route_reason: str | None = Field(
        None, description="Hybrid: why the automatic metric did not decide ('no_answer', 'free_form')."
    )
    automatic: dict[str, float | int | str | bool | None] = Field(
        default_factory=dict, description="Hybrid: the automatic metric's result (name, version, extracted, metrics)."
    )
    transcript: Transcript | None = Field(
        None, description="A conversation item's transcript: the history and the model's replies (uep_common.contract.dialogue)."
    )


class RescoreRequested(Event):
    """Re-score an evaluation's stored outputs with the current metric versions, without calling the model."""

    topic: ClassVar[str] = Topics.RESCORE_REQUESTED
    key_kind: ClassVar[Literal["evaluation"]] = "evaluation"

    rescore_id: uuid.UUID
    benchmark_id: uuid.UUID
    model_id: uuid.UUID


class ReportRequested(Event):
    """Build a report of an evaluation now (``POST /v1/evaluations/{id}/reports``); the reporter fills the
    pending ``reports`` row ``report_id``. Reports are also built, without this event, when an evaluation
    completes."""

    topic: ClassVar[str] = Topics.REPORT_REQUESTED
    key_kind: ClassVar[Literal["evaluation"]] = "evaluation"

    report_id: uuid.UUID
    baseline_evaluation_id: uuid.UUID | None = Field(
        None, description="Compare with this evaluation instead of the pinned / last completed one."
    )


class ReportReady(Event):
    """A report of an evaluation was written: its files are artifacts, served by the gateway at ``links``."""

    topic: ClassVar[str] = Topics.REPORT_READY
    key_kind: ClassVar[Literal["evaluation"]] = "evaluation"

    report_id: uuid.UUID
    report_schema_version: str = Field(description="Version of the JSON report schema (docs/report.schema.json).")
    baseline_evaluation_id: uuid.UUID | None = None
    formats: list[str] = Field(description="Formats written: 'html', 'json' and, when Chromium rendered it, 'pdf'.")
    artifacts: dict[str, str] = Field(default_factory=dict, description="SHA-256 of each format's file.")
    links: dict[str, str] = Field(default_factory=dict, description="Gateway paths of each format.")


EVENT_TYPES: dict[str, type[Event]] = {
    cls.__name__: cls
    for cls in (
        EvaluationRequested,
        SampleDispatched,
        OutputGenerated,
        ScoreComputed,
        EvaluationCompleted,
        JudgeRequested,
        RescoreRequested,
        ReportRequested,
        ReportReady,
    )
}
"""Event class by the ``uep-event-type`` header value."""
