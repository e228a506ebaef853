"""Recording an evaluation on its leaderboard, the board snapshots this writes and the rank history read
from them (see "Rank history" in :mod:`uep_common.analytics.leaderboards`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.analytics import robustness
from uep_common.analytics.board_ranking import BoardEntry, rank_entries
from uep_common.analytics.leaderboards import (
    SITE_SCOPE,
    BoardScope,
    compute_score,
    evaluation_type_of,
    load_board,
    primary_of,
    score_type_of,
)
from uep_common.contract.configs import (
    LOWER_IS_BETTER,
    parse_evaluation_config,
)
from uep_common.tables.leaderboards import LeaderboardScore, LeaderboardSnapshot
from uep_common.tables.models import Benchmark, Evaluation, Model


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

    An A/B arm that is not a release run (:func:`~uep_common.analytics.leaderboards.on_board`) has its score stored (so the reconciler does
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
    slug, version = bench.slug, bench.version
    robust = await robustness.board_score(session, ev)
    if robust is not None:  # on the source benchmark's robustness board only: its accuracy mixes perturbed items
        score_type = robustness.SCORE_TYPE
        slug, version, values = robust
    else:
        score_type = score_type_of(evaluation_type_of(ev.config, bench.evaluation_type), s.get("metric_name"), primary_of(s))
        values = await compute_score(session, ev, score_type)
    await _lock_board(session, slug, score_type)
    old = await session.get(LeaderboardScore, evaluation_id, populate_existing=True)
    if old is not None and old.score_type == score_type and all(getattr(old, k) == v for k, v in values.items()):
        return False
    row = {
        "evaluation_id": ev.id,
        "benchmark_slug": slug,
        "benchmark_version": version,
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
    entries = await load_board(session, slug, score_type, per_tenant=True)
    session.add(
        LeaderboardSnapshot(
            benchmark_slug=slug,
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
    before item sets have none: one item set) ranked again among themselves by :func:`~uep_common.analytics.board_ranking.rank_entries`: new
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
