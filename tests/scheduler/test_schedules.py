"""Scheduled runs on a real PostgreSQL: each due run is created exactly once, even by concurrent replicas."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select

from uep_common.tables.models import Benchmark, Evaluation, Model, OutboxMessage
from uep_common.tables.scheduling import Schedule, ScheduleRun
from uep_scheduler.schedules import due_time, run_due_schedules


def test_due_time_coalesces_missed_runs():
    # "0 2 * * *" = 02:00 UTC daily. Next run was due 3 days ago; now is 12:00 → one run, for today 02:00.
    now = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
    scheduled_for, nxt = due_time("0 2 * * *", datetime(2026, 3, 7, 2, 0, tzinfo=UTC), now)
    assert scheduled_for == datetime(2026, 3, 10, 2, 0, tzinfo=UTC) and nxt == datetime(2026, 3, 11, 2, 0, tzinfo=UTC)


async def test_concurrent_replicas_create_each_run_once(sm, world):
    tenant = await world.tenant("t", min_schedule_interval_s=1)  # runs 10 s apart: below the site's minimum
    model_id, bench_id = await world.model(4), await world.benchmark(5)
    async with sm() as s:
        model_name = (await s.get(Model, model_id)).name
        slug = (await s.get(Benchmark, bench_id)).slug
    now = datetime.now(UTC).replace(microsecond=0)
    async with sm() as s, s.begin():
        sch = Schedule(
            id=uuid.uuid4(),
            tenant_id=tenant,
            name="nightly",
            cron="* * * * * */10",
            model=model_name,
            benchmark=slug,
            options={"sample_limit": 3, "priority": "low"},
            next_run_at=now - timedelta(seconds=25),
        )
        s.add(sch)
    # four "replicas" at once, then again at the same instant: one run for the latest due time, nothing more
    created = await asyncio.gather(*(run_due_schedules(sm, now) for _ in range(4)))
    created += await asyncio.gather(*(run_due_schedules(sm, now) for _ in range(2)))
    assert sum(created) == 1
    async with sm() as s:
        runs = list(await s.scalars(select(ScheduleRun).where(ScheduleRun.schedule_id == sch.id)))
        assert len(runs) == 1 and runs[0].error is None
        ev = await s.get(Evaluation, runs[0].evaluation_id)
        assert (ev.schedule_id, ev.total_items, ev.priority, ev.status) == (sch.id, 3, "low", "pending")
        n_events = await s.scalar(
            select(func.count())
            .select_from(OutboxMessage)
            .where(OutboxMessage.event_type == "EvaluationRequested", OutboxMessage.payload["evaluation_id"].astext == str(ev.id))
        )
        assert n_events == 1
        nxt = (await s.get(Schedule, sch.id, populate_existing=True)).next_run_at
    assert nxt > now and nxt - now <= timedelta(seconds=10)
    # 10 s later the next run is due: exactly one more
    assert sum(await asyncio.gather(*(run_due_schedules(sm, nxt) for _ in range(3)))) == 1


async def test_run_with_unknown_model_is_recorded_with_its_reason(sm, world):
    tenant = await world.tenant("t")
    bench_id = await world.benchmark(2)
    async with sm() as s, s.begin():
        slug = (await s.get(Benchmark, bench_id)).slug
        sch = Schedule(
            id=uuid.uuid4(),
            tenant_id=tenant,
            cron="0 * * * *",
            model="gone",
            benchmark=slug,
            options={},
            next_run_at=datetime.now(UTC) - timedelta(minutes=1),
        )
        s.add(sch)
    assert await run_due_schedules(sm) == 0
    async with sm() as s:
        run = await s.scalar(select(ScheduleRun).where(ScheduleRun.schedule_id == sch.id))
    assert run.evaluation_id is None and "model 'gone' not found" in run.error
