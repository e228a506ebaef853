"""Paired comparison of two evaluations over the same items (two runs, or two arms of an A/B experiment —
each arm is its own evaluation), and the choice of a baseline.

Items are paired by (sample, repeat) when both evaluations ran the same benchmark version, else by
(external id — or ordinal when a sample has none —, repeat), so two versions of a benchmark still pair the
items they share. Only pairs where both sides have a verdict (``is_correct`` not null) enter the 2×2 table
and the exact McNemar test (:func:`uep_common.stats.mcnemar_exact`); the accuracy difference gets a paired
bootstrap interval drawn from the 2×2 table (:func:`uep_common.stats.paired_bootstrap_binary`: resampling pairs
= multinomial draws of the cells); continuous scores (``score``) of pairs where both have one enter a paired
bootstrap of the difference of means with one index vector for both sides
(:func:`uep_common.stats.paired_bootstrap_diff`). The pairing and the transition kinds are computed in
PostgreSQL (one full outer join), so 100,000-item evaluations compare in well under a second.

Transitions per item, listed regressions first: ``regression`` (pass → fail), ``newly_errored`` (a verdict →
an error), ``improvement`` (fail → pass), ``error_fixed`` (error → a verdict), ``still_failing``,
``still_passing``, ``still_erroring``, ``only_in_current`` / ``only_in_baseline``.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import numpy as np
from pydantic import BaseModel, Field
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.configs import parse_evaluation_config
from uep_common.db.models import Benchmark, Evaluation, Model
from uep_common.fingerprint import FingerprintDiff, diff_fingerprints, fingerprint
from uep_common.stats import mcnemar_exact, paired_bootstrap_binary, paired_bootstrap_diff

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


class Comparison(BaseModel):
    """Paired comparison of ``current`` against ``baseline``."""

    current_evaluation_id: uuid.UUID
    baseline_evaluation_id: uuid.UUID
    baseline_reason: str = Field(
        description="pinned | previous | requested | first_arm (an A/B arm against its experiment's first arm) | "
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


async def find_baseline(session: AsyncSession, ev: Evaluation) -> tuple[Evaluation | None, str | None]:
    """The baseline of ``ev``: the same tenant's pinned evaluation of the same model name and benchmark slug, else the last
    completed one created before ``ev``. Returns ``(evaluation, "pinned" | "previous")`` or ``(None, None)``."""
    model_name = await session.scalar(select(Model.name).where(Model.id == ev.model_id))
    slug = await session.scalar(select(Benchmark.slug).where(Benchmark.id == ev.benchmark_id))
    same = (
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
    pinned = await session.scalar(same.where(Evaluation.pinned.is_(True)).order_by(Evaluation.created_at.desc()).limit(1))
    if pinned is not None:
        return pinned, "pinned"
    previous = await session.scalar(
        same.where(Evaluation.created_at < ev.created_at)
        .order_by(Evaluation.completed_at.desc().nulls_last(), Evaluation.created_at.desc())
        .limit(1)
    )
    return (previous, "previous") if previous is not None else (None, None)


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
        limit: most transitions listed (counts always cover every item).
        include_unchanged: also list still_passing / still_failing / still_erroring items.

    Raises:
        LookupError: an unknown evaluation id.
    """
    cur_ev = await session.get(Evaluation, current_id)
    base_ev = await session.get(Evaluation, baseline_id)
    if cur_ev is None or base_ev is None:
        raise LookupError(f"unknown evaluation {current_id if cur_ev is None else baseline_id}")
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
    )


def evaluation_time(ev: Evaluation) -> datetime:
    """When an evaluation finished (``completed_at``), else when it was created."""
    return ev.completed_at or ev.created_at
