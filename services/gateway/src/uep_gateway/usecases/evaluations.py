"""An evaluation as its tenant sees it: fetched by id only when it is the caller's tenant's
(:func:`owned_evaluation`; another tenant's is ``not_found`` with the body of an unknown one), its full view
(:func:`evaluation_view`) and its running accuracy (:func:`accuracy_so_far`)."""

from __future__ import annotations

import uuid
from typing import Any

from redis.asyncio import Redis
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.analytics.stats import wilson_interval
from uep_common.analytics.summary import headline_of
from uep_common.contract.configs import parse_evaluation_config
from uep_common.contract.events import EvaluationStatus, EvaluationSummary
from uep_common.runtime.progress import progress_key
from uep_common.tables.models import Benchmark, Evaluation, Model, SampleResult
from uep_gateway.schemas import EvaluationView, Progress
from uep_gateway.tenancy import owned


async def owned_evaluation(
    session: AsyncSession, evaluation_id: uuid.UUID, loc: tuple[str, ...] = ("path", "evaluation_id"), lock: bool = False
) -> Evaluation:
    """The evaluation ``evaluation_id`` of the caller's tenant (locked ``FOR UPDATE`` until the transaction
    ends when ``lock``). Raises ``not_found`` (``unknown_evaluation``) naming ``loc`` when there is none or it is another
    tenant's (the same body either way)."""
    return await owned(session, Evaluation, evaluation_id, loc, "evaluation", lock=lock)


async def accuracy_so_far(session: AsyncSession, evaluation_id: uuid.UUID) -> dict[str, Any]:
    """The running accuracy of an evaluation over its stored verdicts: ``correct``, ``scored`` (items with a
    true/false verdict; errors and graded items have none), ``accuracy`` = correct / scored and its 95 %
    Wilson score interval ``ci_low``/``ci_high`` (None while nothing is scored) — the rule of the final
    summary (``uep_common.analytics.summary``), applied to the results stored so far. One aggregate over the
    evaluation's ``sample_results`` rows (their ``evaluation_id`` index)."""
    correct, scored = (
        await session.execute(
            select(func.count().filter(SampleResult.is_correct.is_(True)), func.count(SampleResult.is_correct)).where(
                SampleResult.evaluation_id == evaluation_id
            )
        )
    ).one()
    ci = wilson_interval(correct, scored)
    return {
        "correct": correct,
        "scored": scored,
        "accuracy": correct / scored if scored else None,
        "ci_low": ci[0] if ci else None,
        "ci_high": ci[1] if ci else None,
    }


async def evaluation_view(session: AsyncSession, redis: Redis, evaluation_id: uuid.UUID) -> EvaluationView:
    """The caller's tenant's evaluation ``evaluation_id``: status, progress (live from Redis, the cache of
    :mod:`uep_common.runtime.progress`, once it has ended; while running, counters from PostgreSQL with the
    accuracy so far) and summary. Raises ``not_found`` naming ``path.evaluation_id`` when it is unknown or
    another tenant's."""
    ev = await owned_evaluation(session, evaluation_id)
    bench = await session.get(Benchmark, ev.benchmark_id)
    model = await session.get(Model, ev.model_id)
    # evaluations.benchmark_id and .model_id: NOT NULL foreign keys (no ON DELETE)
    assert bench is not None and model is not None
    completed, errors = ev.completed_items, ev.error_items
    so_far: dict[str, Any] = {}
    if ev.status == EvaluationStatus.running:
        so_far = await accuracy_so_far(session, ev.id)
    elif ev.summary:  # ended (or a partial summary): the summary's figures
        so_far = {k: ev.summary.get(k) for k in ("correct", "scored", "accuracy", "ci_low", "ci_high")}
        try:
            live = await redis.hgetall(progress_key(ev.id))
            if live:
                completed = max(completed, int(live.get(b"completed", 0)))
                errors = max(errors, int(live.get(b"errors", 0)))
        except Exception:  # noqa: BLE001 - Redis is a cache; fall back to PostgreSQL
            pass
    return EvaluationView(
        id=ev.id,
        status=ev.status,
        priority=ev.priority,
        benchmark={"id": str(bench.id), "slug": bench.slug, "name": bench.name, "version": bench.version},
        model={"id": str(model.id), "name": model.name, "version": model.version},
        sample_limit=ev.sample_limit,
        repeats=ev.repeats,
        max_parallel=parse_evaluation_config(ev.config).max_parallel,
        batch_id=ev.batch_id,
        experiment_id=ev.experiment_id,
        arm=ev.arm,
        schedule_id=ev.schedule_id,
        progress=Progress(
            completed=completed,
            errors=errors,
            total=ev.total_items,
            fraction=completed / ev.total_items if ev.total_items else 1.0,
            discarded=ev.discarded_items,
            **so_far,
        ),
        summary=EvaluationSummary.model_validate(ev.summary) if ev.summary else None,
        headline=headline_of(ev.summary),
        error=ev.error,
        created_at=ev.created_at,
        started_at=ev.started_at,
        completed_at=ev.completed_at,
    )
