"""Statistics of one evaluation from its stored results: summary with intervals, breakdowns by category and
capability dimension, latency, tokens, cost by role, error kinds, extraction failures, the failures list,
the capability profile and the trend of the model over its runs.

Everything is read from PostgreSQL (the record) in a handful of queries; per-item arrays are processed with
numpy. Methods (also written into every report): accuracy = correct / scored with the Wilson 95 % score
interval (errored items excluded from the denominator, counted under errors), and so every proportion of
items (the mean of a per-item metric whose values are all 0 or 1); other means with a bootstrap
interval (:func:`uep_common.analytics.stats.bootstrap_mean`); latency percentiles by linear interpolation.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.analytics import stats
from uep_common.analytics.judge_standing import DEFAULT_MIN_AGREEMENT, evaluation_judges
from uep_common.analytics.set_metrics import classification_items, classification_values
from uep_common.analytics.summary import headline_of
from uep_common.contract.costs import currency
from uep_common.contract.judge_config import JudgeConfig
from uep_common.records.sampling import CATEGORY_KEYS
from uep_common.tables.budgets import SpendEntry
from uep_common.tables.models import Benchmark, Evaluation, Model
from uep_reporter.primary import ACCURACY, ChartMetric, figure_of
from uep_reporter.report_model import (
    ArmInfo,
    Breakdown,
    BreakdownRow,
    CostStats,
    ErrorKind,
    Estimate,
    Experiment,
    ExtractionStats,
    FailureItem,
    Failures,
    JudgeDimension,
    JudgeSample,
    JudgeSection,
    JudgeStanding,
    JudgeVerdictSample,
    LatencyStats,
    Profile,
    RoleCost,
    StageRoute,
    Stages,
    Summary,
    TokenStats,
    TrendPoint,
)

DIMENSION_KEYS = (("metadata", "dimension"), ("metadata", "capability"))
MAX_FAILURES = 200
"""Failures listed in a report (the results API pages through all of them)."""
MAX_TEXT = 1500
MAX_STDERR = 2048
MAX_METRIC_KEYS = 8
MAX_TREND_POINTS = 60
MIN_RADAR_AXES = 3
MAX_RADAR_CATEGORIES = 16
JUDGE_SAMPLES_PER_VERDICT = 2
"""Judged items whose reasoning a report shows, per item verdict (wrong, right, none): at most 6."""
MAX_REASONING = 800
MAX_ARMS = 50
STAGES = ("automatic", "judge", "human")
"""The stages that decide a hybrid evaluation's item, in order (``metrics["decided_by"]``)."""

METHODS = {
    "accuracy": stats.WILSON + "; accuracy = correct / scored, errored items excluded and counted as errors",
    "headline": "the evaluation's one figure, shown with the same interval in the API, the list, the header, this "
    "report, the CLI and the leaderboard: a proportion of items (accuracy, hit@k) with the Wilson score interval, "
    "any other set-level metric with the bootstrap percentile interval; errored and excluded items are named "
    "beside it",
    "means": "a per-item metric whose every value is 0 or 1: the share of 1s with the Wilson interval (a proportion, "
    "as the accuracy); any other mean with a bootstrap confidence interval: BCa for n <= 5000, percentile above (the BCa jackknife is "
    "O(n^2)); 2000 resamples (fewer above n = 10,000: 2e7 / n, at least 400), seed "
    + str(stats.BOOTSTRAP_SEED)
    + " (scipy.stats.bootstrap)",
    "latency": "percentiles p50/p90/p99 of the model call's wall time: " + stats.PERCENTILE,
    "extraction": "extraction failure rate = items whose answer could not be extracted / items whose metric extracts; "
    + stats.WILSON,
    "comparison": stats.MCNEMAR + "; differences of means: paired bootstrap, one resampled index vector for both sides",
    "baseline": 'the evaluation requested (POST …/reports {"baseline"}: any run of the same benchmark, another model\'s '
    "too), else the pinned evaluation of the same model name and benchmark, else of the completed ones before this one "
    "the last on the same item set (same benchmark version and samples), else the one sharing the most items",
    "trend": "every completed evaluation of this model name on this benchmark (all model and benchmark versions) "
    "whose headline is this run's headline metric, with the headline's interval from the stored summary (Wilson for "
    "a proportion, bootstrap for another set-level metric)",
    "judge": "rubric dimensions: mean over the judged items with a bootstrap interval, on each dimension's scale; "
    "reasoning shown for up to 2 judged items of each verdict (wrong, right, none), in benchmark order",
    "stages": "hybrid evaluations: accuracy (Wilson) of the items each stage decided (automatic metric, LLM judge, "
    "human annotators), and how many items were routed to the judge and to people, by reason",
    "set_metrics": "classification and ranking evaluations: set-level metrics over the items (scikit-learn: "
    "precision/recall/F1 with zero_division=nan, ROC-AUC and PR-AUC one-vs-rest, log loss, Brier; ECE with 15 "
    "equal-width confidence bins, Guo et al. 2017), each with a percentile bootstrap interval over items (shared "
    "resamples, fixed seed; uep_common.analytics.set_metrics)",
    "profile": "radar: for each capability dimension, the mean of each benchmark's headline figure (accuracy, or "
    "its primary set-level metric such as NDCG@10; figures outside [0, 1] left out) over the benchmarks carrying it (this "
    "evaluation for its benchmark, the latest completed evaluation of the same model version for the others); "
    "categories of this benchmark (this run's headline metric per category) when fewer than 3 dimensions are known; a bar chart when fewer than 3 axes remain",
}


def version_label(version: str) -> str:
    """A version as a label: ``v1.2`` for a numeric version (``1.2``), the version itself otherwise (``q4_1``,
    ``v1``, ``main``): a ``v`` prefix only reads as "version" before a number."""
    return f"v{version}" if version[:1].isdigit() else version


def judge_metric_keys(cfg: JudgeConfig) -> list[str]:
    """The per-item metric keys of a judge's rubric (what a report shows): ``judge_overall`` and
    ``judge_<dimension>`` (rubric, reference), ``pairwise_win`` (pairwise); the judge service's other keys
    (attempts, parse failures, jury size, spread, jurors…) are internal counters."""
    if cfg.mode == "pairwise":
        return ["pairwise_win"]
    return ["judge_overall"] + [f"judge_{d.name}" for d in cfg.dimensions]


def metric_filter(cfg: JudgeConfig | None) -> Callable[[str], bool]:
    """Which numeric per-item metrics a report summarises: every one, except that of the keys a judge writes
    (``judge_*``, ``juror_*``, ``pairwise_*``) only the rubric's (:func:`judge_metric_keys`)."""
    if cfg is None:
        return lambda key: True
    rubric = set(judge_metric_keys(cfg))
    return lambda key: not key.startswith(("judge_", "juror_", "pairwise_")) or key in rubric


def _est_prop(k: int, n: int) -> Estimate | None:
    ci = stats.wilson(k, n)
    if ci is None:
        return None
    return Estimate(value=k / n, ci_low=ci.low, ci_high=ci.high, confidence=ci.confidence, n=n, method=ci.method)


def _est_mean(values: np.ndarray[Any, Any]) -> Estimate | None:
    if values.size == 0:
        return None
    ci = stats.bootstrap_mean(values)
    return Estimate(
        value=float(values.mean()),
        ci_low=ci.low if ci else None,
        ci_high=ci.high if ci else None,
        n=int(values.size),
        method=ci.method if ci else "undefined interval: fewer than 2 values",
    )


def _est_metric(values: np.ndarray[Any, Any]) -> Estimate | None:
    """The mean of a per-item metric: a metric whose every value is 0 or 1 is a proportion of items (its mean
    the share of 1s) with the Wilson interval, as the summary's accuracy; any other with the bootstrap's (a
    bootstrap of ten 0s is the degenerate [0, 0], where Wilson's is [0, 0.278])."""
    if values.size and bool(np.isin(values, (0.0, 1.0)).all()):
        return _est_prop(int(np.count_nonzero(values)), int(values.size))
    return _est_mean(values)


def _truncate(value: object) -> str:
    s = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return s if len(s) <= MAX_TEXT else s[:MAX_TEXT] + f"… [{len(s) - MAX_TEXT} more characters]"


@dataclass
class Items:
    """Per-item arrays of one evaluation (index i = the i-th stored result)."""

    category: list[str | None]
    dimension: list[str | None]
    is_correct: np.ndarray[Any, Any]  # float: 1, 0, NaN (no verdict)
    score: np.ndarray[Any, Any]  # float, NaN = none
    latency: np.ndarray[Any, Any]  # float, NaN = none
    prompt_tokens: np.ndarray[Any, Any]
    completion_tokens: np.ndarray[Any, Any]
    error_kind: list[tuple[str, str] | None]
    extraction: list[str | None]
    decided_by: list[str | None] = field(default_factory=list)
    metric_versions: dict[str, list[str]] = field(default_factory=dict)
    metric_name: str | None = None
    category_source: str | None = None
    dimension_source: str | None = None
    chart_metric: ChartMetric = ACCURACY
    primary: np.ndarray[Any, Any] = field(default_factory=lambda: np.zeros(0))  # float, NaN = none: a ranker's per-query value
    gold: list[str | None] = field(default_factory=list)  # a classifier's gold label per item
    predicted: list[str | None] = field(default_factory=list)  # and its predicted label

    @property
    def n(self) -> int:
        """The number of items (stored results)."""
        return int(self.is_correct.size)


def _json_path(where: str, key: str) -> str:
    col = "s.metadata" if where == "metadata" else "s.input"
    return f"({col}->>'{key}')"


async def _first_present(session: AsyncSession, evaluation_id: uuid.UUID, keys) -> tuple[str, str] | None:
    """The first of ``keys`` that the evaluation's samples carry (looked up in the first 5000 items)."""
    counts = ", ".join(f"count({_json_path(w, k)})" for w, k in keys)
    row = (
        await session.execute(
            text(
                f"SELECT {counts} FROM (SELECT s.input, s.metadata FROM sample_results r JOIN samples s ON s.id = r.sample_id "
                "WHERE r.evaluation_id = :e LIMIT 5000) s"
            ),
            {"e": evaluation_id},
        )
    ).one()
    for (w, k), c in zip(keys, row, strict=True):
        if c:
            return w, k
    return None


async def load_items(session: AsyncSession, evaluation_id: uuid.UUID, metric: ChartMetric = ACCURACY) -> Items:
    """Every stored result of an evaluation as arrays (one query, plus one to find the category field), with
    what the chart ``metric`` needs per item: a ranker's per-query value (``metrics[item_key]``), a
    classifier's gold and predicted labels."""
    cat = await _first_present(session, evaluation_id, CATEGORY_KEYS)
    dim = await _first_present(session, evaluation_id, DIMENSION_KEYS)
    cat_sql = _json_path(*cat) if cat else "NULL"
    dim_sql = _json_path(*dim) if dim else "NULL"
    rows = (
        await session.execute(
            text(
                f"SELECT {cat_sql}, {dim_sql}, r.is_correct, r.score, r.latency_ms, r.prompt_tokens, r.completion_tokens, "
                "r.error->>'stage', r.error->>'type', r.metrics->>'extraction', r.metrics->>'decided_by', "
                "r.metrics->>:pk, s.reference->>'label', coalesce(r.prediction->>'label', r.extracted) "
                "FROM sample_results r JOIN samples s ON s.id = r.sample_id WHERE r.evaluation_id = :e"
            ),
            {"e": evaluation_id, "pk": metric.item_key or ""},
        )
    ).all()
    cols = list(zip(*rows, strict=True)) if rows else [[] for _ in range(14)]
    nan = float("nan")
    versions: dict[str, set[str]] = defaultdict(set)
    names: Counter[str] = Counter()
    for name, version, count in (
        await session.execute(
            text(
                "SELECT metric_name, metric_version, count(*) FROM sample_results WHERE evaluation_id = :e "
                "AND metric_name IS NOT NULL GROUP BY 1, 2"
            ),
            {"e": evaluation_id},
        )
    ).all():
        versions[name].add(version)
        names[name] += count
    return Items(
        category=list(cols[0]),
        dimension=list(cols[1]),
        is_correct=np.array([nan if v is None else float(v) for v in cols[2]], dtype=float),
        score=np.array([nan if v is None else v for v in cols[3]], dtype=float),
        latency=np.array([nan if v is None else v for v in cols[4]], dtype=float),
        prompt_tokens=np.array([0 if v is None else v for v in cols[5]], dtype=np.int64),
        completion_tokens=np.array([0 if v is None else v for v in cols[6]], dtype=np.int64),
        error_kind=[None if s is None else (s, t or "unknown") for s, t in zip(cols[7], cols[8], strict=True)],
        extraction=list(cols[9]),
        decided_by=list(cols[10]),
        metric_versions={k: sorted(v) for k, v in sorted(versions.items())},
        metric_name=names.most_common(1)[0][0] if names else None,
        category_source=".".join(cat) if cat else None,
        dimension_source=".".join(dim) if dim else None,
        chart_metric=metric,
        primary=np.array([_float_or_nan(v) for v in cols[11]], dtype=float),
        gold=list(cols[12]) if metric.kind == "classification" else [],
        predicted=list(cols[13]) if metric.kind == "classification" else [],
    )


def _float_or_nan(v: str | None) -> float:
    try:
        return float("nan") if v is None else float(v)
    except ValueError:
        return float("nan")


async def metric_arrays(
    session: AsyncSession, evaluation_id: uuid.UUID, keep: Callable[[str], bool] = lambda key: True
) -> dict[str, np.ndarray[Any, Any]]:
    """Numeric per-item metrics (``metrics`` JSON values that are numbers, booleans excluded), by key: the
    :data:`MAX_METRIC_KEYS` most frequent of the keys ``keep`` accepts."""
    rows = (
        await session.execute(
            text(
                "SELECT m.key, array_agg(m.value::text::float8) FROM sample_results r, jsonb_each(r.metrics) m "
                "WHERE r.evaluation_id = :e AND jsonb_typeof(m.value) = 'number' GROUP BY m.key ORDER BY count(*) DESC, m.key"
            ),
            {"e": evaluation_id},
        )
    ).all()
    return {k: np.asarray(v, dtype=float) for k, v in [r for r in rows if keep(r[0])][:MAX_METRIC_KEYS]}


def _scored_stats(ok: np.ndarray[Any, Any], score: np.ndarray[Any, Any]) -> tuple[int, int, Estimate | None, Estimate | None]:
    verdict = ~np.isnan(ok)
    scored = int(verdict.sum())
    correct = int((ok[verdict] == 1.0).sum())
    s = score[~np.isnan(score)]
    binary = s.size > 0 and bool(np.isin(s, (0.0, 1.0)).all()) and scored == s.size
    score_mean = None if binary else _est_mean(s)  # a 0/1 score is the accuracy: Wilson covers it
    return scored, correct, _est_prop(correct, scored), score_mean


async def cost_by_role(session: AsyncSession, evaluation_id: uuid.UUID) -> CostStats:
    """Cost per role from the spend ledger (``spend_ledger``: ``settled`` of its settle and charge entries,
    in the site currency; calls = entries, an aggregate row of a compacted evaluation counting as its
    ``entries``, :mod:`uep_common.records.ledger_compaction`); tokens only when no ledger exists or it holds nothing for
    the evaluation."""
    tokens_note = "no spend ledger entries: tokens only (see summary.tokens)"
    se = SpendEntry
    rows = (
        await session.execute(
            select(
                se.role,
                func.sum(se.settled),
                func.sum(se.prompt_tokens),
                func.sum(se.completion_tokens),
                func.sum(func.coalesce(se.entries, 1)),  # an aggregate row stands for `entries` calls
            )
            .where(se.evaluation_id == evaluation_id, se.kind.in_(("settle", "charge")))
            .group_by(se.role)
            .order_by(se.role)
        )
    ).all()
    if not rows:
        return CostStats(available=False, note=tokens_note, by_role=[], total=None)
    cur = currency()
    by_role = [
        RoleCost(role=r, cost=float(c or 0), currency=cur, prompt_tokens=int(p or 0), completion_tokens=int(k or 0), calls=int(n))
        for r, c, p, k, n in rows
    ]
    return CostStats(
        available=True,
        note="settled cost per role from the spend ledger (settle and charge entries)",
        by_role=by_role,
        total=sum(x.cost for x in by_role),
    )


async def build_summary(
    session: AsyncSession, evaluation_id: uuid.UUID, items: Items, keep: Callable[[str], bool] = lambda key: True
) -> Summary:
    """The summary section (see the module docstring for the methods); ``keep``: which per-item metrics are
    summarised (:func:`metric_filter`)."""
    scored, correct, accuracy, score_mean = _scored_stats(items.is_correct, items.score)
    lat = items.latency[~np.isnan(items.latency)]
    pct = stats.percentiles(lat)
    errors = Counter(k for k in items.error_kind if k)
    examples: dict[tuple[str, str], str | None] = (
        {
            (st, ty or "unknown"): m
            for st, ty, m in (
                await session.execute(
                    text(
                        "SELECT DISTINCT ON (error->>'stage', error->>'type') error->>'stage', error->>'type', left(error->>'message', 300) "
                        "FROM sample_results WHERE evaluation_id = :e AND error IS NOT NULL ORDER BY error->>'stage', error->>'type', id"
                    ),
                    {"e": evaluation_id},
                )
            ).all()
        }
        if errors
        else {}
    )
    extracting = [e for e in items.extraction if e is not None]
    fails = sum(1 for e in extracting if e == "no_answer")
    means = {k: e for k, v in (await metric_arrays(session, evaluation_id, keep)).items() if (e := _est_metric(v)) is not None}
    n = items.n
    return Summary(
        n=n,
        scored=scored,
        correct=correct,
        errors=sum(errors.values()),
        metric_name=items.metric_name,
        metric_versions=items.metric_versions,
        accuracy=accuracy,
        score_mean=score_mean,
        metric_means=means,
        latency=LatencyStats(
            n=int(lat.size),
            p50=pct["p50"],
            p90=pct["p90"],
            p99=pct["p99"],
            mean=float(lat.mean()) if lat.size else None,
            method=stats.PERCENTILE,
        ),
        tokens=TokenStats(
            prompt=int(items.prompt_tokens.sum()),
            completion=int(items.completion_tokens.sum()),
            total=int(items.prompt_tokens.sum() + items.completion_tokens.sum()),
            mean_prompt_per_item=float(items.prompt_tokens.mean()) if n else None,
            mean_completion_per_item=float(items.completion_tokens.mean()) if n else None,
        ),
        cost=await cost_by_role(session, evaluation_id),
        extraction=ExtractionStats(
            items_extracting=len(extracting),
            failures=fails,
            rate=_est_prop(fails, len(extracting)),
            by_kind=dict(sorted(Counter(extracting).items())),
        ),
        error_kinds=[
            ErrorKind(kind=f"{s}/{t}", stage=s, type=t, count=c, share=c / n if n else 0.0, example=examples.get((s, t)))
            for (s, t), c in errors.most_common()
        ],
    )


def group_primary(items: Items, idx: np.ndarray[Any, Any], accuracy: Estimate | None) -> Estimate | None:
    """The chart metric (``items.chart_metric``) over the items ``idx``: the accuracy (Wilson) when that is
    the metric; a ranker's mean per-query value over its evaluated queries (Wilson for hit@k, whose values
    are 0 or 1; bootstrap otherwise, :func:`_est_metric`); a classifier's set-level metric recomputed on the
    group's items with a verdict and a gold label (scikit-learn, point value: no interval per group); None
    when the metric has no value per group (ROC-AUC, a graded mean) or the group has no item for it."""
    metric = items.chart_metric
    if metric.key == "accuracy":
        return accuracy
    if metric.kind == "ranking":
        values = items.primary[idx]
        return _est_metric(values[~np.isnan(values)])
    if metric.kind == "classification" and metric.per_group and items.gold:
        used = [i for i in idx.tolist() if not np.isnan(items.is_correct[i]) and (items.gold[i] or "").strip()]
        if not used:
            return None
        classes = sorted({g for g in items.gold if g and g.strip()})
        cls = classification_items([items.gold[i] or "" for i in used], [items.predicted[i] for i in used], None, classes)
        value = classification_values(cls).get(metric.key)
        if value is None:
            return None
        return Estimate(value=value, ci_low=None, ci_high=None, n=len(used), method="point value (no interval per group)")
    return None


def breakdown(labels: list[str | None], items: Items, source: str | None, note: str) -> Breakdown:
    """Accuracy (Wilson), score mean (bootstrap) and the chart metric (:func:`group_primary`) per label; rows
    sorted by label, items without one grouped under ``(none)``."""
    groups: dict[str, list[int]] = defaultdict(list)
    for i, label in enumerate(labels):
        groups[label if label is not None else "(none)"].append(i)
    rows = []
    for name in sorted(groups):
        idx = np.asarray(groups[name])
        scored, correct, acc, sm = _scored_stats(items.is_correct[idx], items.score[idx])
        errs = sum(1 for i in groups[name] if items.error_kind[i])
        rows.append(
            BreakdownRow(
                name=name,
                n=int(idx.size),
                scored=scored,
                correct=correct,
                errors=errs,
                accuracy=acc,
                score_mean=sm,
                primary=group_primary(items, idx, acc),
            )
        )
    return Breakdown(source=source, note=note, rows=rows)


def category_breakdown(items: Items) -> Breakdown:
    """Per-category breakdown (e.g. MMLU subject); empty rows when the samples carry no category."""
    if items.category_source is None:
        return Breakdown(source=None, note="the samples carry no category (metadata.category/subject, input.subject…)", rows=[])
    return breakdown(items.category, items, items.category_source, f"grouped by {items.category_source}")


def dimension_breakdown(items: Items, dims: list[str]) -> Breakdown:
    """Per capability dimension: from the samples' ``metadata.dimension`` when present, else every item counts
    toward each of the benchmark's ``capability_dimensions`` (so every row equals the overall figure)."""
    if items.dimension_source is not None:
        return breakdown(items.dimension, items, items.dimension_source, f"grouped by {items.dimension_source}")
    if not dims:
        return Breakdown(source=None, note="the benchmark declares no capability dimensions", rows=[])
    whole = breakdown([None] * items.n, items, None, "")
    rows = [r.model_copy(update={"name": d}) for d in dims for r in whole.rows]
    return Breakdown(
        source="benchmark.capability_dimensions", note="every item counts toward each dimension of the benchmark", rows=rows
    )


async def failures(session: AsyncSession, evaluation_id: uuid.UUID, category_source: str | None) -> Failures:
    """The first :data:`MAX_FAILURES` items that are not correct (wrong or errored), in benchmark order."""
    cat_sql = _json_path(*category_source.split(".", 1)) if category_source else "NULL"
    where = "r.evaluation_id = :e AND r.is_correct IS NOT TRUE"
    total = (
        await session.execute(text(f"SELECT count(*) FROM sample_results r WHERE {where}"), {"e": evaluation_id})
    ).scalar_one()
    rows = (
        await session.execute(
            text(
                f"SELECT s.ordinal, s.external_id, r.repeat, r.arm, {cat_sql}, s.input, s.reference, r.output, r.extracted, "
                "r.is_correct, r.score, r.error, r.metrics->>'failure', r.metrics->>'stderr_tail' "
                "FROM sample_results r JOIN samples s ON s.id = r.sample_id "
                f"WHERE {where} ORDER BY s.ordinal, r.repeat, r.arm LIMIT :limit"
            ),
            {"e": evaluation_id, "limit": MAX_FAILURES},
        )
    ).all()
    items = [
        FailureItem(
            ordinal=o,
            external_id=x,
            repeat=rp,
            arm=arm,
            category=c,
            input=_truncate(inp),
            reference=_truncate(ref),
            output=None if out is None else _truncate(out),
            extracted=ext,
            is_correct=ok,
            score=sc,
            error=None if err is None else f"{err.get('stage')}/{err.get('type')}: {err.get('message', '')}"[:MAX_TEXT],
            failure=None if failure is None else failure[:MAX_TEXT],
            stderr_tail=None if stderr is None else stderr[-MAX_STDERR:],
        )
        for o, x, rp, arm, c, inp, ref, out, ext, ok, sc, err, failure, stderr in rows
    ]
    return Failures(total=total, shown=len(items), items=items)


async def trend(
    session: AsyncSession, ev: Evaluation, model: Model, bench: Benchmark, metric: ChartMetric = ACCURACY
) -> list[TrendPoint]:
    """Every completed evaluation of this tenant of this model name (the same owner's versions) on this
    benchmark slug (plus this one) whose headline is ``metric`` (:func:`uep_reporter.primary.figure_of`), by
    time, with the headline's value and interval. Another tenant's runs never show: names are unique per owner
    only, and a site model's runs by other tenants are theirs."""
    schedule_col = getattr(Evaluation, "schedule_id", None)
    cols = [Evaluation.id, Evaluation.completed_at, Evaluation.created_at, Evaluation.summary, Model.version, Benchmark.version]
    if schedule_col is not None:
        cols.append(schedule_col)
    rows = (
        await session.execute(
            select(*cols)
            .join(Model, Model.id == Evaluation.model_id)
            .join(Benchmark, Benchmark.id == Evaluation.benchmark_id)
            .where(Model.name == model.name, Benchmark.slug == bench.slug)
            .where(Evaluation.tenant_id == ev.tenant_id, Model.owner_tenant_id.is_not_distinct_from(model.owner_tenant_id))
            .where((Evaluation.status == "completed") | (Evaluation.id == ev.id))
            .order_by(Evaluation.completed_at.desc().nulls_last())
            .limit(MAX_TREND_POINTS)
        )
    ).all()
    points = []
    for row in rows:
        value = figure_of(row[3], metric)
        if value is None:
            continue
        current = row[0] == ev.id
        points.append(
            TrendPoint(
                evaluation_id=row[0],
                time=row[1] or row[2],
                value=value[0],
                ci_low=value[1],
                ci_high=value[2],
                label="this run" if current else version_label(row[4]),
                model_version=row[4],
                benchmark_version=row[5],
                scheduled=bool(row[6]) if schedule_col is not None else False,
                current=current,
            )
        )
    return sorted(points, key=lambda p: p.time)


async def _dimension_profile(session: AsyncSession, ev: Evaluation) -> dict[str, float]:
    rows = (
        await session.execute(
            select(Evaluation.id, Evaluation.benchmark_id, Evaluation.summary, Benchmark.slug, Benchmark.capability_dimensions)
            .join(Benchmark, Benchmark.id == Evaluation.benchmark_id)
            .where(Evaluation.model_id == ev.model_id, (Evaluation.status == "completed") | (Evaluation.id == ev.id))
            .order_by(Evaluation.completed_at.desc().nulls_last())
        )
    ).all()
    own_slug = next((r[3] for r in rows if r[0] == ev.id), None)
    per_bench: dict[str, tuple[float, list[str]]] = {}
    for eid, _bid, summary, slug, dims in rows:
        hl = headline_of(summary)
        value = hl.value if hl is not None else None
        if value is None or not 0.0 <= value <= 1.0 or (slug == own_slug and eid != ev.id) or slug in per_bench:
            continue
        per_bench[slug] = (value, list(dims or []))
    acc: dict[str, list[float]] = defaultdict(list)
    for value, dims in per_bench.values():
        for d in dims:
            acc[d].append(value)
    return {d: float(np.mean(v)) for d, v in acc.items()}


async def enough_dimensions(session: AsyncSession, ev: Evaluation, baseline: Evaluation | None) -> bool:
    """Whether the capability-dimension radar has at least :data:`MIN_RADAR_AXES` axes (else categories are drawn)."""
    dims = set(await _dimension_profile(session, ev))
    if baseline is not None:
        dims |= set(await _dimension_profile(session, baseline))
    return len(dims) >= MIN_RADAR_AXES


async def profile(
    session: AsyncSession,
    ev: Evaluation,
    model: Model,
    baseline: Evaluation | None,
    categories: Breakdown,
    baseline_categories: Breakdown | None,
    metric_label: str = "accuracy",
) -> Profile:
    """Series for the radar chart (see METHODS["profile"]); by category, the chart metric (``metric_label``
    names it)."""
    name = f"{model.name} {version_label(model.version)}"
    series = {f"{name} (this run)": await _dimension_profile(session, ev)}
    if baseline is not None:
        bmodel = await session.get(Model, baseline.model_id)
        series[f"{bmodel.name} {version_label(bmodel.version)} (baseline)"] = await _dimension_profile(session, baseline)
    n_dims = len({d for s in series.values() for d in s})
    if n_dims >= MIN_RADAR_AXES:
        return Profile(source="capability_dimensions", note=METHODS["profile"], series=series)
    rows = [r for r in categories.rows if r.primary is not None and r.primary.value is not None]
    if len(rows) >= MIN_RADAR_AXES:
        rows = sorted(rows, key=lambda r: -r.n)[:MAX_RADAR_CATEGORIES]
        names = sorted(r.name for r in rows)
        cat_series = {f"{name} (this run)": {r.name: r.primary.value for r in rows if r.primary and r.primary.value is not None}}
        if baseline_categories is not None:
            b = {
                r.name: r.primary.value
                for r in baseline_categories.rows
                if r.primary is not None and r.primary.value is not None and r.name in names
            }
            if b:
                cat_series[next(iter(series.keys() - {f"{name} (this run)"}), "baseline")] = b
        cat_series = {k: {n: v[n] for n in names if n in v} for k, v in cat_series.items()}
        return Profile(
            source="categories",
            note=f"{metric_label} per category ({categories.source}); fewer than "
            f"{MIN_RADAR_AXES} capability dimensions are known for this model",
            series=cat_series,
        )
    return Profile(source="capability_dimensions", note=METHODS["profile"] + f" (only {n_dims} known)", series=series)


async def judge_section(
    session: AsyncSession, evaluation_id: uuid.UUID, cfg: JudgeConfig, min_agreement: float = DEFAULT_MIN_AGREEMENT
) -> JudgeSection:
    """The judge's part of the report (see METHODS["judge"]): the rubric's dimensions with their means, the
    counts of invalid and low-confidence verdicts, the reasoning of a few judged items, and each judge's cost
    and calibration standing (flagged under ``min_agreement``;
    :func:`uep_common.analytics.judge_standing.evaluation_judges`)."""
    counts = (
        await session.execute(
            text(
                "SELECT count(*) FILTER (WHERE metrics->'judge_invalid' IS NOT NULL), "
                "count(*) FILTER (WHERE metrics->>'judge_invalid' = '1'), "
                "count(*) FILTER (WHERE metrics->>'judge_low_confidence' = '1') "
                "FROM sample_results WHERE evaluation_id = :e"
            ),
            {"e": evaluation_id},
        )
    ).one()
    arrays = await metric_arrays(session, evaluation_id, set(judge_metric_keys(cfg)).__contains__)
    if cfg.mode == "pairwise":
        scales = [("pairwise_win", "win rate against the baseline's answers: win 1, tie 0.5, loss 0", 0.0, 1.0)]
    else:
        scales = [("judge_overall", "the judge's overall score", cfg.overall_min, cfg.overall_max)]
        scales += [(f"judge_{d.name}", d.description, d.min, d.max) for d in cfg.dimensions]
    dimensions = [
        JudgeDimension(
            name=key.removeprefix("judge_").removeprefix("pairwise_"),
            description=desc,
            min=lo,
            max=hi,
            mean=_est_mean(arrays[key]) if key in arrays else None,
        )
        for key, desc, lo, hi in scales
    ]
    picked = (
        await session.execute(
            text(
                "SELECT sample_id, repeat, arm, ordinal, external_id, is_correct, score FROM ("
                " SELECT r.sample_id, r.repeat, r.arm, s.ordinal, s.external_id, r.is_correct, r.score,"
                " row_number() OVER (PARTITION BY r.is_correct ORDER BY s.ordinal, r.repeat, r.arm) AS k"
                " FROM sample_results r JOIN samples s ON s.id = r.sample_id"
                " WHERE r.evaluation_id = :e AND EXISTS (SELECT 1 FROM judge_verdicts v WHERE v.evaluation_id = :e"
                " AND v.sample_id = r.sample_id AND v.repeat = r.repeat AND v.arm = r.arm)) j"
                " WHERE k <= :per ORDER BY ordinal, repeat, arm"
            ),
            {"e": evaluation_id, "per": JUDGE_SAMPLES_PER_VERDICT},
        )
    ).all()
    order = {d.name: i for i, d in enumerate(cfg.dimensions)}  # a verdict's scores in the rubric's order
    verdicts: dict[tuple[Any, int, str], list[JudgeVerdictSample]] = defaultdict(list)
    if picked:
        for row in (
            await session.execute(
                text(
                    "SELECT sample_id, repeat, arm, judge_model_name, position, valid, overall, scores, winner, "
                    "candidate_outcome, left(reasoning, :n), left(error, 300) FROM judge_verdicts "
                    "WHERE evaluation_id = :e AND sample_id = ANY(:ids) ORDER BY id LIMIT 200"
                ),
                {"e": evaluation_id, "ids": [p[0] for p in picked], "n": MAX_REASONING},
            )
        ).all():
            verdicts[(row[0], row[1], row[2])].append(
                JudgeVerdictSample(
                    judge_model=row[3],
                    position=row[4],
                    valid=row[5],
                    overall=row[6],
                    scores={
                        k: float(v)
                        for k, v in sorted((row[7] or {}).items(), key=lambda kv: order.get(kv[0], len(order)))
                        if isinstance(v, int | float)
                    },
                    winner=row[8],
                    candidate_outcome=row[9],
                    reasoning=row[10],
                    error=row[11],
                )
            )
    samples = [
        JudgeSample(ordinal=o, external_id=x, repeat=rp, arm=arm, is_correct=ok, score=sc, verdicts=verdicts[(sid, rp, arm)])
        for sid, rp, arm, o, x, ok, sc in picked
    ]
    return JudgeSection(
        mode=cfg.mode,
        judges=list(cfg.judges),
        items_judged=counts[0],
        invalid=counts[1],
        low_confidence=counts[2],
        dimensions=dimensions,
        samples=samples,
        standings=[
            JudgeStanding(**j) for j in (await evaluation_judges(session, [evaluation_id], min_agreement)).get(evaluation_id, [])
        ],
        agreement_threshold=min_agreement,
        note=METHODS["judge"],
    )


async def stages(session: AsyncSession, evaluation_id: uuid.UUID, items: Items) -> Stages:
    """A hybrid evaluation's items by the stage that decided them, and its routes (see METHODS["stages"])."""
    whole = breakdown(items.decided_by, items, "metrics.decided_by", "")
    order = {name: i for i, name in enumerate(STAGES)}
    rows = sorted(whole.rows, key=lambda r: (order.get(r.name, len(STAGES)), r.name))
    routes = (
        await session.execute(
            text(
                "SELECT stage, reason, count(*) FROM hybrid_routes WHERE evaluation_id = :e "
                "GROUP BY stage, reason ORDER BY stage, count(*) DESC, reason"
            ),
            {"e": evaluation_id},
        )
    ).all()
    return Stages(
        note=METHODS["stages"],
        rows=rows,
        routes=[StageRoute(stage=st, reason=rs, count=c) for st, rs, c in sorted(routes, key=lambda r: order.get(r[0], 9))],
    )


async def experiment(session: AsyncSession, ev: Evaluation, baseline_id: uuid.UUID | None) -> Experiment | None:
    """The other arms of ``ev``'s A/B experiment (same tenant), in the experiment's order, offered as
    baselines; None when ``ev`` is not an arm."""
    experiment_id = getattr(ev, "experiment_id", None)
    if experiment_id is None:
        return None
    rows = (
        await session.execute(
            select(Evaluation.id, Evaluation.arm, Evaluation.status, Evaluation.summary)
            .where(Evaluation.experiment_id == experiment_id, Evaluation.tenant_id == ev.tenant_id, Evaluation.id != ev.id)
            .order_by(Evaluation.created_at, Evaluation.arm)
            .limit(MAX_ARMS)
        )
    ).all()
    base = f"/v1/evaluations/{ev.id}"
    return Experiment(
        experiment_id=experiment_id,
        arms=[
            ArmInfo(
                evaluation_id=eid,
                arm=arm,
                status=status,
                accuracy=(summary or {}).get("accuracy"),
                is_baseline=eid == baseline_id,
                compare=f"{base}/compare?baseline={eid}",
                report=f"{base}/reports",
            )
            for eid, arm, status, summary in rows
        ],
    )
