"""Scoring one output: the benchmark's metric applied to a model output, as a ScoreComputed (or a
JudgeRequested for judge-type benchmarks). Used for live outputs and for rescoring stored ones."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pydantic import ValidationError

from uep_common.contract.agents import Trajectory
from uep_common.contract.configs import BenchmarkConfig, EvaluationType, MetricConfig
from uep_common.contract.events import ErrorInfo, JudgeRequested, OutputGenerated, Prediction, ScoreComputed
from uep_scorer.metrics import MetricInputError, MetricResult, PredictionMetric, TrajectoryMetric, get_metric
from uep_scorer.metrics.base import NO_ANSWER
from uep_scorer.references import ReferenceStore

log = logging.getLogger(__name__)

LABELS = ("extraction", "status", "signature")
"""Categorical details stored with every score: extraction "no_answer", sandbox "timed_out", sacrebleu signature."""
DIAGNOSTICS = ("failure", "stderr_tail")
"""Free-text details stored when a metric gives them (the code sandbox for a program that did not pass: the
assertion or exception, and the bounded tail of its stderr), for the per-item results and the report."""


def hybrid_route_reason(is_correct: bool | None, extraction: str | None) -> str | None:
    """Why a hybrid evaluation's automatic verdict is not final: 'no_answer' (the metric found no answer to
    extract: ``details["extraction"] == "no_answer"``, which every extracting metric reports the same way,
    :mod:`uep_scorer.metrics.base`), 'free_form' (the metric gives no true/false verdict, e.g. a graded
    metric), or None (decided)."""
    if extraction == NO_ANSWER:
        return NO_ANSWER
    if is_correct is None:
        return "free_form"
    return None


ON_LOOP_METRICS = frozenset(
    {"exact_match", "contains", "multiple_choice_letter", "label_match", "loglik_multiple_choice", "ndcg"}
)
"""Metrics run on the event loop rather than in a worker thread: linear in the output's length, with no
user-supplied pattern and no program to run. A thread round trip costs more than scoring with them does."""
ON_LOOP_MAX_CHARS = 16_384
"""Longer outputs are scored in a worker thread whatever the metric, so no single item holds the loop long."""


async def run_metric(
    name: str,
    prediction: Prediction | None,
    output: str,
    reference: dict[str, Any],
    params: dict[str, Any],
    trajectory: Trajectory | None = None,
) -> MetricResult:
    """:func:`apply_metric` on the event loop for a metric of :data:`ON_LOOP_METRICS` and an output of at most
    :data:`ON_LOOP_MAX_CHARS` characters, else in a worker thread (``asyncio.to_thread``). Raises as the metric."""
    if name in ON_LOOP_METRICS and len(output) <= ON_LOOP_MAX_CHARS:
        return apply_metric(name, prediction, output, reference, params, trajectory)
    return await asyncio.to_thread(apply_metric, name, prediction, output, reference, params, trajectory)


def metric_params(config: BenchmarkConfig, metric_cfg: MetricConfig) -> dict[str, Any]:
    """The params a metric is called with: the configured ones, plus the benchmark's ``class_names`` as
    ``labels`` for ``label_match`` when its params name none."""
    params = dict(metric_cfg.params)
    if metric_cfg.name == "label_match" and config.class_names and "labels" not in params:
        params["labels"] = list(config.class_names)
    return params


def apply_metric(
    name: str,
    prediction: Prediction | None,
    output: str,
    reference: dict[str, Any],
    params: dict[str, Any],
    trajectory: Trajectory | None = None,
) -> MetricResult:
    """One metric's result on one output: ``score_prediction`` for a metric that reads structured answers
    (:class:`~uep_scorer.metrics.PredictionMetric`), ``score_trajectory`` for a metric of agent items
    (:class:`~uep_scorer.metrics.TrajectoryMetric`, given the item's ``trajectory``), else ``score`` on the
    text. Blocking (run it in a thread).

    Raises:
        uep_scorer.metrics.UnknownMetricError, MetricInputError: as the metric.
    """
    metric = get_metric(name)
    if isinstance(metric, PredictionMetric):
        return metric.score_prediction(prediction, output, reference, params)
    if isinstance(metric, TrajectoryMetric):
        return metric.score_trajectory(trajectory, output, reference, params)
    return metric.score(output, reference, params)


def _item_metrics(result: MetricResult) -> dict[str, Any]:
    metric = get_metric(result.name)
    metrics: dict[str, Any] = {result.name: result.score}
    metrics.update({k: result.details.get(k) for k in getattr(metric, "submetrics", ())})
    submetrics = result.details.get("submetrics")
    if isinstance(submetrics, dict):
        metrics.update(submetrics)
    return metrics


async def score_output(event: OutputGenerated, refs: ReferenceStore) -> ScoreComputed | JudgeRequested:
    """Score one output with its benchmark's metrics (:attr:`~uep_common.contract.configs.BenchmarkConfig.item_metrics`:
    the first decides the verdict; each other one adds its score and submetrics to ``metrics``).

    A metric that reads structured answers gets the output's ``prediction`` (a classifier's label, a ranker's
    ranking); the ScoreComputed carries the prediction scored (the model's, or the label or ranking the metric
    read from an LLM's text).

    ``llm_judge`` (and other non-automatic) benchmarks: a JudgeRequested instead. ``hybrid``: the metric
    first; a decided item gets its ScoreComputed with ``metrics["decided_by"] = "automatic"``, an undecided
    one (:func:`hybrid_route_reason`, or no metric configured: 'free_form') a JudgeRequested. A benchmark
    config that does not parse gives a ScoreComputed with error type ``benchmark_config_error``.
    """
    common = {**event.item_fields(), "benchmark_id": event.benchmark_id, "model_id": event.model_id}
    passthrough = {
        "output": event.output,
        "latency_ms": event.latency_ms,
        "prompt_tokens": event.prompt_tokens,
        "completion_tokens": event.completion_tokens,
        "throttled": event.throttled,
        "transcript": event.transcript,
        "trajectory": event.trajectory,
    }
    try:
        config, evaluation_type = await refs.benchmark(event.benchmark_id)
    except ValidationError as exc:
        log.warning("scoring %s: benchmark configuration error: %s", event.item_key(), exc)
        return ScoreComputed(
            **common,
            **passthrough,
            metric_name="unknown",
            metric_version="-",
            is_correct=None,
            score=None,
            error=ErrorInfo(stage="scoring", type="benchmark_config_error", message=str(exc)[:2000]),
        )
    metric_cfg = config.scoring_metric
    name = config.metric_name or "unknown"
    hybrid = evaluation_type == EvaluationType.hybrid
    if evaluation_type not in (EvaluationType.automatic, EvaluationType.hybrid) and event.error is None:
        return JudgeRequested(**common, **passthrough, prompt=event.prompt)
    if hybrid and event.error is None and event.output is not None and metric_cfg is None:
        return JudgeRequested(**common, **passthrough, prompt=event.prompt, route_reason="free_form")
    if event.error is not None or (event.output is None and event.prediction is None):
        error = event.error or ErrorInfo(stage="inference", type="no_output", message="model returned no output")
        return ScoreComputed(
            **common, **passthrough, metric_name=name, metric_version="-", is_correct=None, score=None, error=error
        )
    try:
        reference = await refs.reference(event.sample_id, event.benchmark_id)
        result = await run_metric(
            name,
            event.prediction,
            event.output or "",
            reference,
            metric_params(config, metric_cfg) if metric_cfg else {},
            event.trajectory,
        )
        extra = [
            await run_metric(m.name, event.prediction, event.output or "", reference, metric_params(config, m), event.trajectory)
            for m in config.item_metrics[1:]
        ]
    except MetricInputError as exc:  # the benchmark's data or metric params are wrong: one line, no traceback
        log.warning("scoring %s: benchmark configuration error: %s", event.item_key(), exc)
        return ScoreComputed(
            **common,
            **passthrough,
            metric_name=name,
            metric_version="-",
            is_correct=None,
            score=None,
            error=ErrorInfo(stage="scoring", type="benchmark_config_error", message=str(exc)[:2000]),
        )
    except Exception as exc:
        log.exception("scoring failed for %s", event.item_key())
        return ScoreComputed(
            **common,
            **passthrough,
            metric_name=name,
            metric_version="-",
            is_correct=None,
            score=None,
            error=ErrorInfo(stage="scoring", type=type(exc).__name__, message=str(exc)[:2000]),
        )
    metrics: dict[str, Any] = {}
    for other in extra:
        metrics.update(_item_metrics(other))
    metrics.update(_item_metrics(result))
    metrics.update({k: str(result.details[k]) for k in LABELS if k in result.details})
    metrics.update({k: str(result.details[k]) for k in DIAGNOSTICS if result.details.get(k)})
    if hybrid:  # automatic metric first; what it cannot decide goes to the judge (the hybrid evaluation type)
        reason = hybrid_route_reason(result.is_correct, metrics.get("extraction"))
        if reason is not None:
            automatic = {"metric_name": result.name, "metric_version": result.version, "extracted": result.extracted, **metrics}
            return JudgeRequested(**common, **passthrough, prompt=event.prompt, route_reason=reason, automatic=automatic)
        metrics["decided_by"] = "automatic"
    return ScoreComputed(
        **common,
        **passthrough,
        metric_name=result.name,
        metric_version=result.version,
        is_correct=result.is_correct,
        score=result.score,
        extracted=result.extracted,
        metrics=metrics,
        prediction=event.prediction or (Prediction(**result.prediction) if result.prediction else None),
    )
