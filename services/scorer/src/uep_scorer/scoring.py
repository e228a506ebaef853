"""Scoring one output: the benchmark's metric applied to a model output, as a ScoreComputed (or a
JudgeRequested for judge-type benchmarks). Used for live outputs and for rescoring stored ones."""

from __future__ import annotations

import asyncio
import logging

from uep_common.events import ErrorInfo, JudgeRequested, OutputGenerated, ScoreComputed
from uep_scorer.metrics import MetricInputError, get_metric
from uep_scorer.references import ReferenceStore

log = logging.getLogger(__name__)

LABELS = ("extraction", "status", "signature")
"""Categorical details stored with every score: extraction "no_answer", sandbox "timed_out", sacrebleu signature."""


async def score_output(event: OutputGenerated, refs: ReferenceStore) -> ScoreComputed | JudgeRequested:
    """Score one output with its benchmark's metric (``config.metric = {name, params}``)."""
    config, evaluation_type = await refs.benchmark(event.benchmark_id)
    metric_cfg = config.get("metric") or {}
    name = metric_cfg.get("name", "unknown")
    common = {**event.item_fields(), "benchmark_id": event.benchmark_id, "model_id": event.model_id}
    if evaluation_type != "automatic" and event.error is None:
        return JudgeRequested(**common, prompt=event.prompt, output=event.output)
    passthrough = {
        "output": event.output,
        "latency_ms": event.latency_ms,
        "prompt_tokens": event.prompt_tokens,
        "completion_tokens": event.completion_tokens,
    }
    if event.error is not None or event.output is None:
        error = event.error or ErrorInfo(stage="inference", type="no_output", message="model returned no output")
        return ScoreComputed(
            **common, **passthrough, metric_name=name, metric_version="-", is_correct=None, score=None, error=error
        )
    try:
        metric = get_metric(name)
        reference = await refs.reference(event.sample_id)
        result = await asyncio.to_thread(metric.score, event.output, reference, metric_cfg.get("params") or {})
    except MetricInputError as exc:  # the benchmark's data or metric params are wrong: one line, no traceback
        log.warning("scoring %s: benchmark configuration error: %s", event.item_key(), exc)
        return ScoreComputed(
            **common, **passthrough, metric_name=name, metric_version="-", is_correct=None, score=None,
            error=ErrorInfo(stage="scoring", type="benchmark_config_error", message=str(exc)[:2000]),
        )
    except Exception as exc:  # noqa: BLE001 - reported on the item, never dropped
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
    metrics: dict = {result.name: result.score}
    metrics.update({k: result.details.get(k) for k in getattr(metric, "submetrics", ())})
    metrics.update({k: str(result.details[k]) for k in LABELS if k in result.details})
    return ScoreComputed(
        **common,
        **passthrough,
        metric_name=result.name,
        metric_version=result.version,
        is_correct=result.is_correct,
        score=result.score,
        extracted=result.extracted,
        metrics=metrics,
    )
