"""Scheduled evaluations: create each due run of a cron schedule exactly once, across scheduler replicas.

Each reconcile tick takes the due schedules (``next_run_at <= now``) with ``SELECT … FOR UPDATE SKIP
LOCKED`` (row locks: a replica skips schedules another replica is handling), and for each one, in the same
transaction: inserts the run ``(schedule_id, scheduled_for)`` — unique, so a run is never created twice
even if two replicas race — creates the evaluation (linked by ``schedule_id``; budget hook
``check_creation``), stages its EvaluationRequested in the outbox, and advances ``next_run_at`` with
croniter. Missed runs (scheduler down over several due times) are coalesced into one run for the latest
due time. A run that cannot be created (model or benchmark gone, budget refused) is recorded with its
reason and no evaluation.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from croniter import croniter
from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common import budget
from uep_common.creation import evaluation_config, find_benchmark, find_model, new_evaluation
from uep_common.db.models import Tenant
from uep_common.db.scheduling import Schedule, ScheduleRun
from uep_common.outbox import add_to_outbox
from uep_common.telemetry import tracer

log = logging.getLogger(__name__)
_tracer = tracer("uep.scheduler")


def next_after(cron: str, after: datetime) -> datetime:
    """The first time strictly after ``after`` matched by ``cron`` (UTC; 5 fields, or 6 with seconds last)."""
    return croniter(cron, after.astimezone(UTC)).get_next(datetime).astimezone(UTC)


def due_time(cron: str, next_run_at: datetime, now: datetime) -> tuple[datetime, datetime]:
    """``(scheduled_for, new next_run_at)``: the latest due time ≤ ``now`` starting at ``next_run_at``
    (missed runs coalesce), and the first time after it."""
    scheduled_for = next_run_at
    nxt = next_after(cron, scheduled_for)
    while nxt <= now:
        scheduled_for, nxt = nxt, next_after(cron, nxt)
    return scheduled_for, nxt


async def _create_run(s: AsyncSession, sch: Schedule, scheduled_for: datetime) -> bool:
    """Insert the run and its evaluation; False if the run already existed."""
    run_id = await s.scalar(
        insert(ScheduleRun).values(schedule_id=sch.id, scheduled_for=scheduled_for)
        .on_conflict_do_nothing(constraint="uq_schedule_runs_due").returning(ScheduleRun.id)
    )
    if run_id is None:
        return False
    o = sch.options or {}
    error = None
    evaluation_id = None
    bench = await find_benchmark(s, sch.benchmark, o.get("benchmark_version"))
    model = await find_model(s, sch.model, o.get("model_version"))
    if bench is None or bench.sample_count == 0:
        error = f"benchmark {sch.benchmark!r} not found or empty"
    elif model is None:
        error = f"model {sch.model!r} not found"
    else:
        try:
            async with s.begin_nested():
                with _tracer.start_as_current_span(
                    "evaluation", attributes={"uep.benchmark": bench.slug, "uep.model": model.name, "uep.schedule_id": str(sch.id)}
                ):
                    ev, event = new_evaluation(
                        tenant_id=sch.tenant_id, bench=bench, model=model, sample_limit=o.get("sample_limit"),
                        repeats=int(o.get("repeats", 1)), priority=o.get("priority", "normal"),
                        config=evaluation_config(o.get("max_parallel"), o.get("fewshot_k"), o.get("chat_template")),
                        schedule_id=sch.id,
                    )
                    s.add(ev)
                    await budget.check_creation(s, await s.get(Tenant, sch.tenant_id), [ev])
                    add_to_outbox(s, event)
                    await s.flush()
            evaluation_id = ev.id
        except budget.BudgetRefused as exc:
            error = f"budget refused: {exc.reason}"
    await s.execute(update(ScheduleRun).where(ScheduleRun.id == run_id).values(evaluation_id=evaluation_id, error=error))
    if error:
        log.warning("schedule %s run for %s not created: %s", sch.id, scheduled_for, error)
    return evaluation_id is not None


async def run_due_schedules(sessionmaker, now: datetime | None = None, limit: int = 50) -> int:
    """Create the due runs of every due schedule (one transaction). Returns evaluations created."""
    now = now or datetime.now(UTC)
    created = 0
    async with sessionmaker() as s, s.begin():
        due = await s.scalars(
            select(Schedule)
            .where(Schedule.active.is_(True), Schedule.deleted_at.is_(None), Schedule.next_run_at <= now)
            .order_by(Schedule.next_run_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        for sch in list(due):
            scheduled_for, nxt = due_time(sch.cron, sch.next_run_at, now)
            if await _create_run(s, sch, scheduled_for):
                created += 1
            sch.next_run_at = nxt
    return created
