"""An evaluation's summary computed from its stored results (PostgreSQL), shared by the reporter (on completion),
the gateway (``POST …/stop``: the partial summary) and the scheduler (an evaluation interrupted by a restart).

Definitions are :class:`uep_common.contract.events.EvaluationSummary`'s; the interval is Wilson's at 95 %
(:func:`uep_common.analytics.stats.wilson_interval`). A classification (``label_match``) or ranking (``ndcg``)
evaluation also gets its set-level metrics (:func:`compute_set_metrics`, :mod:`uep_common.analytics.set_metrics`),
read from the stored items by :func:`load_classification` and :func:`load_ranking` (which the comparison of
two evaluations and the report use too); a robustness evaluation its figures per perturbation
(:func:`uep_common.analytics.robustness.compute_robustness`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.analytics.robustness import compute_robustness
from uep_common.analytics.set_metrics import (
    RANKING_CUTOFFS,
    ClassificationItems,
    classification_items,
    classification_metrics,
    is_proportion,
    ranking_keys,
    ranking_set_metrics,
)
from uep_common.analytics.stats import wilson_interval
from uep_common.contract.configs import SET_KIND_OF_METRIC, BenchmarkConfig, parse_benchmark_config
from uep_common.contract.events import EvaluationSummary, SetMetrics
from uep_common.tables.models import Benchmark, Evaluation, SampleResult

EXCLUDED_NO_RELEVANT = "excluded_no_relevant"
"""``metrics["status"]`` of a ranking query without a relevant item (the scorer's ``ndcg`` metric)."""

ItemKey = tuple[uuid.UUID, int]
"""An item of an evaluation: (sample id, repeat)."""


@dataclass(frozen=True)
class LoadedClassification:
    """The classification items of one evaluation: ``keys[i]`` is item ``i`` of ``items`` (None when no item has
    a verdict and a gold label); ``excluded`` = ``label_match`` items left out (an error, no gold label)."""

    keys: list[ItemKey]
    items: ClassificationItems | None
    excluded: int
    gold: list[str]
    predicted: list[str | None]
    probabilities: list[dict[str, float] | None]


@dataclass(frozen=True)
class LoadedRanking:
    """The evaluated queries of one ranking evaluation: ``keys[i]`` and ``values[name][i]`` (per-query values
    every evaluated query has); ``excluded_no_relevant`` queries had no relevant item, ``errors`` no score."""

    keys: list[ItemKey]
    values: dict[str, np.ndarray[Any, Any]]
    excluded_no_relevant: int
    errors: int


async def benchmark_config_of(session: AsyncSession, evaluation_id: uuid.UUID) -> BenchmarkConfig:
    """The parsed ``benchmarks.config`` of an evaluation's benchmark (every default when it does not parse)."""
    raw = await session.scalar(
        select(Benchmark.config).join(Evaluation, Evaluation.benchmark_id == Benchmark.id).where(Evaluation.id == evaluation_id)
    )
    try:
        return parse_benchmark_config(raw)
    except ValueError:  # pydantic.ValidationError: the scorer reported it on every item already
        return BenchmarkConfig()


async def load_classification(
    session: AsyncSession, evaluation_id: uuid.UUID, class_names: list[str] | None = None, positive_class: str | None = None
) -> LoadedClassification:
    """The ``label_match`` items of an evaluation with a verdict and a gold label (``samples.reference.label``),
    in (sample, repeat) order: gold label, predicted label (the prediction's, else the extracted answer; None =
    no answer) and the model's probabilities (``sample_results.prediction``); two classes: ``positive_class``
    is the positive one (:func:`uep_common.analytics.set_metrics.classification_items`)."""
    rows = (
        await session.execute(
            text(
                "SELECT r.sample_id, r.repeat, s.reference ->> 'label', coalesce(r.prediction ->> 'label', r.extracted), "
                "r.prediction -> 'probabilities', r.is_correct IS NOT NULL "
                "FROM sample_results r JOIN samples s ON s.id = r.sample_id "
                "WHERE r.evaluation_id = :e AND r.metric_name = 'label_match' ORDER BY r.sample_id, r.repeat"
            ),
            {"e": evaluation_id},
        )
    ).all()
    used = [r for r in rows if r[5] and r[2] is not None and r[2].strip()]
    gold = [r[2] for r in used]
    predicted = [r[3] for r in used]
    probabilities = [r[4] if isinstance(r[4], dict) else None for r in used]
    items = classification_items(gold, predicted, probabilities, class_names, positive_class) if used else None
    return LoadedClassification([(r[0], r[1]) for r in used], items, len(rows) - len(used), gold, predicted, probabilities)


async def load_ranking(session: AsyncSession, evaluation_id: uuid.UUID) -> LoadedRanking:
    """The ``ndcg`` items of an evaluation: the per-query values (``rr``, ``ndcg@k``, ``ap@k``…, at the cut-offs
    every evaluated query has) of the evaluated queries in (sample, repeat) order, and the counts left out."""
    rows = (
        await session.execute(
            text(
                "SELECT sample_id, repeat, metrics, is_correct IS NOT NULL FROM sample_results "
                "WHERE evaluation_id = :e AND metric_name = 'ndcg' ORDER BY sample_id, repeat"
            ),
            {"e": evaluation_id},
        )
    ).all()
    evaluated = [r for r in rows if r[3]]
    excluded = sum(1 for r in rows if not r[3] and (r[2] or {}).get("status") == EXCLUDED_NO_RELEVANT)
    values: dict[str, np.ndarray[Any, Any]] = {}
    if evaluated:
        cutoffs = sorted({int(k.split("@")[1]) for k in evaluated[0][2] if k.startswith("ndcg@")} | set(RANKING_CUTOFFS))
        for key in ranking_keys(cutoffs):
            column = [r[2].get(key) for r in evaluated]
            if all(isinstance(v, (int, float)) for v in column):
                values[key] = np.asarray(column, dtype=float)
    return LoadedRanking([(r[0], r[1]) for r in evaluated], values, excluded, len(rows) - len(evaluated) - excluded)


async def compute_set_metrics(session: AsyncSession, evaluation_id: uuid.UUID, metric_name: str | None) -> SetMetrics | None:
    """The set-level metrics of a classification or ranking evaluation (:data:`SET_KIND_OF_METRIC` of its
    metric), None for any other evaluation or when no item entered. The computation (bootstrap) runs in a
    worker thread."""
    kind = SET_KIND_OF_METRIC.get(metric_name or "")
    if kind is None:
        return None
    config = await benchmark_config_of(session, evaluation_id)
    result: dict[str, Any]
    if kind == "classification":
        labels = config.class_names or (config.scoring_metric.params.get("labels") if config.scoring_metric else None)
        loaded = await load_classification(session, evaluation_id, labels or None, config.positive_class)
        if loaded.items is None:
            return None
        result = await asyncio.to_thread(classification_metrics, loaded.items)
        excluded = loaded.excluded
    else:
        ranking = await load_ranking(session, evaluation_id)
        if not ranking.values:
            return None
        result = await asyncio.to_thread(ranking_set_metrics, ranking.values, ranking.excluded_no_relevant)
        result["ranking"]["errors"] = ranking.errors
        excluded = ranking.excluded_no_relevant + ranking.errors
    return SetMetrics.model_validate({**result, "excluded": excluded, "primary": config.primary_score})


async def compute_summary(session: AsyncSession, evaluation_id: uuid.UUID) -> EvaluationSummary:
    """Aggregate the stored results of one evaluation (see :class:`EvaluationSummary` for definitions).

    Latency percentiles are ``percentile_cont`` (linear interpolation) over items with a latency.
    """
    sr = SampleResult
    agg = (
        await session.execute(
            select(
                func.count(),
                func.count(sr.is_correct),
                func.count().filter(sr.is_correct.is_(True)),
                func.count(sr.error),
                func.percentile_cont(0.5).within_group(sr.latency_ms),
                func.percentile_cont(0.9).within_group(sr.latency_ms),
                func.coalesce(func.sum(sr.prompt_tokens), 0),
                func.coalesce(func.sum(sr.completion_tokens), 0),
                func.mode().within_group(sr.metric_name),
                func.count().filter(sr.metrics.has_key("extraction")),
                func.count().filter(sr.metrics["extraction"].astext == "no_answer"),
            ).where(sr.evaluation_id == evaluation_id)
        )
    ).one()
    n, scored, correct, errors, p50, p90, ptok, ctok, metric_name, extracting, no_answer = agg
    means = (
        await session.execute(
            text(
                "SELECT m.key, avg(m.value::text::float8) FROM sample_results r, jsonb_each(r.metrics) m "
                "WHERE r.evaluation_id = :e AND jsonb_typeof(m.value) = 'number' GROUP BY m.key ORDER BY m.key"
            ),
            {"e": evaluation_id},
        )
    ).all()
    binary = (
        await session.execute(
            text(
                "SELECT m.key, count(*), sum(m.value::text::float8), bool_and(m.value::text::float8 IN (0, 1)) "
                "FROM sample_results r, jsonb_each(r.metrics) m "
                "WHERE r.evaluation_id = :e AND jsonb_typeof(m.value) = 'number' GROUP BY m.key ORDER BY m.key"
            ),
            {"e": evaluation_id},
        )
    ).all()
    ci = wilson_interval(correct, scored)
    set_metrics = await compute_set_metrics(session, evaluation_id, metric_name)
    return EvaluationSummary(
        n=n,
        scored=scored,
        correct=correct,
        errors=errors,
        accuracy=correct / scored if scored else None,
        ci_low=ci[0] if ci else None,
        ci_high=ci[1] if ci else None,
        latency_ms_p50=p50,
        latency_ms_p90=p90,
        prompt_tokens=int(ptok),
        completion_tokens=int(ctok),
        metric_name=metric_name,
        metric_means=dict(means),
        metric_intervals=binary_intervals([tuple(row) for row in binary]),
        extraction_failure_rate=no_answer / extracting if extracting else None,
        set_metrics=set_metrics,
        robustness=await compute_robustness(session, evaluation_id),
    )


def binary_intervals(rows: list[tuple[Any, ...]]) -> dict[str, tuple[float, float]]:
    """The 95 % Wilson interval (:func:`uep_common.analytics.stats.wilson_interval`) of each per-item metric whose
    values are all 0 or 1, from ``rows`` of ``(name, items with it, sum of its values, all values 0 or 1)``;
    metrics with other values are left out."""
    out = {}
    for name, count, total, all_binary in rows:
        ci = wilson_interval(round(total), count) if all_binary and count else None
        if ci is not None:
            out[name] = ci
    return out


class Headline(BaseModel):
    """The one figure a list view, a card, a report header or the CLI shows for an evaluation, with the one
    interval every one of them shows.

    Attributes:
        metric: the figure's name: a set-level metric (``ndcg@10``, ``f1_macro``…), ``accuracy`` (the share of
            verdicts that are correct), or a graded metric's name (``bleu``: its mean).
        value: its value; None while nothing is scored.
        ci_low / ci_high: its 95 % interval as stored in the summary; None for a graded mean.
        method: how that interval was computed: ``wilson`` (the Wilson score interval of a proportion: accuracy,
            hit@k; :func:`uep_common.analytics.stats.wilson_interval`), ``bootstrap`` (any other set-level metric;
            :mod:`uep_common.analytics.set_metrics`), None without an interval.
        proportion: the figure is a share of items (shown as a percentage); otherwise a score shown as a number.
        set_level: True for a set-level metric of :attr:`uep_common.contract.events.EvaluationSummary.set_metrics`.
        n: the items (queries) the figure is over; None when the summary does not say.
        errors: items that ended with an error (the summary's ``errors``): none of them is in the figure.
        excluded: items left out of the figure, errors included (no verdict, no gold label, a query without a
            relevant item).
        note: what the figure leaves out, in words (``7 errors, excluded from the headline``); None when it
            leaves out nothing.
    """

    metric: str
    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    method: Literal["wilson", "bootstrap"] | None = None
    proportion: bool = False
    set_level: bool = False
    n: int | None = None
    errors: int = 0
    excluded: int = 0
    note: str | None = None


DEFAULT_SET_HEADLINE = {"classification": "accuracy", "ranking": "ndcg@10"}
"""The set-level headline of a summary whose benchmark names no primary set-level metric."""

_LEFT_OUT = {"classification": "without a gold label", "ranking": "without a relevant item"}
"""How a set-level headline names the items it leaves out that are not errors."""


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def excluded_note(errors: int, excluded: int, others: str = "without a verdict") -> str | None:
    """``"7 errors, excluded from the headline"`` (``"7 errors and 2 items without a verdict, excluded from the
    headline"`` when ``excluded`` counts more than the errors); None when nothing is left out."""
    parts = [_plural(errors, "error")] if errors else []
    if excluded > errors:
        parts.append(f"{_plural(excluded - errors, 'item')} {others}")
    return f"{' and '.join(parts)}, excluded from the headline" if parts else None


def headline_of(summary: Mapping[str, Any] | None) -> Headline | None:
    """The headline of an evaluation from its stored ``summary`` (the JSON of
    :class:`uep_common.contract.events.EvaluationSummary`): with set-level metrics, the benchmark's primary one
    (``set_metrics.primary``: what leaderboards rank), else :data:`DEFAULT_SET_HEADLINE` of its kind (else its
    first headline metric), with its stored interval and method; otherwise the accuracy with its Wilson
    interval; for a graded metric (no verdicts) the mean of ``metric_name``. Each says how many items it
    leaves out (:func:`excluded_note`). None without a summary or any of these."""
    if not summary:
        return None
    total = int(summary.get("n") or 0)
    errors = int(summary.get("errors") or 0)
    sm = summary.get("set_metrics") or {}
    values = sm.get("headline") or {}
    if values:
        name = next(
            (n for n in (sm.get("primary"), DEFAULT_SET_HEADLINE.get(str(sm.get("kind")))) if n in values), next(iter(values))
        )
        v = values[name] or {}
        has_ci = v.get("ci_low") is not None and v.get("ci_high") is not None
        # summaries stored before intervals named their method hold bootstrap intervals only
        method = (v.get("method") or "bootstrap") if has_ci else None
        excluded = max(int(sm.get("excluded") or 0), errors)
        return Headline(
            metric=name,
            value=v.get("value"),
            ci_low=v.get("ci_low"),
            ci_high=v.get("ci_high"),
            method=method,
            proportion=is_proportion(str(name)),
            set_level=True,
            n=sm.get("n"),
            errors=errors,
            excluded=excluded,
            note=excluded_note(errors, excluded, _LEFT_OUT.get(str(sm.get("kind")), "without a verdict")),
        )
    metric_name = summary.get("metric_name")
    means = summary.get("metric_means") or {}
    if summary.get("accuracy") is None and metric_name in means:
        return Headline(
            metric=metric_name,
            value=means[metric_name],
            n=total - errors,
            errors=errors,
            excluded=errors,
            note=excluded_note(errors, errors),
        )
    scored = int(summary.get("scored") or 0)
    excluded = max(total - scored, errors)
    return Headline(
        metric="accuracy",
        value=summary.get("accuracy"),
        ci_low=summary.get("ci_low"),
        ci_high=summary.get("ci_high"),
        method="wilson" if summary.get("ci_low") is not None else None,
        proportion=True,
        n=scored,
        errors=errors,
        excluded=excluded,
        note=excluded_note(errors, excluded),
    )
