"""Retention: delete the per-item details of old evaluations, keep every summary forever.

Per (benchmark slug, model name) the last ``keep_last`` evaluations by creation time are kept (default 20,
``UEP_RETENTION_KEEP_LAST`` in the reporter). Also kept, whatever their age:
- every pinned baseline (``evaluations.pinned``, when that column exists),
- every evaluation not in a terminal status (pending, running, interrupted…: never touched while it can
  still change),
- every evaluation with a pending rescore, and the source of an unfinished human evaluation
  (``config["source_evaluation_id"]``),
- every arm of an A/B experiment (``evaluations.experiment_id``, when that column exists) any of whose
  arms is kept for any of the reasons above (the pair stays comparable item by item).

Cleaning an evaluation deletes, in one transaction with the evaluation row locked: its ``score_history``,
``sample_leases`` and ``sample_results`` rows and its ``artifact_refs``; an ``artifacts`` row (and, after
the commit, its file) only when no ``artifact_refs`` row references it any more. Its summary, its
leaderboard score (computed first if missing) and the row itself stay; ``details_cleaned_at`` is set.

Several replicas: a run holds the session advisory lock :data:`LOCK_KEY` (``pg_try_advisory_lock``; a
replica that does not get it skips), and each evaluation is locked ``FOR UPDATE SKIP LOCKED`` and its
state checked again before anything is deleted, so a concurrent status change or pin wins.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from uep_common.analytics import board_history
from uep_common.records.lifecycle import TERMINAL
from uep_common.runtime.artifacts import ArtifactStore

log = logging.getLogger(__name__)

LOCK_KEY = "uep.retention"
_TERMINAL_SQL = ", ".join(f"'{s}'" for s in TERMINAL)


@dataclass
class Decision:
    """What retention does with one evaluation: ``keep`` with the reasons, or clean it."""

    evaluation_id: uuid.UUID
    benchmark: str
    model: str
    status: str
    created_at: datetime
    recency: int
    """1 = newest evaluation of its (benchmark, model)."""
    experiment_id: uuid.UUID | None
    cleaned_at: datetime | None
    reasons: list[str] = field(default_factory=list)

    @property
    def keep(self) -> bool:
        """Whether the evaluation is kept: it is when any reason keeps it."""
        return bool(self.reasons)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        return {
            "evaluation_id": str(self.evaluation_id),
            "benchmark": self.benchmark,
            "model": self.model,
            "status": self.status,
            "created_at": self.created_at.isoformat(),
            "recency": self.recency,
            "reasons": list(self.reasons),
        }


async def _columns(session: AsyncSession, table: str) -> set[str]:
    rows = await session.execute(
        text("SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = :t"),
        {"t": table},
    )
    return {r[0] for r in rows}


async def _has_table(session: AsyncSession, table: str) -> bool:
    return bool(await session.scalar(text("SELECT to_regclass(:t) IS NOT NULL"), {"t": table}))


async def plan(session: AsyncSession, keep_last: int) -> list[Decision]:
    """Decide for every evaluation whether it is kept (with reasons) or cleaned (no reason).

    Reasons: ``last_n``, ``pinned``, ``not_finished``, ``rescore_pending``, ``source_of_open_evaluation``,
    ``ab_partner``; evaluations already cleaned get ``already_cleaned``. Raises ValueError for keep_last < 1.
    """
    if keep_last < 1:
        raise ValueError(f"keep_last must be at least 1, got {keep_last}")
    cols = await _columns(session, "evaluations")
    pinned = "e.pinned" if "pinned" in cols else "false"
    experiment = "e.experiment_id" if "experiment_id" in cols else "NULL::uuid"
    rows = (
        await session.execute(
            text(f"""
            SELECT e.id, b.slug, m.name, e.status, e.created_at, e.details_cleaned_at, {pinned} AS pinned,
                   {experiment} AS experiment_id,
                   row_number() OVER (PARTITION BY b.slug, m.name ORDER BY e.created_at DESC, e.id DESC) AS recency,
                   EXISTS (SELECT 1 FROM rescores r WHERE r.evaluation_id = e.id AND r.status = 'pending') AS rescoring
            FROM evaluations e JOIN benchmarks b ON b.id = e.benchmark_id JOIN models m ON m.id = e.model_id
            ORDER BY b.slug, m.name, recency""")
        )
    ).all()
    sources = {
        r[0]
        for r in await session.execute(
            text(
                f"SELECT DISTINCT config->>'source_evaluation_id' FROM evaluations "
                f"WHERE config ? 'source_evaluation_id' AND status NOT IN ({_TERMINAL_SQL})"
            )
        )
    }
    out: list[Decision] = []
    for eid, slug, model, status, created, cleaned, is_pinned, exp, recency, rescoring in rows:
        d = Decision(eid, slug, model, status, created, recency, exp, cleaned)
        for reason, cond in (
            ("last_n", recency <= keep_last),
            ("pinned", bool(is_pinned)),
            ("not_finished", status not in TERMINAL),
            ("rescore_pending", rescoring),
            ("source_of_open_evaluation", str(eid) in sources),
        ):
            if cond:
                d.reasons.append(reason)
        out.append(d)
    kept_experiments = {d.experiment_id for d in out if d.keep and d.experiment_id is not None}
    for d in out:
        if not d.keep and d.experiment_id in kept_experiments:
            d.reasons.append("ab_partner")
    for d in out:
        if not d.keep and d.cleaned_at is not None:
            d.reasons.append("already_cleaned")
    return out


async def clean_evaluation(session: AsyncSession, evaluation_id: uuid.UUID, with_artifacts: bool) -> dict[str, Any] | None:
    """Delete one evaluation's per-item details and unreferenced artifacts (see the module docstring).

    Must run inside a transaction. Returns ``{"rows": {table: deleted}, "files": [paths of artifacts whose
    last reference went]}``, or None when the evaluation is locked by someone else or no longer eligible
    (not terminal, already cleaned, pinned, rescore pending, an A/B partner pinned or unfinished).
    The caller deletes the files after the commit.
    """
    cols = await _columns(session, "evaluations")
    pinned = "pinned" if "pinned" in cols else "false"
    experiment = "experiment_id" if "experiment_id" in cols else "NULL::uuid"
    row = (
        await session.execute(
            text(
                f"SELECT status, details_cleaned_at, {pinned}, {experiment} FROM evaluations WHERE id = :e FOR UPDATE SKIP LOCKED"
            ),
            {"e": evaluation_id},
        )
    ).first()
    if row is None:
        return None
    status, cleaned, is_pinned, exp = row
    if status not in TERMINAL or cleaned is not None or is_pinned:
        return None
    if await session.scalar(
        text("SELECT EXISTS (SELECT 1 FROM rescores WHERE evaluation_id = :e AND status = 'pending')"), {"e": evaluation_id}
    ):
        return None
    if exp is not None and await session.scalar(
        text(
            f"SELECT EXISTS (SELECT 1 FROM evaluations WHERE experiment_id = :x AND id <> :e "
            f"AND ({pinned} OR status NOT IN ({_TERMINAL_SQL})))"
        ),
        {"x": exp, "e": evaluation_id},
    ):
        return None
    # the leaderboard score needs the items of a continuous metric: compute it first
    if status == "completed" and not await session.scalar(
        text("SELECT EXISTS (SELECT 1 FROM leaderboard_scores WHERE evaluation_id = :e)"), {"e": evaluation_id}
    ):
        await board_history.record_evaluation(session, evaluation_id)
    deleted: dict[str, int] = {}
    for table in ("score_history", "sample_leases", "sample_results"):
        res = await session.execute(text(f"DELETE FROM {table} WHERE evaluation_id = :e"), {"e": evaluation_id})
        deleted[table] = res.rowcount
    files: list[str] = []
    if with_artifacts:
        refs = (
            await session.execute(
                text("DELETE FROM artifact_refs WHERE evaluation_id = :e RETURNING artifact_id"), {"e": evaluation_id}
            )
        ).all()
        artifact_ids = sorted({r[0] for r in refs})
        deleted["artifact_refs"] = len(refs)
        deleted["artifacts"] = 0
        if artifact_ids:
            # Lock the artifacts first: a reference being inserted concurrently (FK check, KEY SHARE) either
            # committed before (and is seen by the next statement) or waits and then fails on the deleted row.
            await session.execute(
                text("SELECT id FROM artifacts WHERE id = ANY(:ids) ORDER BY id FOR UPDATE"), {"ids": artifact_ids}
            )
            gone = (
                await session.execute(
                    text(
                        "DELETE FROM artifacts a WHERE a.id = ANY(:ids) "
                        "AND NOT EXISTS (SELECT 1 FROM artifact_refs r WHERE r.artifact_id = a.id) RETURNING a.path"
                    ),
                    {"ids": artifact_ids},
                )
            ).all()
            files = [p for (p,) in gone if p]
            deleted["artifacts"] = len(gone)
    await session.execute(text("UPDATE evaluations SET details_cleaned_at = now() WHERE id = :e"), {"e": evaluation_id})
    return {"rows": deleted, "files": files}


def delete_file(path: str, root: Path | ArtifactStore | None) -> bool:
    """Remove an artifact file: through ``root`` when it is an :class:`ArtifactStore` (any backend), else as a
    file (a relative path taken under the directory ``root``); False when it was not there."""
    if isinstance(root, ArtifactStore):
        return root.delete(path)
    p = Path(path)
    if not p.is_absolute() and root is not None:
        p = root / p
    try:
        p.unlink()
        return True
    except FileNotFoundError:
        return False


async def _delete_files(sessionmaker, paths: list[str], root: Path | ArtifactStore | None) -> int:
    """Unlink the files of deleted artifact rows, after the commit; a path that a new ``artifacts`` row took
    again in the meantime (the same content written again) is left alone. Returns the files removed."""
    removed = 0
    for path in paths:
        async with sessionmaker() as session:
            if await session.scalar(text("SELECT EXISTS (SELECT 1 FROM artifacts WHERE path = :p)"), {"p": path}):
                continue
        removed += await asyncio.to_thread(delete_file, path, root)
    return removed


async def run(
    sessionmaker: async_sessionmaker[AsyncSession],
    keep_last: int,
    dry_run: bool = False,
    artifact_root: Path | ArtifactStore | None = None,
    wait_for_lock: bool = False,
    max_evaluations: int = 1000,
    benchmark: str | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """One retention run (see the module docstring).

    Args:
        sessionmaker: async session factory on the uep database.
        keep_last: evaluations kept per (benchmark slug, model name), ≥ 1.
        dry_run: only plan; nothing is deleted.
        artifact_root: the artifact store (or a directory that relative artifact paths are under).
        wait_for_lock: wait for a concurrent run instead of skipping.
        max_evaluations: at most this many evaluations are cleaned per run (the rest next run).
        benchmark: clean only evaluations of this benchmark slug (the plan still looks at every evaluation, so
            an A/B partner outside the scope still keeps its arm in scope).
        model: clean only evaluations of this model name (likewise).

    Returns:
        ``{"status": "completed" | "skipped", "keep_last", "dry_run", "considered", "kept": {reason: n},
        "already_cleaned": n, "to_clean" (dry run) | "cleaned": [decision…], "skipped": [ids], "errors":
        [{evaluation_id, error}], "deleted": {table: rows, "files": n}}`` and, in a dry run, ``"kept_evaluations"``.
    """
    engine = sessionmaker.kw["bind"]
    async with engine.connect() as lock_conn:
        lock_conn = await lock_conn.execution_options(isolation_level="AUTOCOMMIT")
        fn = "pg_advisory_lock" if wait_for_lock else "pg_try_advisory_lock"
        got = await lock_conn.scalar(text(f"SELECT {fn}(hashtext(:k))::text"), {"k": LOCK_KEY})
        if got == "false":
            return {
                "status": "skipped",
                "reason": "another retention run holds the lock",
                "keep_last": keep_last,
                "dry_run": dry_run,
            }
        try:
            return await _run_locked(sessionmaker, keep_last, dry_run, artifact_root, max_evaluations, benchmark, model)
        finally:
            await lock_conn.execute(text("SELECT pg_advisory_unlock(hashtext(:k))"), {"k": LOCK_KEY})


async def _run_locked(
    sessionmaker,
    keep_last: int,
    dry_run: bool,
    artifact_root: Path | ArtifactStore | None,
    max_evaluations: int,
    benchmark: str | None,
    model: str | None,
) -> dict[str, Any]:
    async with sessionmaker() as session:
        decisions = await plan(session, keep_last)
        with_artifacts = await _has_table(session, "artifact_refs") and await _has_table(session, "artifacts")
    decisions = [d for d in decisions if (benchmark is None or d.benchmark == benchmark) and (model is None or d.model == model)]
    kept = Counter(r for d in decisions if d.keep and d.reasons != ["already_cleaned"] for r in d.reasons)
    doomed = [d for d in decisions if not d.keep]
    result: dict[str, Any] = {
        "status": "completed",
        "keep_last": keep_last,
        "dry_run": dry_run,
        "considered": len(decisions),
        "scope": {"benchmark": benchmark, "model": model},
        "kept": dict(sorted(kept.items())),
        "already_cleaned": sum(1 for d in decisions if d.reasons == ["already_cleaned"]),
    }
    if dry_run:
        result["to_clean"] = [d.as_dict() for d in doomed]
        result["kept_evaluations"] = [d.as_dict() for d in decisions if d.keep and "already_cleaned" not in d.reasons]
        return result
    totals: Counter[str] = Counter()
    cleaned, skipped, errors = [], [], []
    for d in doomed[:max_evaluations]:
        try:
            async with sessionmaker() as session, session.begin():
                done = await clean_evaluation(session, d.evaluation_id, with_artifacts)
        except Exception as exc:
            log.warning("retention: cleaning evaluation %s failed", d.evaluation_id, exc_info=True)
            errors.append({"evaluation_id": str(d.evaluation_id), "error": f"{type(exc).__name__}: {exc}"[:500]})
            continue
        if done is None:
            skipped.append(str(d.evaluation_id))
            continue
        totals.update(done["rows"])
        totals["files"] += await _delete_files(sessionmaker, done["files"], artifact_root)
        cleaned.append(d.as_dict())
    result.update(
        cleaned=cleaned,
        skipped=skipped,
        errors=errors,
        deleted=dict(sorted(totals.items())),
        remaining=max(0, len(doomed) - max_evaluations),
    )
    log.info("retention: cleaned %d evaluations (kept %s), deleted %s", len(cleaned), result["kept"], result["deleted"])
    return result
