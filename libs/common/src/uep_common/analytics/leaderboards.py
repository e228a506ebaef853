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
    ``total_items / repeats``) — keyed ``"<benchmark version>:<samples>"`` (:func:`item_set_key`). Scores on
    different item sets are not comparable (an 8-item smoke run's 100 % says nothing against a 30-item run's
    60 %, and two versions of a benchmark are two tests), so a board ranks ONE item set at a time: each model
    version's entry is its latest evaluation on that item set, tie groups and ranks are computed among the
    entries of that item set only (:func:`rank_entries` ranks each item set separately, so no tie group ever
    spans two), and the other item sets of the board are listed beside it to be picked (``item_set``). The
    default item set (:func:`item_set_order`) is the one with the most entries, then the most samples, then
    the most recently evaluated. This rule was chosen over mixing item sets on one list with marks: a rank is
    a claim that one score beats another, which only holds on the same questions; repeats do not change the
    item set (the same questions, a tighter interval).

A/B arms
    An arm of an A/B experiment (``evaluations.experiment_id`` set) is an experiment, not a release: its score
    is recorded but it enters no board unless it was created as a release run (``release: true`` on the arm,
    stored as ``evaluations.config["release"]``; :func:`on_board`). Batches (one evaluation per model) are
    ordinary runs and enter boards.

Tie groups (:func:`rank_entries`, within one item set)
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
    :func:`board_history` lists snapshots with each model's rank change against the previous snapshot.

Scope (:class:`BoardScope`)
    Every score and snapshot belongs to the tenant of its evaluation. The readers take a scope: only one
    tenant's entries (the board is then ranked over those alone, and history snapshots are cut down to them
    and ranked again), and/or only boards of benchmarks one tenant may read. The default scope is the whole
    site (the services' view).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, and_, exists, func, or_, select, text, true
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.analytics import stats
from uep_common.contract.configs import (
    LOWER_IS_BETTER,
    EvaluationConfig,
    EvaluationType,
    is_set_metric,
    parse_evaluation_config,
)
from uep_common.registry.model_registry import visible_models
from uep_common.tables.leaderboards import LeaderboardScore, LeaderboardSnapshot
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


# ---------------------------------------------------------------- ranking (pure)


@dataclass(frozen=True)
class BoardEntry:
    """One model version on a board. Scores and bounds in the metric's unit; times timezone-aware UTC."""

    model: str
    model_version: str
    evaluation_id: uuid.UUID
    score: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    method: str
    evaluations: int
    last_evaluated: datetime
    benchmark_version: str
    method_detail: str = ""
    position: int | None = None
    rank: int | None = None
    tie_group: int | None = None
    tenant_id: uuid.UUID | None = None
    samples: int | None = None
    item_set: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (ids and times as strings; without ``tenant_id``)."""
        d = asdict(self)
        del d["tenant_id"]
        d["evaluation_id"] = str(self.evaluation_id)
        d["last_evaluated"] = self.last_evaluated.isoformat()
        return d


def _rankable(e: BoardEntry) -> bool:
    return e.score is not None and e.ci_low is not None and e.ci_high is not None and not math.isnan(e.score)


def _rank_key(e: BoardEntry) -> tuple[float, float, str, str]:
    assert e.score is not None and e.ci_low is not None  # only called on rankable entries
    return (-e.score, -e.ci_low, e.model, e.model_version)


def _flipped(e: BoardEntry) -> BoardEntry:
    """``e`` with its score and interval negated: a lower-is-better board ranked by the higher-is-better rule."""
    return replace(e, score=_neg(e.score), ci_low=_neg(e.ci_high), ci_high=_neg(e.ci_low))


def _neg(v: float | None) -> float | None:
    return None if v is None else -v


def item_set_key(benchmark_version: str, samples: int | None, sampling: str | None = None, seed: int | None = None) -> str:
    """The key of an item set: ``"<benchmark version>:<samples>"`` (the first ``samples`` samples of that
    version; see the module docstring), ``"<version>:<samples>:<sampling>:<seed>"`` for a ``random`` or
    ``stratified`` choice of samples (:mod:`uep_common.records.sampling`: the same method and seed choose the same
    samples)."""
    if samples is None:
        return benchmark_version
    return f"{benchmark_version}:{samples}" + (f":{sampling}:{seed or 0}" if sampling not in (None, "first") else "")


def item_set_order(entries: Sequence[BoardEntry]) -> list[str]:
    """The item sets of ``entries`` in board order: most entries first, then most samples, then the most
    recently evaluated, then by key. The first is a board's default item set."""
    count: dict[str, int] = {}
    samples: dict[str, int] = {}
    latest: dict[str, float] = {}
    for e in entries:
        count[e.item_set] = count.get(e.item_set, 0) + 1
        samples[e.item_set] = max(samples.get(e.item_set, -1), e.samples if e.samples is not None else -1)
        latest[e.item_set] = max(latest.get(e.item_set, -math.inf), e.last_evaluated.timestamp())
    return sorted(count, key=lambda k: (-count[k], -samples[k], -latest[k], k))


def rank_entries(entries: Sequence[BoardEntry], lower_is_better: bool = False) -> list[BoardEntry]:
    """Rank each item set of ``entries`` on its own (see the module docstring: no tie group spans two item
    sets) and return them item set after item set in :func:`item_set_order`. Within an item set, order the
    entries and assign ``position``, ``tie_group`` and ``rank`` by the tie-group rule (mirrored when
    ``lower_is_better``: the lowest score first); unrankable ones come last with rank/tie_group None.
    Returns new entries."""
    if lower_is_better:
        return [_flipped(e) for e in rank_entries([_flipped(e) for e in entries])]
    by_set: dict[str, list[BoardEntry]] = {}
    for e in entries:
        by_set.setdefault(e.item_set, []).append(e)
    return [r for key in item_set_order(entries) for r in _rank_item_set(by_set[key])]


def _rank_item_set(entries: Sequence[BoardEntry]) -> list[BoardEntry]:
    """The tie-group rule over the entries of one item set."""
    ranked = sorted((e for e in entries if _rankable(e)), key=_rank_key)
    rest = sorted(
        (e for e in entries if not _rankable(e)),
        key=lambda e: (e.score is None, -(e.score or 0.0), e.model, e.model_version),
    )
    out: list[BoardEntry] = []
    group, leader, group_rank = 0, None, 1
    for i, e in enumerate(ranked):
        assert e.ci_high is not None  # ranked entries are rankable
        if leader is None or (leader.ci_low is not None and e.ci_high < leader.ci_low):
            group, leader, group_rank = group + 1, e, i + 1
        out.append(replace(e, position=i + 1, rank=group_rank, tie_group=group))
    out += [replace(e, position=len(ranked) + j + 1, rank=None, tie_group=None) for j, e in enumerate(rest)]
    return out


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
        """WHERE clauses on ``model`` (:class:`LeaderboardScore` or :class:`LeaderboardSnapshot`: both have
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
    :func:`item_set_order`; see the module docstring). ``benchmark_version`` restricts it to evaluations of
    that benchmark version, ``item_set`` to one item set (:func:`item_set_key`). ``per_tenant`` makes each
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


class _Scored:
    """A leaderboard_scores row seen with another score (a set-level metric of its evaluation's summary)."""

    def __init__(self, row: LeaderboardScore, values: Mapping[str, Any], method: str, method_detail: str) -> None:
        self._row, self._values = row, values
        self.method, self.method_detail = method, method_detail

    def __getattr__(self, name: str) -> Any:
        if name in self._values:
            return self._values[name]
        return getattr(self._row, name)


def _snapshot_entry(e: BoardEntry) -> dict[str, Any]:
    return {
        "model": e.model,
        "model_version": e.model_version,
        "position": e.position,
        "rank": e.rank,
        "tie_group": e.tie_group,
        "score": e.score,
        "ci_low": e.ci_low,
        "ci_high": e.ci_high,
        "n": e.n,
        "evaluation_id": str(e.evaluation_id),
        "tenant_id": str(e.tenant_id) if e.tenant_id else None,
        "last_evaluated": e.last_evaluated.isoformat(),
        "item_set": e.item_set,
        "samples": e.samples,
    }


async def _lock_board(session: AsyncSession, benchmark_slug: str, score_type: str) -> None:
    """Serialise writers of one board (transaction-scoped advisory lock), so concurrent reporters write
    snapshots one after the other, each ranking the board with the other's score in it."""
    await session.execute(
        text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": f"uep.leaderboard:{benchmark_slug}:{score_type}"}
    )


async def record_evaluation(session: AsyncSession, evaluation_id: uuid.UUID) -> bool:
    """Store (or refresh, after a rescore) the leaderboard score of a completed evaluation and, when it is
    new or changed, write a snapshot of its board. Idempotent: recording an unchanged score writes nothing.

    An A/B arm that is not a release run (:func:`on_board`) has its score stored (so the reconciler does
    not pick it up again) but enters no board and writes no snapshot.

    Must run inside a transaction. Returns True when a snapshot was written; False for an unknown or
    not-completed evaluation, an unchanged score or an arm off the boards.
    """
    ev = await session.get(Evaluation, evaluation_id)
    if ev is None or ev.status != "completed":
        return False
    bench = await session.get(Benchmark, ev.benchmark_id)
    model = await session.get(Model, ev.model_id)
    assert model is not None and bench is not None  # foreign keys of the evaluation
    s = ev.summary or {}
    score_type = score_type_of(evaluation_type_of(ev.config, bench.evaluation_type), s.get("metric_name"), primary_of(s))
    values = await compute_score(session, ev, score_type)
    await _lock_board(session, bench.slug, score_type)
    old = await session.get(LeaderboardScore, evaluation_id, populate_existing=True)
    if old is not None and old.score_type == score_type and all(getattr(old, k) == v for k, v in values.items()):
        return False
    row = {
        "evaluation_id": ev.id,
        "benchmark_slug": bench.slug,
        "benchmark_version": bench.version,
        "score_type": score_type,
        "model_name": model.name,
        "model_version": model.version,
        "evaluated_at": ev.completed_at or ev.updated_at,
        **values,
    }
    await session.execute(
        pg_insert(LeaderboardScore)
        .values(row)
        .on_conflict_do_update(
            index_elements=[LeaderboardScore.evaluation_id],
            set_={k: v for k, v in row.items() if k != "evaluation_id"} | {"computed_at": func.now()},
        )
    )
    if ev.experiment_id is not None and not parse_evaluation_config(ev.config).release:
        return False  # an A/B arm: no board (see on_board)
    entries = await load_board(session, bench.slug, score_type, per_tenant=True)
    session.add(
        LeaderboardSnapshot(
            benchmark_slug=bench.slug,
            score_type=score_type,
            evaluation_id=ev.id,
            entries=[_snapshot_entry(e) for e in entries],
        )
    )
    await session.flush()
    return True


async def unrecorded_evaluations(session: AsyncSession, limit: int = 100) -> list[uuid.UUID]:
    """Completed evaluations without a leaderboard score (missed by a crash, or completed before
    leaderboards existed), oldest completion first."""
    rows = await session.scalars(
        select(Evaluation.id)
        .outerjoin(LeaderboardScore, LeaderboardScore.evaluation_id == Evaluation.id)
        .where(Evaluation.status == "completed", LeaderboardScore.evaluation_id.is_(None))
        .order_by(Evaluation.completed_at.nulls_first(), Evaluation.id)
        .limit(limit)
    )
    return list(rows.all())


def rank_snapshot_entries(entries: Sequence[Mapping[str, Any]], lower_is_better: bool = False) -> list[dict[str, Any]]:
    """Snapshot entries (``{model, model_version, item_set, score, ci_low, ci_high, …}``; snapshots written
    before item sets have none: one item set) ranked again among themselves by :func:`rank_entries`: new
    dicts in board order with ``position``, ``rank`` and ``tie_group`` recomputed, other keys kept."""
    by_key = {(e["model"], e["model_version"], e.get("item_set") or ""): e for e in entries}
    placeholder = datetime.fromtimestamp(0).astimezone()
    ranked = rank_entries(
        [
            BoardEntry(
                model=e["model"],
                model_version=e["model_version"],
                evaluation_id=uuid.UUID(int=0),
                score=e.get("score"),
                ci_low=e.get("ci_low"),
                ci_high=e.get("ci_high"),
                n=int(e.get("n") or 0),
                method="",
                evaluations=0,
                last_evaluated=placeholder,
                benchmark_version="",
                samples=e.get("samples"),
                item_set=e.get("item_set") or "",
            )
            for e in entries
        ],
        lower_is_better,
    )
    return [
        {**by_key[(r.model, r.model_version, r.item_set)], "position": r.position, "rank": r.rank, "tie_group": r.tie_group}
        for r in ranked
    ]


def _scoped_snapshot(
    entries: Sequence[Mapping[str, Any]],
    tenant_id: uuid.UUID | None,
    tenant_of: Mapping[str, str],
    lower_is_better: bool = False,
    visible: set[str] | None = None,
) -> list[dict[str, Any]]:
    """A stored snapshot's entries as a reader in scope sees them: only ``tenant_id``'s (None: all; an entry
    without its own ``tenant_id`` is looked up in ``tenant_of``, evaluation id → tenant id) and, with
    ``visible``, only entries of those evaluation ids; the latest per model version and item set, ranked
    again among themselves; without the ``tenant_id`` key."""
    latest: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for e in entries:
        if tenant_id is not None and (e.get("tenant_id") or tenant_of.get(str(e.get("evaluation_id")))) != str(tenant_id):
            continue
        if visible is not None and str(e.get("evaluation_id")) not in visible:
            continue
        key = (e["model"], e["model_version"], e.get("item_set") or "")
        if key not in latest or str(e.get("last_evaluated") or "") > str(latest[key].get("last_evaluated") or ""):
            latest[key] = e
    return [
        {k: v for k, v in e.items() if k != "tenant_id"} for e in rank_snapshot_entries(list(latest.values()), lower_is_better)
    ]


async def board_history(
    session: AsyncSession, benchmark_slug: str, score_type: str, limit: int = 50, scope: BoardScope = SITE_SCOPE
) -> list[dict[str, Any]]:
    """The last ``limit`` snapshots of a board in ``scope``, newest first: ``{id, created_at, evaluation_id,
    entries, changes}`` where ``changes`` lists the entries whose position, rank or tie group differs from the
    previous snapshot (``from_*`` None for an entry new on the board).

    With ``scope.tenant_id`` only the snapshots that tenant's evaluations wrote are listed, each cut down to
    that tenant's entries and ranked again among them (:func:`rank_snapshot_entries`)."""
    snap_rows = (
        await session.scalars(
            select(LeaderboardSnapshot)
            .where(
                LeaderboardSnapshot.benchmark_slug == benchmark_slug,
                LeaderboardSnapshot.score_type == score_type,
                *scope.clauses(LeaderboardSnapshot),
            )
            .order_by(LeaderboardSnapshot.id.desc())
            .limit(limit + 1)
        )
    ).all()
    snaps = list(reversed(snap_rows))
    tenant_of: dict[str, str] = {}
    if scope.tenant_id is not None:
        ls = LeaderboardScore
        rows = await session.execute(
            select(ls.evaluation_id, ls.tenant_id).where(
                ls.benchmark_slug == benchmark_slug, ls.score_type == score_type, ls.tenant_id == scope.tenant_id
            )
        )
        tenant_of = {str(e): str(t) for e, t in rows.all()}
    visible: set[str] | None = None
    if scope.tenant_id is None and scope.viewer_tenant_id is not None:  # site-wide: entries of models it may see
        ls = LeaderboardScore
        ids = await session.scalars(
            select(ls.evaluation_id).where(ls.benchmark_slug == benchmark_slug, ls.score_type == score_type, *scope.clauses(ls))
        )
        visible = {str(e) for e in ids}
    entries_of = [_scoped_snapshot(s.entries, scope.tenant_id, tenant_of, score_type in LOWER_IS_BETTER, visible) for s in snaps]
    out: list[dict[str, Any]] = []
    for i, snap in enumerate(snaps):
        if i == 0 and len(snaps) > limit:
            continue  # only the baseline of the oldest one listed
        prev = {(e["model"], e["model_version"], e.get("item_set") or ""): e for e in entries_of[i - 1]} if i else {}
        changes = []
        for e in entries_of[i]:
            p = prev.get((e["model"], e["model_version"], e.get("item_set") or ""))
            before = (p["position"], p["rank"], p["tie_group"]) if p else (None, None, None)
            if before != (e["position"], e["rank"], e["tie_group"]):
                changes.append(
                    {
                        "model": e["model"],
                        "model_version": e["model_version"],
                        "item_set": e.get("item_set") or "",
                        "from_position": before[0],
                        "to_position": e["position"],
                        "from_rank": before[1],
                        "to_rank": e["rank"],
                        "from_tie_group": before[2],
                        "to_tie_group": e["tie_group"],
                    }
                )
        out.append(
            {
                "id": snap.id,
                "created_at": snap.created_at,
                "evaluation_id": str(snap.evaluation_id) if snap.evaluation_id else None,
                "entries": entries_of[i],
                "changes": changes,
            }
        )
    return list(reversed(out))


# ---------------------------------------------------------------- comparison across benchmarks


def _pick(entries: Sequence[BoardEntry], model_ref: str) -> BoardEntry | None:
    """The entry of ``name@version``, or of the most recently evaluated version of ``name``."""
    name, _, version = model_ref.partition("@")
    found = [e for e in entries if e.model == name and (not version or e.model_version == version)]
    return max(found, key=lambda e: (e.last_evaluated, e.model_version)) if found else None


def radar_series(rows: Mapping[str, Mapping[str, float | None]], dimensions: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """Radar input ``{series: {dimension: value in [0, 1]}}`` from ``rows`` (model → dimension → score).

    A missing score is left out of its series (the radar draws a gap, never a zero); a dimension with a
    value outside [0, 1] is divided by its largest absolute value among the series (so the best is 1).
    Returns the series and the dimensions no series has a score on (not drawn).
    """
    series: dict[str, dict[str, float]] = {m: {} for m in rows}
    drawn = []
    for d in dimensions:
        vals = {m: float(v) for m in rows if (v := rows[m].get(d)) is not None}
        if not vals:
            continue
        drawn.append(d)
        scale = max(abs(v) for v in vals.values()) if any(v < 0 or v > 1 for v in vals.values()) else 1.0
        for m, v in vals.items():
            series[m][d] = max(0.0, v / scale) if scale else 0.0
    return series, [d for d in dimensions if d not in drawn]


async def compare_models(
    session: AsyncSession,
    models: Sequence[str],
    boards: Sequence[tuple[str, str]],
    radar: Callable[[Mapping[str, Mapping[str, float]], str], str] | None = None,
    scope: BoardScope = SITE_SCOPE,
) -> dict[str, Any]:
    """Scores of ``models`` (``name`` or ``name@version``) on ``boards`` ((benchmark slug, score type)) in
    ``scope``: ``{models, boards, rows: [{model, scores: {"<slug>:<type>": entry | None}}], radar_svg,
    radar_left_out}``.

    Each board contributes the entries of its default item set only (the first of :func:`item_set_order`),
    so the models compared on one board were evaluated on the same items; a model evaluated there only on
    another item set has no cell (``None``). ``radar`` renders the radar (e.g.
    ``uep_common.analytics.charts.radar_svg``); None leaves ``radar_svg`` None.
    """
    cells: dict[str, dict[str, BoardEntry | None]] = {m: {} for m in models}
    labels = [f"{slug}:{st}" for slug, st in boards]
    for (slug, st), label in zip(boards, labels, strict=True):
        entries = await load_board(session, slug, st, scope=scope)
        entries = [e for e in entries if e.item_set == entries[0].item_set]  # rank_entries: default item set first
        for m in models:
            cells[m][label] = _pick(entries, m)
    rows = {m: {label: (e.score if e else None) for label, e in cells[m].items()} for m in models}
    series, left_out = radar_series(rows, labels)
    svg = None
    if radar is not None and len(labels) > len(left_out):
        svg = radar(series, "Models compared: " + ", ".join(models))
    return {
        "models": list(models),
        "boards": [{"benchmark": slug, "score_type": st, "key": label} for (slug, st), label in zip(boards, labels, strict=True)],
        "rows": [{"model": m, "scores": {label: (e.as_dict() if e else None) for label, e in cells[m].items()}} for m in models],
        "radar_series": series,
        "radar_left_out": left_out,
        "radar_svg": svg,
    }
