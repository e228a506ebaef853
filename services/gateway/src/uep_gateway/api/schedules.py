"""Scheduled evaluations: ``POST/GET/DELETE /v1/schedules`` (a cron expression re-runs a model on a
benchmark, e.g. a nightly regression; each run is an evaluation linked to its schedule). The scheduler
creates the due runs (``uep_scheduler.schedules``); batch and A/B requests go through
``POST /v1/evaluations`` (``models``, ``arms``). A schedule belongs to the caller's tenant: another tenant's
answers 404 with the body of an unknown one, and the list holds the caller's only."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from croniter import croniter
from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.records.creation import WorkLimitRefused, WorkLimits, check_items, check_schedule_interval
from uep_common.tables.models import Evaluation
from uep_common.tables.scheduling import Schedule, ScheduleRun
from uep_gateway.auth import Principal, current_principal
from uep_gateway.deps import db_session
from uep_gateway.errors import FieldError, work_limit_error
from uep_gateway.schemas import EvaluationOptions
from uep_gateway.tenancy import owned, tenant_filter
from uep_gateway.usecases.planning import check_options, resolve_benchmark, resolve_model
from uep_gateway.validation import NUL_CHECK

router = APIRouter(prefix="/v1/schedules", tags=["schedules"], dependencies=NUL_CHECK)


class ScheduleOptions(EvaluationOptions):
    """Options of every run: exactly the options of ``POST /v1/evaluations`` (:class:`EvaluationOptions`,
    the same fields, bounds and checks), ``benchmark_version``/``model_version`` pinning a version (default:
    the newest at each run)."""


class ScheduleCreate(BaseModel):
    """``POST /v1/schedules``."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    name: str = Field("", max_length=200)
    cron: str = Field(
        min_length=1,
        max_length=200,
        description="Cron expression in UTC, 5 fields (minute hour day month weekday), or 6 with seconds last.",
    )
    model: str = Field(min_length=1, max_length=200, description="Model name or id.")
    benchmark: str = Field(min_length=1, max_length=100, description="Benchmark slug or id.")
    options: ScheduleOptions = Field(default_factory=ScheduleOptions)
    active: bool = True


class ScheduleRunView(BaseModel):
    """One due run: the evaluation it created (with its status), or why none was."""

    scheduled_for: datetime
    evaluation_id: uuid.UUID | None
    status: str | None
    error: str | None
    created_at: datetime


class ScheduleView(BaseModel):
    """A schedule, with its runs (newest first) on ``GET /v1/schedules/{id}``."""

    model_config = ConfigDict(protected_namespaces=())

    id: uuid.UUID
    name: str
    cron: str
    model: str
    benchmark: str
    options: dict[str, Any]
    active: bool
    next_run_at: datetime
    created_at: datetime
    deleted_at: datetime | None
    runs: list[ScheduleRunView] | None = None


def _view(s: Schedule, runs: list[ScheduleRunView] | None = None) -> ScheduleView:
    return ScheduleView(
        id=s.id,
        name=s.name,
        cron=s.cron,
        model=s.model,
        benchmark=s.benchmark,
        options=s.options,
        active=s.active,
        next_run_at=s.next_run_at,
        created_at=s.created_at,
        deleted_at=s.deleted_at,
        runs=runs,
    )


@router.post("", status_code=201, response_model=ScheduleView)
async def create_schedule(
    body: ScheduleCreate,
    request: Request,
    response: Response,
    session: AsyncSession = Depends(db_session),
    principal: Principal = Depends(current_principal),
) -> ScheduleView:
    """Create a schedule of the caller's tenant. The options are checked as a create's (422 naming ``options.<field>``), the cron
    expression with croniter and against the minimum interval between two runs (422 naming ``cron``), the
    model and benchmark are resolved now (422 naming them) and a run's items checked against the tenant's
    limit per evaluation; the first run is the first cron time after now. Each run is checked against the
    work limits again when the scheduler creates it."""
    check_options(body.options, request.app.state.settings, ("body", "options"))
    tenant = principal.tenant
    if not croniter.is_valid(body.cron):
        raise FieldError("invalid", ("body", "cron"), f"not a valid cron expression: {body.cron!r}", "bad_cron")
    limits = WorkLimits.from_settings(request.app.state.settings).for_tenant(tenant)
    now = datetime.now(UTC)
    try:
        check_schedule_interval(body.cron, limits, now)
    except WorkLimitRefused as exc:
        raise work_limit_error(exc) from exc
    bench = await resolve_benchmark(session, body.benchmark, body.options.benchmark_version)
    await resolve_model(session, body.model, body.options.model_version)
    try:  # each run is one evaluation of these options: refuse now what every run would be refused
        check_items(bench.sample_count, body.options.sample_limit, body.options.repeats, limits, "each run")
    except WorkLimitRefused as exc:
        raise work_limit_error(exc, ("body", "options")) from exc
    sch = Schedule(
        tenant_id=tenant.id,
        name=body.name,
        cron=body.cron,
        model=body.model,
        benchmark=body.benchmark,
        options=body.options.model_dump(mode="json", exclude_none=True),
        active=body.active,
        next_run_at=croniter(body.cron, now).get_next(datetime).astimezone(UTC),
        created_at=now,
    )
    session.add(sch)
    await session.commit()
    response.headers["Location"] = f"/v1/schedules/{sch.id}"
    return _view(sch)


@router.get("", response_model=list[ScheduleView])
async def list_schedules(session: AsyncSession = Depends(db_session)) -> list[ScheduleView]:
    """The caller's tenant's schedules that are not deleted, oldest first."""
    rows = await session.scalars(
        select(Schedule)
        .where(tenant_filter(session, Schedule), Schedule.deleted_at.is_(None))
        .order_by(Schedule.created_at, Schedule.id)
    )
    return [_view(s) for s in rows]


async def _get(session: AsyncSession, schedule_id: uuid.UUID) -> Schedule:
    """The caller's tenant's schedule ``schedule_id``, deleted or not. Raises 404 naming it when unknown or
    another tenant's."""
    return await owned(session, Schedule, schedule_id, ("path", "schedule_id"), "schedule")


@router.get("/{schedule_id}", response_model=ScheduleView)
async def get_schedule(schedule_id: uuid.UUID, session: AsyncSession = Depends(db_session)) -> ScheduleView:
    """A schedule with its runs, newest first, each with its evaluation's status. 404 naming ``schedule_id``
    when unknown, deleted or another tenant's (the same body each time); a deleted schedule's runs stay
    linked to it (``schedule_id`` of their evaluations)."""
    sch = await _get(session, schedule_id)
    if sch.deleted_at is not None:
        raise FieldError("not_found", ("path", "schedule_id"), f"unknown schedule {schedule_id}", "unknown_schedule")
    rows = await session.execute(
        select(ScheduleRun, Evaluation.status)
        .outerjoin(Evaluation, Evaluation.id == ScheduleRun.evaluation_id)
        .where(ScheduleRun.schedule_id == sch.id)
        .order_by(ScheduleRun.scheduled_for.desc())
    )
    runs = [
        ScheduleRunView(
            scheduled_for=r.scheduled_for, evaluation_id=r.evaluation_id, status=status, error=r.error, created_at=r.created_at
        )
        for r, status in rows
    ]
    return _view(sch, runs)


@router.delete("/{schedule_id}", status_code=204)
async def delete_schedule(schedule_id: uuid.UUID, session: AsyncSession = Depends(db_session)) -> Response:
    """Delete a schedule: no further run is created; runs already created stay, linked to it (idempotent).
    404 when unknown or another tenant's."""
    sch = await _get(session, schedule_id)
    if sch.deleted_at is None:
        sch.deleted_at = datetime.now(UTC)
        sch.active = False
        await session.commit()
    return Response(status_code=204)
