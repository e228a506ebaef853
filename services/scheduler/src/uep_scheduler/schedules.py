"""Scheduled evaluations: create each due run of a cron schedule exactly once, across scheduler replicas.

Each reconcile tick takes the due schedules (``next_run_at <= now``) with ``SELECT … FOR UPDATE SKIP
LOCKED`` (row locks: a replica skips schedules another replica is handling), and for each one, in the same
transaction: inserts the run ``(schedule_id, scheduled_for)`` — unique, so a run is never created twice
even if two replicas race — creates the evaluation (linked by ``schedule_id``; budget hook
``check_creation``), stages its EvaluationRequested in the outbox, and advances ``next_run_at`` with
croniter. Missed runs (scheduler down over several due times) are coalesced into one run for the latest
due time. A run that cannot be created (model or benchmark gone, budget refused, a work limit of
``uep_common.records.creation``) is recorded with its reason and no evaluation.

Runs of one schedule are never closer than the tenant's minimum schedule interval
(``UEP_MIN_SCHEDULE_INTERVAL_S`` or ``tenants.min_schedule_interval_s``): ``next_run_at`` advances to the
first cron time at least that long after the run just created, and a due time too close to the schedule's
latest run (a schedule stored before the rule, or a lowered interval) is skipped without a run.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from croniter import croniter
from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from uep_common.contract.configs import parse_benchmark_config
from uep_common.records import budget
from uep_common.records.creation import (
    WorkLimitRefused,
    WorkLimits,
    check_work_limits,
    evaluation_config,
    find_benchmark,
    find_model,
    new_evaluation,
    next_allowed_run,
)
from uep_common.records.sampling import MAX_SAMPLED, choose_ordinals
from uep_common.runtime.outbox import add_to_outbox
from uep_common.runtime.settings import CommonSettings
from uep_common.runtime.telemetry import tracer
from uep_common.tables.models import Tenant
from uep_common.tables.scheduling import Schedule, ScheduleRun

log = logging.getLogger(__name__)
_tracer = tracer("uep.scheduler")


@lru_cache(maxsize=1)
def site_limits() -> WorkLimits:
    """The site's work limits from the ``UEP_*`` environment (read once per process)."""
    return WorkLimits.from_settings(CommonSettings())


def next_after(cron: str, after: datetime) -> datetime:
    """The first time strictly after ``after`` matched by ``cron`` (UTC; 5 fields, or 6 with seconds last)."""
    nxt: datetime = croniter(cron, after.astimezone(UTC)).get_next(datetime)
    return nxt.astimezone(UTC)


def due_time(cron: str, next_run_at: datetime, now: datetime) -> tuple[datetime, datetime]:
    """``(scheduled_for, new next_run_at)``: the latest due time ≤ ``now`` starting at ``next_run_at``
    (missed runs coalesce), and the first time after it."""
    scheduled_for = next_run_at
    nxt = next_after(cron, scheduled_for)
    while nxt <= now:
        scheduled_for, nxt = nxt, next_after(cron, nxt)
    return scheduled_for, nxt


async def _create_run(s: AsyncSession, sch: Schedule, scheduled_for: datetime, tenant: Tenant, limits: WorkLimits) -> bool:
    """Insert the run and its evaluation (checked against ``limits``, the site's, and ``tenant``'s work
    limits); False if the run already existed or none was created."""
    run_id = await s.scalar(
        insert(ScheduleRun)
        .values(schedule_id=sch.id, scheduled_for=scheduled_for)
        .on_conflict_do_nothing(constraint="uq_schedule_runs_due")
        .returning(ScheduleRun.id)
    )
    if run_id is None:
        return False
    o = sch.options or {}
    error = None
    evaluation_id = None
    bench = await find_benchmark(s, sch.benchmark, o.get("benchmark_version"))
    model = await find_model(s, sch.model, o.get("model_version"), sch.tenant_id)
    if bench is None or bench.sample_count == 0:
        error = f"benchmark {sch.benchmark!r} not found or empty"
    elif model is None:
        error = f"model {sch.model!r} not found"
    else:
        try:
            async with s.begin_nested():
                with _tracer.start_as_current_span(
                    "evaluation",
                    attributes={"uep.benchmark": bench.slug, "uep.model": model.name, "uep.schedule_id": str(sch.id)},
                ):
                    method = o.get("sampling") or parse_benchmark_config(bench.config).default_sampling or "first"
                    n = min(o.get("sample_limit") or bench.sample_count, bench.sample_count)
                    seed = int(o.get("sampling_seed") or 0)
                    if method != "first" and MAX_SAMPLED < n < bench.sample_count:
                        raise WorkLimitRefused(
                            422, "sampling", f"{method} sampling takes at most {MAX_SAMPLED:,} samples", "too_many_sampled"
                        )
                    chosen = await choose_ordinals(s, bench.id, bench.sample_count, n, method, seed)
                    ev, event = new_evaluation(
                        tenant_id=sch.tenant_id,
                        bench=bench,
                        model=model,
                        sample_limit=o.get("sample_limit"),
                        repeats=int(o.get("repeats", 1)),
                        priority=o.get("priority", "normal"),
                        config=evaluation_config(
                            o.get("max_parallel"),
                            o.get("fewshot_k"),
                            o.get("chat_template"),
                            sample_timeout_s=o.get("sample_timeout_s"),
                            sampling=method,
                            sampling_seed=seed,
                            sample_ordinals=chosen,
                        ),
                        schedule_id=sch.id,
                    )
                    await check_work_limits(s, tenant, [ev], limits)
                    s.add(ev)
                    await budget.check_creation(s, tenant, [ev])
                    add_to_outbox(s, event)
                    await s.flush()
            evaluation_id = ev.id
        except budget.BudgetRefused as exc:
            error = f"budget refused: {exc.reason}"
        except WorkLimitRefused as exc:
            error = f"work limit ({exc.kind}, {exc.field}): {exc.reason}"
    await s.execute(update(ScheduleRun).where(ScheduleRun.id == run_id).values(evaluation_id=evaluation_id, error=error))
    if error:
        log.warning("schedule %s run for %s not created: %s", sch.id, scheduled_for, error)
    return evaluation_id is not None


async def run_due_schedules(
    sessionmaker: async_sessionmaker[AsyncSession], now: datetime | None = None, limit: int = 50, limits: WorkLimits | None = None
) -> int:
    """Create the due runs of every due schedule (one transaction), never two runs of one schedule closer than
    its tenant's ``min_schedule_interval_s``. ``limits``: the site's work limits (default: from the
    environment, :func:`site_limits`). Returns evaluations created."""
    now = now or datetime.now(UTC)
    site = limits or site_limits()
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
            tenant = await s.get(Tenant, sch.tenant_id)
            assert tenant is not None  # schedules.tenant_id is a foreign key
            own = site.for_tenant(tenant)
            scheduled_for, nxt = due_time(sch.cron, sch.next_run_at, now)
            last = await s.scalar(select(func.max(ScheduleRun.scheduled_for)).where(ScheduleRun.schedule_id == sch.id))
            if last is not None and scheduled_for < last + timedelta(seconds=own.min_schedule_interval_s):
                sch.next_run_at = max(nxt, next_allowed_run(sch.cron, last, own))  # too close to its latest run
                continue
            if await _create_run(s, sch, scheduled_for, tenant, site):
                created += 1
            sch.next_run_at = max(nxt, next_allowed_run(sch.cron, scheduled_for, own))
    return created
