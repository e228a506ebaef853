"""Leaderboards: per (benchmark slug, score type), one entry per model version, ranked in tie groups.

Score type
    ``judge`` for LLM-as-judge evaluations, ``human`` for human evaluations, ``hybrid`` for hybrid ones, and
    otherwise the automatic metric's name (e.g. ``gsm8k_numeric_exact_match``) — or, for a classification or
    ranking benchmark whose config names a primary set-level metric (``metrics: [{"name": "f1_macro",
    "primary": true}]``; a ranking benchmark's ``ndcg`` metric is ``ndcg@<k>``:
    :attr:`uep_common.contract.configs.BenchmarkConfig.primary_score`), that metric. The evaluation type is
    ``evaluations.config["evaluation_type"]`` when set, else ``human`` when the evaluation re-scores another
    one (``config["source_evaluation_id"]``), else the benchmark's ``evaluation_type``.

Set-level score types (``f1_macro``, ``roc_auc``, ``ndcg@10``, ``mrr``… :data:`uep_common.contract.configs.SET_METRICS`)
    Every set-level metric in an evaluation's summary (``summary.set_metrics.headline``: value and 95 % interval,
    Wilson's for a proportion of items such as accuracy or hit@k, else the bootstrap's) can rank a board of its benchmark, not only the primary one the evaluation is recorded under
    (:func:`score_types` lists them after the recorded ones; :func:`load_board` reads them from the summaries of
    the evaluations recorded on the benchmark's boards). Only the recorded (primary) score type has snapshots and
    a history. ``log_loss``, ``brier`` and ``ece`` are lower-is-better: their boards rank in increasing order
    (:data:`uep_common.contract.configs.LOWER_IS_BETTER`).

Robustness (score type ``robustness``)
    A robustness evaluation (``evaluations.config["robustness"]``) is recorded on its SOURCE benchmark's board
    of score type ``robustness`` only, never under its metric (its accuracy mixes originals and perturbed
    items): the pooled consistency rate with Wilson's interval, its item set the request's source version,
    perturbations, seed and originals (:func:`uep_common.analytics.robustness.board_score`).

Score of an evaluation (:func:`compute_score`, stored once in ``leaderboard_scores`` when it completes)
    Accuracy = correct / scored from its summary with the Wilson 95 % score interval (Wilson 1927); a
    metric without a verdict (BLEU, ROUGE, judge ratings…) gets the mean of the items' ``score`` with a
    bootstrap 95 % interval (Efron & Tibshirani 1993; :func:`uep_common.analytics.stats.bootstrap_mean`: BCa up to
    5000 items, percentile above, fixed seed, so a recomputation gives the same interval). Errored items are
    excluded, as in the summary. ``method`` is 'wilson' | 'bootstrap' | 'none'; ``method_detail`` the full text.

Entry of a model
    Each (model name, model version) is one entry: its LATEST completed evaluation on the board (by
    completion time), as lm-eval/HELM/OpenCompass users expect — a newer run of the same model version
    replaces the older one, even when the older scored higher (no best-of-k cherry-picking). The entry also
    carries how many completed evaluations that model version has on the board and when it was last evaluated.

Item sets: only entries evaluated on the same items are ranked together
    An evaluation's item set is its benchmark version (content hash of the samples and config) and the
    samples it ran — the first ``samples`` of the benchmark's order (``sample_limit``; samples =
    ``total_items / repeats``) — keyed ``"<benchmark version>:<samples>"`` (:func:`~uep_common.analytics.board_ranking.item_set_key`). Scores on
    different item sets are not comparable (an 8-item smoke run's 100 % says nothing against a 30-item run's
    60 %, and two versions of a benchmark are two tests), so a board ranks ONE item set at a time: each model
    version's entry is its latest evaluation on that item set, tie groups and ranks are computed among the
    entries of that item set only (:func:`~uep_common.analytics.board_ranking.rank_entries` ranks each item set separately, so no tie group ever
    spans two), and the other item sets of the board are listed beside it to be picked (``item_set``). The
    default item set (:func:`~uep_common.analytics.board_ranking.item_set_order`) is the one with the most entries, then the most samples, then
    the most recently evaluated. This rule was chosen over mixing item sets on one list with marks: a rank is
    a claim that one score beats another, which only holds on the same questions; repeats do not change the
    item set (the same questions, a tighter interval).

A/B arms
    An arm of an A/B experiment (``evaluations.experiment_id`` set) is an experiment, not a release: its score
    is recorded but it enters no board unless it was created as a release run (``release: true`` on the arm,
    stored as ``evaluations.config["release"]``; :func:`on_board`). Batches (one evaluation per model) are
    ordinary runs and enter boards.

Tie groups (:func:`~uep_common.analytics.board_ranking.rank_entries`, within one item set)
    Entries are ordered by score (descending; ascending for a lower-is-better score, where every rule below
    holds mirrored), then by the interval's lower bound (descending), then by model name and version. The first entry leads group 1. Walking down the list, an entry whose interval's
    UPPER bound is below the current group leader's LOWER bound starts a new group and leads it; any other
    entry joins the current group (its interval reaches the leader's, so the two are not separable at 95 %).
    ``rank`` is competition ranking over groups: 1 + the number of entries in better groups (1, 1, 3, …);
    ``position`` is the strict 1-based order for display (within the item set). Overlap is judged against the leader only: an entry
    that overlaps its predecessor but not the leader starts a new group (the rule is deterministic and needs
    no transitive closure). Entries without a score or an interval (no scored item; a mean of one item) are
    listed after the ranked ones with ``rank``/``tie_group`` None.

Rank history
    When an evaluation is recorded, the whole board is ranked again and stored in ``leaderboard_snapshots``;
    :func:`~uep_common.analytics.board_history.board_history` lists snapshots with each model's rank change against the previous snapshot.

Scope (:class:`BoardScope`)
    Every score and snapshot belongs to the tenant of its evaluation. The readers take a scope: only one
    tenant's entries (the board is then ranked over those alone, and history snapshots are cut down to them
    and ranked again), and/or only boards of benchmarks one tenant may read. The default scope is the whole
    site (the services' view).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, and_, exists, func, or_, select, true
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.analytics import stats
from uep_common.analytics.board_ranking import BoardEntry, item_set_key, rank_entries
from uep_common.contract.configs import (
    LOWER_IS_BETTER,
    EvaluationConfig,
    EvaluationType,
    is_set_metric,
    parse_evaluation_config,
)
from uep_common.registry.model_registry import visible_models
from uep_common.tables.leaderboards import LeaderboardScore
from uep_common.tables.models import Benchmark, Evaluation, Model, SampleResult


def wilson(successes: int, n: int) -> tuple[float, float] | None:
    """Wilson 95 % score interval of ``successes / n`` (None when n = 0), from :mod:`uep_common.analytics.stats`."""
    return stats.wilson_interval(successes, n)


def evaluation_type_of(config: Mapping[str, Any] | EvaluationConfig | None, benchmark_type: str) -> str:
    """The evaluation type of an evaluation (see the module docstring) from its ``evaluations.config``.

    Raises:
        pydantic.ValidationError: ``config`` does not parse (:func:`uep_common.contract.configs.parse_evaluation_config`).
    """
    cfg = parse_evaluation_config(config)
    if cfg.evaluation_type:
        return cfg.evaluation_type.value
    if cfg.source_evaluation_id:
        return EvaluationType.human.value
    return benchmark_type


def score_type_of(evaluation_type: str, metric_name: str | None, primary: str | None = None) -> str:
    """Board score type: 'judge' | 'human' | 'hybrid' | the primary set-level metric (``primary``, e.g.
    ``f1_macro``) | the automatic metric's name ('automatic' if unknown)."""
    if evaluation_type == EvaluationType.llm_judge:
        return "judge"
    if evaluation_type in (EvaluationType.human, EvaluationType.hybrid):
        return evaluation_type
    return primary or metric_name or EvaluationType.automatic.value


def set_metric_of(summary: Mapping[str, Any] | None, name: str) -> dict[str, Any] | None:
    """``{value, ci_low, ci_high, n, interval, method}`` of the set-level metric ``name`` in an evaluation's stored
    summary (``summary.set_metrics.headline``): ``interval`` is 'wilson' (a proportion of items) or 'bootstrap'
    (the value's stored method; summaries stored before it was recorded hold bootstrap intervals), ``method``
    the interval's method in words; None when it has none (or no value)."""
    sm = (summary or {}).get("set_metrics") or {}
    value = (sm.get("headline") or {}).get(name)
    if not value or value.get("value") is None:
        return None
    interval = "wilson" if value.get("method") == "wilson" else "bootstrap"
    detail = stats.WILSON if interval == "wilson" else str(sm.get("method") or "")
    return {**value, "n": int(sm.get("n") or 0), "interval": interval, "method": detail}


def primary_of(summary: Mapping[str, Any] | None) -> str | None:
    """The primary set-level metric of an evaluation's summary when its value is there, else None."""
    primary = ((summary or {}).get("set_metrics") or {}).get("primary")
    return primary if primary and set_metric_of(summary, primary) is not None else None


async def compute_score(session: AsyncSession, ev: Evaluation, score_type: str | None = None) -> dict[str, Any]:
    """``{score, ci_low, ci_high, n, method, method_detail}`` of one evaluation (see the module docstring).

    A set-level ``score_type`` (``f1_macro``, ``ndcg@10``…) takes the summary's value and interval (Wilson's for
    a proportion of items, else the bootstrap's).
    Otherwise: the summary's correct/scored when it has an accuracy; else the stored items' scores (after
    retention cleaned the details only the summary is left: ``method`` 'none', ``score`` None)."""
    s = ev.summary or {}
    if score_type is not None and is_set_metric(score_type):
        v = set_metric_of(s, score_type)
        if v is None:
            return {"score": None, "ci_low": None, "ci_high": None, "n": 0, "method": "none", "method_detail": "no score"}
        return {
            "score": v["value"],
            "ci_low": v["ci_low"],
            "ci_high": v["ci_high"],
            "n": v["n"],
            "method": v["interval"],
            "method_detail": v["method"],
        }
    if s.get("accuracy") is not None and s.get("scored"):
        k, n = int(s["correct"]), int(s["scored"])
        wci = wilson(k, n)
        assert wci is not None  # n > 0
        return {"score": k / n, "ci_low": wci[0], "ci_high": wci[1], "n": n, "method": "wilson", "method_detail": stats.WILSON}
    if ev.details_cleaned_at is None:
        values = (
            await session.scalars(
                select(SampleResult.score).where(
                    SampleResult.evaluation_id == ev.id, SampleResult.error.is_(None), SampleResult.score.is_not(None)
                )
            )
        ).all()
        if values:
            scores = [v for v in values if v is not None]  # all of them: the query filters out NULL scores
            ci = stats.bootstrap_mean(scores)
            return {
                "score": float(np.mean(scores)),
                "ci_low": ci.low if ci else None,
                "ci_high": ci.high if ci else None,
                "n": len(values),
                "method": "bootstrap",
                "method_detail": ci.method if ci else "fewer than 2 values",
            }
    return {"score": None, "ci_low": None, "ci_high": None, "n": 0, "method": "none", "method_detail": "no score"}


# ---------------------------------------------------------------- boards from the database


@dataclass(frozen=True)
class BoardScope:
    """What of the boards a reader sees: ``tenant_id`` — only that tenant's entries (None: every tenant's);
    ``viewer_tenant_id`` — only boards of benchmark slugs that tenant may read (the site catalogue, shared
    benchmarks and its own; None: every board) and, with every tenant's entries (site-wide boards), only
    entries of models that tenant may see (:func:`uep_common.registry.model_registry.visible_models`: another tenant's
    private model is no entry, nor its name)."""

    tenant_id: uuid.UUID | None = None
    viewer_tenant_id: uuid.UUID | None = None

    def clauses(self, model: Any) -> list[ColumnElement[bool]]:
        """WHERE clauses on ``model`` (:class:`LeaderboardScore` or :class:`~uep_common.tables.leaderboards.LeaderboardSnapshot`: both have
        ``tenant_id`` and ``benchmark_slug``)."""
        out: list[ColumnElement[bool]] = []
        if self.tenant_id is not None:
            out.append(model.tenant_id == self.tenant_id)
        if self.viewer_tenant_id is not None:
            out.append(
                exists().where(
                    Benchmark.slug == model.benchmark_slug,
                    or_(
                        Benchmark.owner_tenant_id.is_(None),
                        Benchmark.visibility == "shared",
                        Benchmark.owner_tenant_id == self.viewer_tenant_id,
                    ),
                )
            )
            if self.tenant_id is None and model is LeaderboardScore:
                out.append(
                    exists().where(
                        Evaluation.id == model.evaluation_id,
                        Model.id == Evaluation.model_id,
                        visible_models(self.viewer_tenant_id),
                    )
                )
        return out


SITE_SCOPE = BoardScope()
"""Every tenant's entries on every board."""


def on_board() -> ColumnElement[bool]:
    """SQL condition on :class:`Evaluation`: it counts on the boards — completed, and not an A/B arm unless
    created as a release run (``config.release``; see the module docstring)."""
    return and_(
        Evaluation.status == "completed",
        or_(Evaluation.experiment_id.is_(None), Evaluation.config["release"].as_boolean().is_(True)),
    )


async def list_boards(session: AsyncSession, scope: BoardScope = SITE_SCOPE) -> list[dict[str, Any]]:
    """Every board in ``scope``: ``{benchmark, score_type, models, evaluations, last_evaluated}`` ordered by
    benchmark, score type (only completed evaluations count)."""
    ls = LeaderboardScore
    rows = (
        await session.execute(
            select(
                ls.benchmark_slug,
                ls.score_type,
                func.count(func.distinct(func.concat(ls.model_name, "\x1f", ls.model_version))),
                func.count(),
                func.max(ls.evaluated_at),
            )
            .join(Evaluation, Evaluation.id == ls.evaluation_id)
            .where(on_board(), *scope.clauses(ls))
            .group_by(ls.benchmark_slug, ls.score_type)
            .order_by(ls.benchmark_slug, ls.score_type)
        )
    ).all()
    return [{"benchmark": b, "score_type": t, "models": m, "evaluations": n, "last_evaluated": last} for b, t, m, n, last in rows]


async def score_types(session: AsyncSession, benchmark_slug: str, scope: BoardScope = SITE_SCOPE) -> list[tuple[str, int]]:
    """``[(score type, evaluations)]`` of a benchmark's boards in ``scope``: the recorded ones, most evaluations
    first, then the set-level metrics the summaries of those evaluations carry (``f1_macro``, ``ndcg@10``…; see
    the module docstring), most evaluations first."""
    ls = LeaderboardScore
    rows = (
        await session.execute(
            select(ls.score_type, func.count())
            .join(Evaluation, Evaluation.id == ls.evaluation_id)
            .where(ls.benchmark_slug == benchmark_slug, on_board(), *scope.clauses(ls))
            .group_by(ls.score_type)
            .order_by(func.count().desc(), ls.score_type)
        )
    ).all()
    keys = func.jsonb_object_keys(Evaluation.summary["set_metrics"]["headline"]).table_valued("k").render_derived(name="keys")
    key = keys.c.k
    derived = (
        await session.execute(
            select(key, func.count())
            .select_from(ls)
            .join(Evaluation, Evaluation.id == ls.evaluation_id)
            .join(keys, true())  # a set-returning function in FROM sees the evaluation (implicitly LATERAL)
            .where(
                ls.benchmark_slug == benchmark_slug,
                on_board(),
                *scope.clauses(ls),
                func.jsonb_typeof(Evaluation.summary["set_metrics"]["headline"]) == "object",
            )
            .group_by(key)
            .order_by(func.count().desc(), key)
        )
    ).all()
    recorded = [(t, n) for t, n in rows]
    known = {t for t, _ in recorded}
    return recorded + [(str(t), n) for t, n in derived if t not in known]


class _Scored:
    """A leaderboard_scores row seen with another score (a set-level metric of its evaluation's summary)."""

    def __init__(self, row: LeaderboardScore, values: Mapping[str, Any], method: str, method_detail: str) -> None:
        self._row, self._values = row, values
        self.method, self.method_detail = method, method_detail

    def __getattr__(self, name: str) -> Any:
        if name in self._values:
            return self._values[name]
        return getattr(self._row, name)


async def load_board(
    session: AsyncSession,
    benchmark_slug: str,
    score_type: str,
    benchmark_version: str | None = None,
    scope: BoardScope = SITE_SCOPE,
    per_tenant: bool = False,
    item_set: str | None = None,
) -> list[BoardEntry]:
    """The ranked board (all entries in ``scope``, each item set ranked on its own, in
    :func:`~uep_common.analytics.board_ranking.item_set_order`; see the module docstring). ``benchmark_version`` restricts it to evaluations of
    that benchmark version, ``item_set`` to one item set (:func:`~uep_common.analytics.board_ranking.item_set_key`). ``per_tenant`` makes each
    (tenant, model version, item set) an entry — the union of every tenant's own board, as snapshots store it.

    A set-level score type (:func:`uep_common.contract.configs.is_set_metric`) ranks every evaluation recorded on the
    benchmark's boards whose summary has that metric, with the summary's value and interval."""
    ls = LeaderboardScore
    derived = is_set_metric(score_type)
    headline = Evaluation.summary["set_metrics"]["headline"]
    q = (
        select(
            ls,
            Evaluation.total_items,
            Evaluation.repeats,
            Evaluation.config["sampling"].astext,
            Evaluation.config["sampling_seed"].astext,
            Evaluation.summary if derived else Evaluation.total_items,
        )
        .join(Evaluation, Evaluation.id == ls.evaluation_id)
        .where(
            ls.benchmark_slug == benchmark_slug,
            headline[score_type]["value"].as_float().is_not(None) if derived else ls.score_type == score_type,
            on_board(),
            *scope.clauses(ls),
        )
        .order_by(ls.model_name, ls.model_version, ls.evaluated_at.desc(), ls.evaluation_id.desc())
    )
    if benchmark_version:
        q = q.where(ls.benchmark_version == benchmark_version)
    entries: list[BoardEntry] = []
    at: dict[tuple[Any, ...], int] = {}
    for row, total_items, repeats, sampling, seed, summary in (await session.execute(q)).all():
        if derived:
            v = set_metric_of(summary, score_type) or {}
            values = {"score": v.get("value"), "ci_low": v.get("ci_low"), "ci_high": v.get("ci_high"), "n": v.get("n", 0)}
            row = _Scored(row, values, str(v.get("interval") or "bootstrap"), str(v.get("method") or ""))
        samples = total_items // max(repeats, 1)  # `samples` samples (the first, unless sampled), each `repeats` times
        key_of_set = item_set_key(row.benchmark_version, samples, sampling, int(seed) if seed else None)
        if item_set is not None and key_of_set != item_set:
            continue
        key = (row.model_name, row.model_version, key_of_set, row.tenant_id if per_tenant else None)
        if key not in at:  # first row of a model version on an item set = its latest there
            at[key] = len(entries)
            entries.append(
                BoardEntry(
                    model=row.model_name,
                    model_version=row.model_version,
                    evaluation_id=row.evaluation_id,
                    score=row.score,
                    ci_low=row.ci_low,
                    ci_high=row.ci_high,
                    n=row.n,
                    method=row.method,
                    evaluations=0,
                    last_evaluated=row.evaluated_at,
                    benchmark_version=row.benchmark_version,
                    method_detail=row.method_detail,
                    tenant_id=row.tenant_id,
                    samples=samples,
                    item_set=key_of_set,
                )
            )
        i = at[key]
        entries[i] = replace(entries[i], evaluations=entries[i].evaluations + 1)
    return rank_entries(entries, lower_is_better=score_type in LOWER_IS_BETTER)
