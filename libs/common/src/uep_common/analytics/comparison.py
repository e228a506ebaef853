"""Paired comparison of two evaluations over the same items (two runs, or two arms of an A/B experiment —
each arm is its own evaluation), and the choice of a baseline.

Items are paired by (sample, repeat) when both evaluations ran the same benchmark version, else by
(external id — or ordinal when a sample has none —, repeat), so two versions of a benchmark still pair the
items they share. Only pairs where both sides have a verdict (``is_correct`` not null) enter the 2×2 table
and the exact McNemar test (:func:`uep_common.analytics.stats.mcnemar_exact`); the accuracy difference gets a paired
bootstrap interval drawn from the 2×2 table (:func:`uep_common.analytics.stats.paired_bootstrap_binary`: resampling pairs
= multinomial draws of the cells); continuous scores (``score``) of pairs where both have one enter a paired
bootstrap of the difference of means with one index vector for both sides
(:func:`uep_common.analytics.stats.paired_bootstrap_diff`). The pairing and the transition kinds are computed in
PostgreSQL (one full outer join), so 100,000-item evaluations compare in well under a second.

Set-level metrics (:func:`set_comparison`): when both evaluations are classification (``label_match``) or
ranking (``ndcg``) evaluations of the same benchmark version, every set-level headline metric (F1, ROC-AUC,
log loss, NDCG@k, MRR…; :mod:`uep_common.analytics.set_metrics`) of both over their paired items, and the paired bootstrap
of the difference: both sides are recomputed on the same resamples of the paired items (one count vector per
resample for both, :func:`uep_common.analytics.stats.bootstrap_weights`), the interval is the percentile interval of the
differences. ROC-AUCs (the positive class, or each class against the rest) also get DeLong's test for two
correlated AUCs (:func:`uep_common.analytics.stats.delong_test`: DeLong, DeLong & Clarke-Pearson 1988, with the fast
algorithm of Sun & Xu 2014).

Evaluations of two different benchmarks (two slugs) are never paired (:func:`check_comparable`).

Transitions per item, listed regressions first: ``regression`` (pass → fail), ``newly_errored`` (a verdict →
an error), ``improvement`` (fail → pass), ``error_fixed`` (error → a verdict), ``still_failing``,
``still_passing``, ``still_erroring``, ``only_in_current`` / ``only_in_baseline``.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any

import numpy as np
from pydantic import BaseModel, Field
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.analytics.fingerprint import FingerprintDiff, diff_fingerprints, fingerprint
from uep_common.analytics.set_metrics import (
    CLASSIFICATION_HEADLINE,
    MAX_BOOTSTRAP_CURVES,
    PROBABILITY_HEADLINE,
    classification_items,
    classification_replicates,
    classification_values,
    headline_name,
    method_text,
    ranking_replicates,
)
from uep_common.analytics.stats import (
    delong_test,
    mcnemar_exact,
    paired_bootstrap_binary,
    paired_bootstrap_diff,
    percentile_interval,
    set_resamples,
)
from uep_common.analytics.summary import benchmark_config_of, load_classification, load_ranking
from uep_common.contract.configs import SET_KIND_OF_METRIC, parse_evaluation_config
from uep_common.tables.models import Benchmark, Evaluation, Model

TRANSITION_ORDER = (
    "regression",
    "newly_errored",
    "improvement",
    "error_fixed",
    "still_failing",
    "still_erroring",
    "still_passing",
    "only_in_current",
    "only_in_baseline",
)
"""Order of transition kinds in listings: what got worse first."""
COMPARABLE_STATUSES = ("completed", "failed", "stopped", "budget_exhausted", "cancelled")


class ItemOutcome(BaseModel):
    """One side of a pair: verdict, score, error kind (``stage/type``) and the extracted answer."""

    is_correct: bool | None
    score: float | None
    error: str | None = None
    extracted: str | None = None


class Transition(BaseModel):
    """How one item changed between the baseline and the current evaluation."""

    kind: str
    sample_id: uuid.UUID
    ordinal: int
    external_id: str | None
    repeat: int
    baseline: ItemOutcome | None
    current: ItemOutcome | None


class McNemarView(BaseModel):
    """Exact McNemar test: ``b`` = pairs only the baseline got right (regressions), ``c`` = pairs only the
    current run got right (improvements)."""

    b: int
    c: int
    p_value: float
    significant: bool = Field(description="p < 0.05; never with zero discordant pairs.")
    method: str


class DiffView(BaseModel):
    """Difference of means over paired items (current − baseline) with its paired bootstrap interval."""

    n: int
    baseline_mean: float | None
    current_mean: float | None
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float = 0.95
    method: str | None


class SetMetricDiff(BaseModel):
    """A set-level metric of both evaluations over their paired items, and the paired bootstrap interval of
    ``difference`` = current − baseline (None when undefined on either side)."""

    name: str
    current: float | None
    baseline: float | None
    difference: float | None
    ci_low: float | None
    ci_high: float | None


class DeLongView(BaseModel):
    """DeLong's test of current − baseline ROC-AUC of one class (against the rest) over the paired items."""

    label: str
    auc_current: float
    auc_baseline: float
    difference: float
    se: float
    z: float | None
    p_value: float
    ci_low: float
    ci_high: float
    significant: bool = Field(description="p < 0.05.")
    method: str


class SetComparison(BaseModel):
    """Set-level metrics of two classification or ranking evaluations over their paired items."""

    kind: str = Field(description="classification | ranking")
    n_paired: int = Field(description="Items entering both sides' set-level metrics.")
    confidence: float = 0.95
    method: str
    metrics: list[SetMetricDiff]
    delong: list[DeLongView] = Field(default_factory=list, description="ROC-AUC: the positive class, or each class vs the rest.")
    note: str = ""


class Comparison(BaseModel):
    """Paired comparison of ``current`` against ``baseline``."""

    current_evaluation_id: uuid.UUID
    baseline_evaluation_id: uuid.UUID
    baseline_reason: str = Field(
        description="pinned | previous_same_items (the last earlier run on the same item set: same benchmark version, "
        "same samples) | previous (the earlier run sharing the most items) | requested | first_arm (an A/B arm against its experiment's first arm) | "
        "first_in_batch (a batch's evaluation against its first)"
    )
    paired_by: str = Field(description="'sample' (same benchmark version) or 'external_id' (across versions)")
    n_current: int
    n_baseline: int
    n_paired: int = Field(description="Items present in both evaluations.")
    n_paired_with_verdicts: int
    table: dict[str, int] = Field(
        description="2×2 table over pairs with verdicts: both_correct, baseline_only_correct, current_only_correct, both_wrong"
    )
    mcnemar: McNemarView
    accuracy: DiffView = Field(description="Accuracy over pairs with verdicts (0/1), paired bootstrap of the difference.")
    score: DiffView | None = Field(None, description="Continuous scores, when the metric gives non-binary scores.")
    transition_counts: dict[str, int]
    transitions: list[Transition] = Field(description="Changed items first (regressions first), at most `limit`.")
    transitions_truncated: bool
    fingerprint_diff: FingerprintDiff
    set_metrics: SetComparison | None = Field(
        None, description="Classification and ranking evaluations: set-level metrics of both, paired bootstrap, DeLong."
    )


MAX_BASELINE_CANDIDATES = 200
"""Earlier completed evaluations :func:`find_baseline` considers (the most recent first)."""


def item_set(ev: Evaluation) -> tuple[uuid.UUID, tuple[int, ...] | None]:
    """The items an evaluation ran: ``(benchmark version id, sample ordinals)``; the ordinals are those chosen
    for a sampled run (``config.sample_ordinals``), the first ``sample_limit`` otherwise, None for every
    sample of the version."""
    config = parse_evaluation_config(ev.config)
    if config.sample_ordinals is not None:
        return ev.benchmark_id, tuple(sorted(config.sample_ordinals))
    if ev.sample_limit is None:
        return ev.benchmark_id, None
    return ev.benchmark_id, tuple(range(ev.sample_limit))


def shared_items(a: tuple[uuid.UUID, tuple[int, ...] | None], b: tuple[uuid.UUID, tuple[int, ...] | None]) -> int | None:
    """How many samples two item sets (:func:`item_set`) share: 0 across benchmark versions (their samples
    pair only by external id), None when both ran every sample of one version (all of them)."""
    if a[0] != b[0]:
        return 0
    if a[1] is None or b[1] is None:
        return None if a[1] is None and b[1] is None else len(a[1] if a[1] is not None else b[1] or ())
    return len(set(a[1]) & set(b[1]))


def pick_baseline(ev: Evaluation, candidates: list[Evaluation]) -> tuple[Evaluation | None, str | None]:
    """The automatic baseline of ``ev`` among ``candidates`` (earlier completed runs, most recent first): the
    most recent on the same item set (same benchmark version, same samples: :func:`item_set`), reason
    ``previous_same_items``; else the one sharing the most samples with ``ev`` (the most recent of equals),
    reason ``previous``; ``(None, None)`` without candidates."""
    own = item_set(ev)
    best: tuple[int, int] | None = None
    chosen: Evaluation | None = None
    for rank, cand in enumerate(candidates):
        theirs = item_set(cand)
        if theirs == own:
            return cand, "previous_same_items"
        shared = shared_items(own, theirs)
        score = (1 << 40 if shared is None else shared, -rank)
        if best is None or score > best:
            best, chosen = score, cand
    return (chosen, "previous") if chosen is not None else (None, None)


def _same_model_and_benchmark(model_name: str | None, slug: str | None, ev: Evaluation) -> Any:
    return (
        select(Evaluation)
        .join(Model, Model.id == Evaluation.model_id)
        .join(Benchmark, Benchmark.id == Evaluation.benchmark_id)
        .where(
            Model.name == model_name,
            Benchmark.slug == slug,
            Evaluation.tenant_id == ev.tenant_id,  # a baseline is always the same tenant's
            Evaluation.id != ev.id,
            Evaluation.status == "completed",
        )
    )


async def find_baseline(session: AsyncSession, ev: Evaluation) -> tuple[Evaluation | None, str | None]:
    """The baseline of ``ev``: the same tenant's pinned evaluation of the same model name and benchmark slug,
    else, among the :data:`MAX_BASELINE_CANDIDATES` last completed ones created before ``ev``, the one
    :func:`pick_baseline` picks (the same item set first). Returns ``(evaluation, "pinned" |
    "previous_same_items" | "previous")`` or ``(None, None)`` (:func:`no_baseline_reason` says why)."""
    model_name = await session.scalar(select(Model.name).where(Model.id == ev.model_id))
    slug = await session.scalar(select(Benchmark.slug).where(Benchmark.id == ev.benchmark_id))
    same = _same_model_and_benchmark(model_name, slug, ev)
    pinned = await session.scalar(same.where(Evaluation.pinned.is_(True)).order_by(Evaluation.created_at.desc()).limit(1))
    if pinned is not None:
        return pinned, "pinned"
    earlier = (
        await session.scalars(
            same.where(Evaluation.created_at < ev.created_at)
            .order_by(Evaluation.completed_at.desc().nulls_last(), Evaluation.created_at.desc())
            .limit(MAX_BASELINE_CANDIDATES)
        )
    ).all()
    return pick_baseline(ev, list(earlier))


async def no_baseline_reason(session: AsyncSession, ev: Evaluation) -> str:
    """Why :func:`find_baseline` found no baseline of ``ev``, truthfully: no other completed evaluation of
    its model and benchmark at all, or none created before it while ``n`` later ones exist (the latest
    named, to pass as the baseline)."""
    model_name = await session.scalar(select(Model.name).where(Model.id == ev.model_id))
    slug = await session.scalar(select(Benchmark.slug).where(Benchmark.id == ev.benchmark_id))
    same = _same_model_and_benchmark(model_name, slug, ev).where(Evaluation.created_at >= ev.created_at)
    later = int(await session.scalar(select(func.count()).select_from(same.subquery())) or 0)
    if not later:
        return f"no baseline: no other completed evaluation of {model_name} on {slug}"
    latest = await session.scalar(same.with_only_columns(Evaluation.id).order_by(Evaluation.created_at.desc()).limit(1))
    return (
        f"no baseline: no completed evaluation of {model_name} on {slug} was created before this one (the automatic "
        f"baseline is an earlier run); {later} completed evaluation{'' if later == 1 else 's'} of it {'was' if later == 1 else 'were'} "
        f"created later, the latest {latest}: pass one as the baseline"
    )


class NotComparableError(ValueError):
    """Two evaluations whose items cannot be paired: they ran different benchmarks (different slugs).
    ``reason`` is the machine-readable kind (``other_benchmark``)."""

    def __init__(self, message: str, reason: str = "other_benchmark") -> None:
        super().__init__(message)
        self.reason = reason


async def check_comparable(session: AsyncSession, cur_ev: Evaluation, base_ev: Evaluation) -> None:
    """Refuse a pairing of evaluations of two different benchmarks. Versions of one benchmark (one slug) are
    comparable — :func:`compare` pairs them by external id (ordinal when absent) and repeat, the items the
    versions share — but two slugs share no items: the same external id or ordinal names unrelated samples.

    Raises:
        NotComparableError: the benchmarks' slugs differ (the message names both).
    """
    if cur_ev.benchmark_id == base_ev.benchmark_id:
        return
    cur_slug = await session.scalar(select(Benchmark.slug).where(Benchmark.id == cur_ev.benchmark_id))
    base_slug = await session.scalar(select(Benchmark.slug).where(Benchmark.id == base_ev.benchmark_id))
    if cur_slug != base_slug:
        raise NotComparableError(
            f"evaluation {base_ev.id} ran benchmark {base_slug!r}, evaluation {cur_ev.id} ran {cur_slug!r}: evaluations "
            "of different benchmarks share no items to pair (versions of one benchmark can be compared)"
        )


def group_order(ev: Evaluation) -> tuple[int, str, str]:
    """Sort key of an evaluation in its batch or experiment: its position in the creating request
    (``config.group_index``; rows created before it was recorded come after, by arm name), then arm, then id."""
    index = parse_evaluation_config(ev.config).group_index
    return (index if index is not None else 1 << 30, ev.arm, str(ev.id))


async def group_evaluations(session: AsyncSession, ev: Evaluation) -> list[Evaluation]:
    """Every evaluation of ``ev``'s A/B experiment (``experiment_id``) or batch (``batch_id``), ``ev`` included,
    of ``ev``'s tenant, in request order (:func:`group_order`: the first is the group's baseline, e.g. the
    experiment's first arm). ``[ev]`` when ``ev`` belongs to no group. A report offers the others as baselines:
    ``compare(session, ev.id, other.id, "first_arm" | "requested")``."""
    col = Evaluation.experiment_id if ev.experiment_id else Evaluation.batch_id if ev.batch_id else None
    if col is None:
        return [ev]
    rows = await session.scalars(
        select(Evaluation).where(col == (ev.experiment_id or ev.batch_id), Evaluation.tenant_id == ev.tenant_id)
    )
    return sorted(rows.all(), key=group_order)


def _pairs_sql(by_sample: bool) -> str:
    """CTE ``p``: one row per paired item (full outer join of the two evaluations' results) with its kind."""
    if by_sample:
        side = (
            "SELECT r.sample_id, r.repeat, r.is_correct, r.score, r.error, r.extracted "
            "FROM sample_results r WHERE r.evaluation_id = :{}"
        )
        on = "b.sample_id = c.sample_id AND b.repeat = c.repeat"
    else:  # across benchmark versions: pair by external id (ordinal when absent) and repeat
        side = (
            "SELECT r.sample_id, r.repeat, r.is_correct, r.score, r.error, r.extracted, "
            "coalesce(s.external_id, '#' || s.ordinal) AS k FROM sample_results r JOIN samples s ON s.id = r.sample_id "
            "WHERE r.evaluation_id = :{}"
        )
        on = "b.k = c.k AND b.repeat = c.repeat"
    return f"""
WITH c AS ({side.format("cur")}), b AS ({side.format("base")}), p AS (
    SELECT coalesce(c.sample_id, b.sample_id) AS sample_id, coalesce(c.repeat, b.repeat) AS repeat,
           c.sample_id IS NOT NULL AS in_c, b.sample_id IS NOT NULL AS in_b,
           c.is_correct AS c_ok, c.score AS c_score, c.error AS c_err, c.extracted AS c_ext,
           b.is_correct AS b_ok, b.score AS b_score, b.error AS b_err, b.extracted AS b_ext,
           CASE WHEN b.sample_id IS NULL THEN 'only_in_current' WHEN c.sample_id IS NULL THEN 'only_in_baseline'
                WHEN b.is_correct IS NULL AND c.is_correct IS NULL THEN 'still_erroring'
                WHEN b.is_correct IS NULL THEN 'error_fixed' WHEN c.is_correct IS NULL THEN 'newly_errored'
                WHEN b.is_correct AND NOT c.is_correct THEN 'regression' WHEN c.is_correct AND NOT b.is_correct THEN 'improvement'
                WHEN c.is_correct THEN 'still_passing' ELSE 'still_failing' END AS kind
    FROM c FULL JOIN b ON {on}
)
"""


def _err(e: dict[str, Any] | None) -> str | None:
    return None if e is None else f"{e.get('stage')}/{e.get('type')}"


def _outcome(ok: bool | None, score: float | None, err: dict[str, Any] | None, ext: str | None) -> ItemOutcome | None:
    return ItemOutcome(is_correct=ok, score=score, error=_err(err), extracted=ext)


def _diff_view(cur: np.ndarray[Any, Any], base: np.ndarray[Any, Any]) -> DiffView:
    if cur.size == 0:
        return DiffView(n=0, baseline_mean=None, current_mean=None, difference=None, ci_low=None, ci_high=None, method=None)
    diff, ci = paired_bootstrap_diff(cur, base)
    return DiffView(
        n=int(cur.size),
        baseline_mean=float(base.mean()),
        current_mean=float(cur.mean()),
        difference=diff,
        ci_low=ci.low if ci else None,
        ci_high=ci.high if ci else None,
        method=ci.method if ci else "undefined: fewer than 2 pairs",
    )


async def compare(
    session: AsyncSession,
    current_id: uuid.UUID,
    baseline_id: uuid.UUID,
    baseline_reason: str = "requested",
    limit: int = 1000,
    include_unchanged: bool = False,
) -> Comparison:
    """Compare two evaluations item by item (see the module docstring).

    Args:
        session: a session on the uep database.
        current_id: the evaluation compared.
        baseline_id: the evaluation it is compared with.
        baseline_reason: why that baseline (``pinned``, ``previous``, ``requested``), written into the result.
        limit: most transitions listed (counts always cover every item).
        include_unchanged: also list still_passing / still_failing / still_erroring items.

    Raises:
        LookupError: an unknown evaluation id.
        NotComparableError: the evaluations ran different benchmarks (:func:`check_comparable`).
    """
    cur_ev = await session.get(Evaluation, current_id)
    base_ev = await session.get(Evaluation, baseline_id)
    if cur_ev is None or base_ev is None:
        raise LookupError(f"unknown evaluation {current_id if cur_ev is None else baseline_id}")
    await check_comparable(session, cur_ev, base_ev)
    by_sample = cur_ev.benchmark_id == base_ev.benchmark_id
    cte = _pairs_sql(by_sample)
    params = {"cur": current_id, "base": baseline_id}
    counts = dict.fromkeys(TRANSITION_ORDER, 0)
    n_cur = n_base = n_paired = 0
    graded = False
    for kind, n, nc, nb, npaired, g in (
        await session.execute(
            text(
                cte
                + "SELECT kind, count(*), count(*) FILTER (WHERE in_c), count(*) FILTER (WHERE in_b), count(*) FILTER (WHERE in_c AND in_b), "
                "bool_or(c_score NOT IN (0, 1) OR b_score NOT IN (0, 1)) FROM p GROUP BY kind"
            ),
            params,
        )
    ).all():
        counts[kind] = n
        n_cur, n_base, n_paired = n_cur + nc, n_base + nb, n_paired + npaired
        graded = graded or bool(g)
    table = {
        "both_correct": counts["still_passing"],
        "baseline_only_correct": counts["regression"],
        "current_only_correct": counts["improvement"],
        "both_wrong": counts["still_failing"],
    }
    shown = list(TRANSITION_ORDER) if include_unchanged else [k for k in TRANSITION_ORDER if not k.startswith("still_")]
    order_sql = "CASE kind " + " ".join(f"WHEN '{k}' THEN {i}" for i, k in enumerate(TRANSITION_ORDER)) + " END"
    rows = (
        await session.execute(
            text(
                cte
                + f"SELECT kind, p.sample_id, s.ordinal, s.external_id, repeat, b_ok, b_score, b_err, b_ext, c_ok, c_score, c_err, c_ext "
                f"FROM p JOIN samples s ON s.id = p.sample_id WHERE kind = ANY(:kinds) ORDER BY {order_sql}, s.ordinal, repeat LIMIT :limit"
            ),
            params | {"kinds": shown, "limit": limit + 1},
        )
    ).all()
    transitions = [
        Transition(
            kind=r[0],
            sample_id=r[1],
            ordinal=r[2],
            external_id=r[3],
            repeat=r[4],
            baseline=None if r[0] == "only_in_current" else _outcome(*r[5:9]),
            current=None if r[0] == "only_in_baseline" else _outcome(*r[9:13]),
        )
        for r in rows[:limit]
    ]
    both, b_only, c_only, neither = (
        table[k] for k in ("both_correct", "baseline_only_correct", "current_only_correct", "both_wrong")
    )
    n_verdicts = both + b_only + c_only + neither
    mc = mcnemar_exact(b_only, c_only)
    if n_verdicts:
        diff, ci = paired_bootstrap_binary(both, c_only, b_only, neither)  # current − baseline
        accuracy = DiffView(
            n=n_verdicts,
            baseline_mean=(both + b_only) / n_verdicts,
            current_mean=(both + c_only) / n_verdicts,
            difference=diff,
            ci_low=ci.low if ci else None,
            ci_high=ci.high if ci else None,
            method=ci.method if ci else "undefined: fewer than 2 pairs",
        )
    else:
        accuracy = DiffView(n=0, baseline_mean=None, current_mean=None, difference=None, ci_low=None, ci_high=None, method=None)
    score_view = None
    if graded:
        c_arr, b_arr = (
            await session.execute(
                text(
                    cte
                    + "SELECT array_agg(c_score ORDER BY sample_id, repeat), array_agg(b_score ORDER BY sample_id, repeat) FROM p "
                    "WHERE c_score IS NOT NULL AND b_score IS NOT NULL"
                ),
                params,
            )
        ).one()
        # array_agg over no rows is NULL: no item has a score on both sides
        score_view = _diff_view(np.asarray(c_arr or [], dtype=float), np.asarray(b_arr or [], dtype=float))
    return Comparison(
        current_evaluation_id=current_id,
        baseline_evaluation_id=baseline_id,
        baseline_reason=baseline_reason,
        paired_by="sample" if by_sample else "external_id",
        n_current=n_cur,
        n_baseline=n_base,
        n_paired=n_paired,
        n_paired_with_verdicts=n_verdicts,
        table=table,
        mcnemar=McNemarView(b=mc.b, c=mc.c, p_value=mc.p_value, significant=mc.significant(), method=mc.method),
        accuracy=accuracy,
        score=score_view,
        transition_counts=counts,
        transitions=transitions,
        transitions_truncated=len(rows) > limit,
        fingerprint_diff=diff_fingerprints(await fingerprint(session, baseline_id), await fingerprint(session, current_id)),
        set_metrics=await set_comparison(session, cur_ev, base_ev) if by_sample else None,
    )


def _diffs(
    names: list[str],
    cur: dict[str, Any],
    base: dict[str, Any],
    reps_c: dict[str, np.ndarray[Any, Any]],
    reps_b: dict[str, np.ndarray[Any, Any]],
    confidence: float,
) -> list[SetMetricDiff]:
    out = []
    for name in names:
        c, b = cur.get(name), base.get(name)
        diff = None if c is None or b is None else float(c - b)
        ci = percentile_interval(reps_c[name] - reps_b[name], confidence) if diff is not None and name in reps_c else None
        out.append(
            SetMetricDiff(
                name=name, current=c, baseline=b, difference=diff, ci_low=ci[0] if ci else None, ci_high=ci[1] if ci else None
            )
        )
    return out


def _paired(keys_c: list[Any], keys_b: list[Any]) -> tuple[list[int], list[int]]:
    at_b = {k: i for i, k in enumerate(keys_b)}
    cur = [i for i, k in enumerate(keys_c) if k in at_b]
    return cur, [at_b[keys_c[i]] for i in cur]


def classification_comparison(
    gold: list[str],
    predicted_c: list[str | None],
    predicted_b: list[str | None],
    probabilities_c: list[Any] | None,
    probabilities_b: list[Any] | None,
    class_names: list[str] | None = None,
    confidence: float = 0.95,
    positive_class: str | None = None,
) -> SetComparison:
    """Set-level classification metrics of two models on the same items (``gold[i]`` is item i's gold label,
    ``predicted_*[i]`` each model's label, ``probabilities_*[i]`` its class probabilities or None): each
    headline metric of both, the paired bootstrap interval of the difference (current − baseline), and
    DeLong's test of each ROC-AUC when both sides have probabilities (see the module docstring); two classes:
    ``positive_class`` is the positive one (default the second).

    Raises:
        ValueError: no item, or lists of different lengths.
    """
    names = class_names or sorted(set(gold))
    items_c = classification_items(gold, predicted_c, probabilities_c, names, positive_class)
    items_b = classification_items(gold, predicted_b, probabilities_b, names, positive_class)
    k = len(items_c.labels)
    both_proba = items_c.proba is not None and items_b.proba is not None
    curves = (1 if k == 2 else k if k <= MAX_BOOTSTRAP_CURVES else 0) if both_proba else 0
    resamples = set_resamples(items_c.n, 2 * (1 + curves))
    reps_c = classification_replicates(items_c, resamples)
    reps_b = classification_replicates(items_b, resamples)
    values_c, values_b = classification_values(items_c), classification_values(items_b)
    shown = list(CLASSIFICATION_HEADLINE) + (list(PROBABILITY_HEADLINE) if both_proba else [])
    delong: list[DeLongView] = []
    if both_proba:
        assert items_c.proba is not None and items_b.proba is not None
        for c in items_c.targets if curves else []:
            positive = items_c.y_true == c
            if not positive.any() or positive.all():
                continue
            r = delong_test(positive, items_c.proba[:, c], items_b.proba[:, c], confidence)
            delong.append(
                DeLongView(
                    label=items_c.labels[c],
                    auc_current=r.auc_a,
                    auc_baseline=r.auc_b,
                    difference=r.difference,
                    se=r.se,
                    z=r.z,
                    p_value=r.p_value,
                    ci_low=r.ci_low,
                    ci_high=r.ci_high,
                    significant=r.p_value < 0.05,
                    method=r.method,
                )
            )
    note = "" if both_proba else "ROC-AUC, PR-AUC and calibration need probabilities on both sides"
    return SetComparison(
        kind="classification",
        n_paired=items_c.n,
        confidence=confidence,
        method="paired " + method_text(resamples, confidence) + ": both sides on the same resamples",
        metrics=_diffs(shown, values_c, values_b, reps_c, reps_b, confidence),
        delong=delong,
        note=note,
    )


def ranking_comparison(
    values_c: dict[str, np.ndarray[Any, Any]], values_b: dict[str, np.ndarray[Any, Any]], confidence: float = 0.95
) -> SetComparison:
    """Set-level ranking metrics (means of the per-query values both sides have, e.g. ``ndcg@10``, ``rr``) of
    two rankers on the same queries (row i of both = query i), with the paired bootstrap of each difference."""
    keys = [k for k in values_c if k in values_b]
    n = len(values_c[keys[0]]) if keys else 0
    if n == 0:
        return SetComparison(
            kind="ranking", n_paired=0, method="no paired query", metrics=[], note="no query evaluated on both sides"
        )
    resamples = set_resamples(n, 2)
    reps_c = ranking_replicates({k: values_c[k] for k in keys}, resamples)
    reps_b = ranking_replicates({k: values_b[k] for k in keys}, resamples)
    cur = {headline_name(k): float(np.mean(values_c[k])) for k in keys}
    base = {headline_name(k): float(np.mean(values_b[k])) for k in keys}
    reps_cn = {headline_name(k): v for k, v in reps_c.items()}
    reps_bn = {headline_name(k): v for k, v in reps_b.items()}
    return SetComparison(
        kind="ranking",
        n_paired=n,
        confidence=confidence,
        method="paired " + method_text(resamples, confidence) + ": both sides on the same resamples",
        metrics=_diffs(list(cur), cur, base, reps_cn, reps_bn, confidence),
    )


async def set_comparison(session: AsyncSession, cur_ev: Evaluation, base_ev: Evaluation) -> SetComparison | None:
    """Set-level comparison of two evaluations of the same benchmark version (see the module docstring): None
    unless both are classification or both ranking evaluations with a paired item. The bootstrap runs in a
    worker thread."""
    kinds = {SET_KIND_OF_METRIC.get(str((ev.summary or {}).get("metric_name") or "")) for ev in (cur_ev, base_ev)}
    if len(kinds) != 1 or None in kinds:
        return None
    if kinds == {"classification"}:
        config = await benchmark_config_of(session, cur_ev.id)
        c = await load_classification(session, cur_ev.id, config.class_names)
        b = await load_classification(session, base_ev.id, config.class_names)
        ic, ib = _paired(c.keys, b.keys)
        if not ic:
            return None
        return await asyncio.to_thread(
            classification_comparison,
            [c.gold[i] for i in ic],
            [c.predicted[i] for i in ic],
            [b.predicted[i] for i in ib],
            [c.probabilities[i] for i in ic],
            [b.probabilities[i] for i in ib],
            list(config.class_names) if config.class_names else (c.items.labels if c.items is not None else None),
            0.95,
            config.positive_class,
        )
    rc, rb = await load_ranking(session, cur_ev.id), await load_ranking(session, base_ev.id)
    ic, ib = _paired(rc.keys, rb.keys)
    if not ic:
        return None
    return await asyncio.to_thread(
        ranking_comparison, {k: v[ic] for k, v in rc.values.items()}, {k: v[ib] for k, v in rb.values.items()}
    )


def evaluation_time(ev: Evaluation) -> datetime:
    """When an evaluation finished (``completed_at``), else when it was created."""
    return ev.completed_at or ev.created_at
