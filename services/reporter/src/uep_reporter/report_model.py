"""The JSON report: pydantic models whose JSON Schema is published as ``docs/report.schema.json``.

Versioning: :data:`REPORT_SCHEMA_VERSION` is ``MAJOR.MINOR``. New optional fields bump MINOR; a removed,
renamed or retyped field, or a changed meaning, bumps MAJOR. Every report carries the version it follows.
Regenerate the schema file with ``python -m uep_reporter.report_model > docs/report.schema.json``
(a test fails when the file and the models disagree).

Every figure with an interval says how it was computed (``method``): Wilson score interval for
proportions, bootstrap (BCa or percentile, seed, resamples) for means, exact McNemar for paired verdicts.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from uep_common.analytics.comparison import Comparison
from uep_common.analytics.fingerprint import FingerprintDiff
from uep_common.analytics.summary import Headline

REPORT_SCHEMA_VERSION = "1.6"
SCHEMA_ID = "https://uep.example/schemas/report-1.6.json"


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)


class Estimate(_M):
    """A point estimate with its interval (``ci_low``/``ci_high`` None when undefined, e.g. 0 trials)."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float = 0.95
    n: int = Field(description="Observations behind the estimate.")
    method: str


class BenchmarkInfo(_M):
    """The evaluated benchmark version: its id, slug, name, version and category, the capability dimensions it
    carries and the metric its configuration names (None when it names none)."""

    id: uuid.UUID
    slug: str
    name: str
    version: str
    category: str
    capability_dimensions: list[str]
    metric: str | None


class ModelInfo(_M):
    """The evaluated model version: its registry id, name, version and kind."""

    id: uuid.UUID
    name: str
    version: str
    kind: str = Field(
        "generation",
        description="generation | classification | ranking | embedding (the registry's kind); classifier and ranker "
        "reports leave out what only generation has (tokens, answer extraction, decoding settings).",
    )


class EvaluationInfo(_M):
    """The evaluation itself: its status, creation and completion times (timezone-aware), the error that failed
    it, whether it is pinned as the baseline of its model and benchmark, the repeats of each sample, the sample
    limit, its A/B experiment and arm when it is an arm, and the benchmark and model it evaluated."""

    id: uuid.UUID
    status: str
    created_at: datetime
    completed_at: datetime | None
    error: str | None
    pinned: bool
    repeats: int
    sample_limit: int | None
    experiment_id: uuid.UUID | None = None
    arm: str | None = None
    benchmark: BenchmarkInfo
    model: ModelInfo


class LatencyStats(_M):
    """Latency of the model calls in milliseconds: percentiles p50/p90/p99 and the mean over the items with a
    latency (None when none has one), and how the percentiles are computed."""

    n: int = Field(description="Items with a latency.")
    p50: float | None
    p90: float | None
    p99: float | None
    mean: float | None
    unit: Literal["ms"] = "ms"
    method: str


class TokenStats(_M):
    """Tokens over all items: prompt, completion and their total, and the means per item (None with no items)."""

    prompt: int
    completion: int
    total: int
    mean_prompt_per_item: float | None
    mean_completion_per_item: float | None


class RoleCost(_M):
    """Spend of one role (inference or judge) from the settled spend ledger entries: cost in ``currency``, tokens
    and calls (an aggregate row of a compacted evaluation counts as the calls it stands for)."""

    role: str
    cost: float | None
    currency: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    calls: int | None


class CostStats(_M):
    """Cost of the evaluation by role, and the total in the site currency (None when no ledger entry exists)."""

    available: bool = Field(description="False when no spend ledger exists: tokens only.")
    note: str
    by_role: list[RoleCost]
    total: float | None


class ErrorKind(_M):
    """The items that failed with one kind of error (its stage and type, e.g. inference/timeout), their share of
    all items and the first 300 characters of one of their error messages."""

    kind: str = Field(description="stage/type, e.g. inference/timeout.")
    stage: str
    type: str
    count: int
    share: float = Field(description="count / n (all items).")
    example: str | None


class ExtractionStats(_M):
    """Answer extraction: how many items' metric extracts an answer from the output, how many found none, the
    failure rate and the count of each extraction kind (e.g. bare, explicit, format, no_answer)."""

    items_extracting: int = Field(description="Items whose metric extracts an answer.")
    failures: int
    rate: Estimate | None = Field(description="failures / items_extracting with the Wilson interval; None when no item extracts.")
    by_kind: dict[str, int]


class Summary(_M):
    """The evaluation's figures over all its items: counts (items, scored, correct, errored), the metric and its
    versions, accuracy, score and per-item metric means with intervals, latency, tokens, cost, answer extraction
    and the error kinds, most frequent first."""

    n: int
    scored: int
    correct: int
    errors: int
    metric_name: str | None
    metric_versions: dict[str, list[str]]
    accuracy: Estimate | None = Field(description="correct / scored, Wilson 95 %; None when nothing was scored.")
    score_mean: Estimate | None = Field(description="Mean of the items' `score` (bootstrap); None when no item has a score.")
    metric_means: dict[str, Estimate] = Field(description="Means of numeric per-item metrics (bootstrap).")
    latency: LatencyStats
    tokens: TokenStats | None = Field(description="Token counts; None for classifiers and rankers (they use none).")
    cost: CostStats
    extraction: ExtractionStats | None = Field(
        description="Answer extraction; None for classifiers and rankers (their predictions are not parsed from text)."
    )
    error_kinds: list[ErrorKind]


class BreakdownRow(_M):
    """Counts, accuracy (Wilson) and score mean (bootstrap) of the items of one group (a category, a capability
    dimension or a deciding stage); ``(none)`` groups the items without one."""

    name: str
    n: int
    scored: int
    correct: int
    errors: int
    accuracy: Estimate | None
    score_mean: Estimate | None
    primary: Estimate | None = Field(
        None,
        description="The report's chart metric (Report.chart_metric) over the group: the accuracy, a ranker's mean "
        "per-query value (e.g. NDCG@10), a classifier's set-level metric recomputed on the group (schema 1.6).",
    )


class Breakdown(_M):
    """Items grouped by a label (category or capability dimension): one row per label, sorted by label; no rows
    when the samples carry no label (``note`` says why)."""

    source: str | None = Field(description="Where the grouping comes from (e.g. input.subject); None when absent.")
    note: str
    rows: list[BreakdownRow]


class TrendPoint(_M):
    """One completed evaluation of the same model name on the same benchmark slug: its accuracy with the Wilson
    interval from its stored summary, when it completed, the model and benchmark versions, whether a schedule
    started it and whether it is the reported evaluation (labelled 'this run')."""

    evaluation_id: uuid.UUID
    time: datetime
    value: float = Field(description="The run's headline figure of the report's chart metric (Report.chart_metric).")
    ci_low: float | None
    ci_high: float | None
    label: str
    model_version: str
    benchmark_version: str
    scheduled: bool
    current: bool


class Profile(_M):
    """The capability profile drawn as a radar: accuracy per capability dimension (or per category of this
    benchmark when fewer than 3 dimensions are known) of this run and of the baseline when there is one, one
    series each."""

    source: str = Field(description="capability_dimensions (across benchmarks) or categories (this benchmark).")
    note: str
    series: dict[str, dict[str, float]] = Field(description="series → dimension → value in [0, 1].")


class BaselineInfo(_M):
    """The evaluation the report is compared with: a run of the same model, or of another one on the same benchmark
    (e.g. a classifier against an LLM evaluated as a classifier)."""

    evaluation_id: uuid.UUID
    reason: str = Field(description="pinned | previous | requested")
    model_name: str | None = Field(None, description="The baseline's model (schema 1.4; None in older reports).")
    model_kind: str | None = Field(
        None, description="generation | classification | ranking | embedding: the baseline model's kind (schema 1.4)."
    )
    model_version: str
    benchmark_version: str
    completed_at: datetime | None
    accuracy: float | None


class FailureItem(_M):
    """One item that is not correct (wrong or errored): where it is in the benchmark (ordinal, external id,
    repeat, arm), its category, the sample's input and reference, the model's output and extracted answer, the
    verdict, the score and the error as ``stage/type: message``; texts truncated to 1500 characters."""

    ordinal: int
    external_id: str | None
    repeat: int
    arm: str
    category: str | None
    input: str = Field(description="The sample's input as JSON, truncated.")
    reference: str = Field(description="The reference as JSON, truncated.")
    output: str | None
    extracted: str | None
    is_correct: bool | None
    score: float | None
    error: str | None
    failure: str | None = Field(
        None, description="Why the metric failed the item, when it says: e.g. a code program's assertion or exception."
    )
    stderr_tail: str | None = Field(None, description="A code program's stderr, its last 2 KiB (tracebacks with source lines).")


class Failures(_M):
    """The items that are not correct, in benchmark order: the first 200 of ``total`` (the results API pages through
    all of them)."""

    total: int = Field(description="Items not correct (wrong or errored).")
    shown: int
    items: list[FailureItem]


class JudgeDimension(_M):
    """A rubric dimension of the judge (or 'overall', or the pairwise win rate), its scale ``min``..``max`` and its
    mean over the judged items."""

    name: str = Field(description="'overall' or a rubric dimension of the judge configuration.")
    description: str
    min: float
    max: float
    mean: Estimate | None = Field(description="Mean over the judged items on the dimension's scale (bootstrap).")


class JudgeVerdictSample(_M):
    """One juror's verdict on a judged item: rubric scores (overall and by dimension, in the rubric's order) or,
    pairwise, the winner as answered ('A', 'B', 'tie') and the candidate's outcome ('win', 'loss', 'tie')."""

    judge_model: str
    position: str = Field(description="'AB' or 'BA' for a pairwise comparison, '-' otherwise.")
    valid: bool
    overall: float | None
    scores: dict[str, float]
    winner: str | None
    candidate_outcome: str | None
    reasoning: str | None = Field(description="The judge's reasoning, truncated.")
    error: str | None = Field(description="Why the answer was invalid.")


class JudgeSample(_M):
    """A judged item shown with its verdicts: where it is in the benchmark, its final verdict and score, and what
    each juror answered."""

    ordinal: int
    external_id: str | None
    repeat: int
    arm: str
    is_correct: bool | None
    score: float | None
    verdicts: list[JudgeVerdictSample]


class JudgeStanding(_M):
    """One judge model of this evaluation: what its calls cost, how many verdicts it gave, and how it agreed
    with people when last calibrated (flagged below the site's threshold)."""

    judge_model: str
    cost: float = Field(description="Judge calls charged to this evaluation (spend ledger role judge), site currency.")
    verdicts: int = Field(description="Verdicts this judge gave in this evaluation (each order of a pairwise item counts).")
    cost_per_verdict: float | None
    agreement: float | None = Field(
        description="The judge's newest calibration against people in the tenant (mean Cohen's kappa with the "
        "annotators, quadratic-weighted for ratings, lowest over its questions); None: never calibrated."
    )
    flagged: bool = Field(description="agreement below UEP_JUDGE_MIN_AGREEMENT: read this evaluation's judged scores with care.")
    calibrated_at: datetime | None


class JudgeSection(_M):
    """The LLM judge's part of the report: the mode and judges, how many items were judged and how many got no
    valid or a low-confidence verdict, the rubric's dimensions with their means, and up to 2 judged items of
    each verdict (wrong, right, none) with the judges' reasoning."""

    mode: str = Field(description="rubric | reference | pairwise.")
    judges: list[str]
    items_judged: int = Field(description="Items that reached the judge.")
    invalid: int = Field(description="Judged items without a valid verdict.")
    low_confidence: int = Field(description="Judged items whose jury disagreed or lost a juror.")
    dimensions: list[JudgeDimension]
    samples: list[JudgeSample] = Field(description="A few judged items with the judges' reasoning.")
    standings: list[JudgeStanding] = Field(
        default_factory=list, description="Each judge's cost here and its agreement with people (judge calibration)."
    )
    agreement_threshold: float | None = Field(None, description="UEP_JUDGE_MIN_AGREEMENT when the report was written.")
    note: str


class StageRoute(_M):
    """How many items of a hybrid evaluation were routed to a stage, for one reason."""

    stage: str = Field(description="The stage an item was routed to: judge | human.")
    reason: str
    count: int


class Stages(_M):
    """A hybrid evaluation's items by the stage that decided them (automatic metric, LLM judge, human annotators),
    and the routes that sent items to the judge or to people."""

    note: str
    rows: list[BreakdownRow] = Field(description="One row per deciding stage: automatic, judge, human.")
    routes: list[StageRoute]


class ArmInfo(_M):
    """Another arm of the evaluation's A/B experiment: its evaluation, status and accuracy, and the API paths that
    compare the report's evaluation with it or build a report against it."""

    evaluation_id: uuid.UUID
    arm: str
    status: str
    accuracy: float | None
    is_baseline: bool = Field(description="This arm is the baseline of the report's comparison.")
    compare: str = Field(description="The API path comparing this report's evaluation with the arm.")
    report: str = Field(description='The API path to POST {"baseline": <arm\'s evaluation id>} to for a report against it.')


class Experiment(_M):
    """The A/B experiment the evaluation is an arm of: its id and the other arms (at most 50, in creation order)."""

    experiment_id: uuid.UUID
    arms: list[ArmInfo] = Field(description="The experiment's other arms, offered as baselines.")


class SetValue(_M):
    """A set-level metric with its 95 % interval (``ci_low``/``ci_high`` None when undefined)."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    method: Literal["wilson", "bootstrap"] | None = Field(
        None,
        description="wilson: a proportion of items (accuracy, hit@k), Wilson score interval; bootstrap: any other "
        "set-level metric (schema 1.5; None in older reports, whose intervals are all bootstrap ones).",
    )


class ClassRow(_M):
    """Precision, recall and F1 of one class (against the rest) with bootstrap intervals, and its support."""

    label: str
    precision: float | None
    recall: float | None
    f1: float | None
    support: int = Field(description="Items whose gold label is this class.")
    precision_ci_low: float | None
    precision_ci_high: float | None
    recall_ci_low: float | None
    recall_ci_high: float | None
    f1_ci_low: float | None
    f1_ci_high: float | None


class ConfusionMatrix(_M):
    """Item counts by gold class (rows, ``labels``) and predicted class (columns, ``predicted``):
    ``matrix[i][j]`` items of gold class ``labels[i]`` were predicted ``predicted[j]``."""

    labels: list[str] = Field(description="Rows: the gold classes.")
    predicted: list[str] = Field(description="Columns: the predicted classes, the last one '(no answer)'.")
    matrix: list[list[int]]


class ClassCurve(_M):
    """A ROC curve (``x`` false positive rate, ``y`` true positive rate; ``area`` ROC-AUC) or a precision-recall
    curve (``x`` recall, ``y`` precision; ``area`` average precision) of one class against the rest, thinned to
    at most 200 points."""

    label: str
    area: float
    x: list[float]
    y: list[float]
    prevalence: float | None = Field(None, description="Precision-recall: the class's share of the items.")


class ReliabilityBin(_M):
    """One of the 15 equal-width confidence bins of the reliability diagram: the items whose largest predicted
    probability lies in (``low``, ``high``], their accuracy and their mean confidence (None for an empty bin)."""

    low: float
    high: float
    count: int
    accuracy: float | None = Field(description="Share of the bin's items whose most probable class is the gold one.")
    confidence: float | None = Field(description="Mean largest probability of the bin's items.")


class ClassificationSection(_M):
    """Set-level metrics of a classification evaluation (``uep_common.analytics.set_metrics``)."""

    n: int = Field(description="Items with a verdict and a gold label.")
    excluded: int = Field(description="label_match items left out: an error, no gold label.")
    labels: list[str]
    positive_label: str | None = Field(
        description="Two classes: the positive class of ROC/PR and the Brier score (the benchmark's positive_class, "
        "else the second class)."
    )
    primary: str | None = Field(description="The benchmark's primary metric (what leaderboards rank).")
    method: str
    headline: dict[str, SetValue] = Field(
        description="accuracy, balanced_accuracy, precision/recall/f1 _macro/_micro/_weighted and, with probabilities, "
        "roc_auc, pr_auc, log_loss, brier, ece."
    )
    per_class: list[ClassRow]
    confusion_matrix: ConfusionMatrix | None = Field(description="None above 50 classes.")
    no_class_predictions: int = Field(description="Items whose predicted label is no class (e.g. an LLM's answer naming none).")
    probabilities: bool = Field(description="Whether the model gave probabilities (ROC, PR, calibration).")
    probabilities_note: str
    roc: list[ClassCurve]
    pr: list[ClassCurve]
    reliability: list[ReliabilityBin] | None


class RankingSection(_M):
    """Set-level metrics of a ranking evaluation: means over the evaluated queries."""

    n: int = Field(description="Queries evaluated.")
    excluded_no_relevant: int = Field(description="Queries without a relevant item: excluded, not averaged in as 0.")
    errors: int = Field(description="Queries with no score (an error).")
    primary: str | None
    method: str
    cutoffs: list[int]
    headline: dict[str, SetValue] = Field(description="mrr and ndcg@k, map@k, recall@k, precision@k, hit@k.")
    curves: dict[str, list[float | None]] = Field(
        description="Family (ndcg, map, recall, precision, hit) → mean at each cut-off."
    )


class ComparisonSection(_M):
    """The comparison with the baseline evaluation: which evaluation it is and why it was chosen, and the paired
    comparison of the two (McNemar on the verdicts, paired bootstrap on the means, fingerprint differences)."""

    baseline: BaselineInfo
    comparison: Comparison


class Report(_M):
    """A report of one evaluation (JSON Schema: docs/report.schema.json)."""

    model_config = ConfigDict(extra="forbid", title="uep evaluation report", json_schema_serialization_defaults_required=True)

    schema_version: Literal["1.6"] = REPORT_SCHEMA_VERSION
    report_id: uuid.UUID
    generated_at: datetime
    evaluation: EvaluationInfo
    headline: Headline | None = Field(
        None,
        description="The evaluation's headline as every view shows it (uep_common.analytics.summary.headline_of of the "
        "stored summary): the figure, its interval and the interval's method, and what it leaves out (schema 1.5).",
    )
    chart_metric: str = Field(
        "accuracy",
        description="The metric the trend, profile and category charts draw: the headline's (accuracy, or a "
        "set-level evaluation's primary metric such as ndcg@10) (schema 1.6).",
    )
    summary: Summary
    categories: Breakdown
    dimensions: Breakdown
    profile: Profile
    trend: list[TrendPoint]
    comparison: ComparisonSection | None
    no_baseline_reason: str | None = None
    fingerprint: dict[str, object]
    fingerprint_diff: FingerprintDiff | None
    failures: Failures
    judge: JudgeSection | None = Field(None, description="LLM-judged and hybrid evaluations: the rubric and sample reasoning.")
    stages: Stages | None = Field(None, description="Hybrid evaluations: items by the stage that decided them.")
    experiment: Experiment | None = Field(None, description="An A/B arm: the experiment's other arms.")
    classification: ClassificationSection | None = Field(
        None, description="Classification evaluations (label_match): set-level metrics, confusion matrix, curves."
    )
    ranking: RankingSection | None = Field(None, description="Ranking evaluations (ndcg): set-level metrics at each cut-off.")
    methods: dict[str, str] = Field(description="How each kind of figure is computed.")


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of :class:`Report`, with ``$id`` and the schema version."""
    schema = Report.model_json_schema(mode="serialization")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "version": REPORT_SCHEMA_VERSION,
        "description": (Report.__doc__ or "").strip() + " Versioned MAJOR.MINOR: optional additions bump MINOR, "
        "breaking changes bump MAJOR.",
        **schema,
    }


if __name__ == "__main__":
    print(json.dumps(json_schema(), indent=2, sort_keys=True))
