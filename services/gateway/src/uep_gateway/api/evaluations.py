"""Evaluations: create (202 + transactional outbox), list the tenant's (filters, keyset pages), read one with
live progress, page through its results, cancel it.

Every evaluation a route fetches by id is the caller's tenant's (:func:`owned_evaluation`): another tenant's
answers 404 with the body of an unknown one."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from pydantic import BaseModel, ConfigDict
from sqlalchemy import select, tuple_
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.analytics.summary import Headline, headline_of
from uep_common.contract.configs import parse_evaluation_config
from uep_common.records import budget
from uep_common.records.creation import (
    WorkLimitRefused,
    WorkLimits,
    check_work_limits,
    lock_tenant_creations,
)
from uep_common.runtime.outbox import add_to_outbox
from uep_common.runtime.wakeups import notify_waiting
from uep_common.tables.models import EVALUATION_STATUSES, Benchmark, Evaluation, Model, Sample, SampleResult
from uep_gateway.auth import Principal, current_principal
from uep_gateway.cursors import bad_cursor, cursor_values, decode_time_id, encode_cursor, encode_time_id
from uep_gateway.deps import db_session
from uep_gateway.errors import FieldError, work_limit_error
from uep_gateway.schemas import (
    EvaluationAccepted,
    EvaluationCreate,
    EvaluationRef,
    EvaluationView,
    Progress,
    ResultItem,
    ResultsPage,
)
from uep_gateway.tenancy import tenant_filter
from uep_gateway.usecases import lifecycle as usecase_lifecycle
from uep_gateway.usecases.evaluations import evaluation_view, owned_evaluation
from uep_gateway.usecases.planning import check_models_answer, check_options, plan_evaluations
from uep_gateway.validation import INT32_MAX, NUL_CHECK

router = APIRouter(prefix="/v1/evaluations", tags=["evaluations"], dependencies=NUL_CHECK)


@router.post("", status_code=202, response_model=EvaluationAccepted)
async def create_evaluation(
    body: EvaluationCreate,
    request: Request,
    response: Response,
    session: AsyncSession = Depends(db_session),
    principal: Principal = Depends(current_principal),
    idempotency_key: str | None = Header(None, alias="Idempotency-Key", max_length=200),
) -> EvaluationAccepted:
    """Accept an evaluation — or a batch (``models``: one evaluation per model, one ``batch_id``), or an A/B
    experiment (``arms``: one evaluation per arm, one ``experiment_id``). Every row and its
    EvaluationRequested event are committed in one transaction (transactional outbox), after one budget
    check over all of them; the relay publishes the events. A repeated ``Idempotency-Key`` returns what was
    created the first time (of the caller's tenant: keys of two tenants never meet). A model whose endpoint
    does not answer its readiness check is 409 ``model_unavailable`` naming the field that named it
    (:func:`uep_gateway.usecases.planning.check_models_answer`)."""
    settings = request.app.state.settings
    check_options(body, settings)
    tenant = principal.tenant
    limits = WorkLimits.from_settings(settings)
    if idempotency_key:
        # one creation of this tenant at a time until commit (check_work_limits takes the same lock otherwise): a
        # concurrent request with the same key waits here, then finds the first one's rows
        await lock_tenant_creations(session, tenant.id)
        existing = await session.scalar(
            select(Evaluation).where(Evaluation.tenant_id == tenant.id, Evaluation.idempotency_key == idempotency_key)
        )
        if existing is not None:
            return await _accepted_group(session, existing)
    evaluations, events = await plan_evaluations(session, tenant, body, idempotency_key)
    if settings.model_ready_check:
        await check_models_answer(request.app.state.model_health, session, body, evaluations)
    try:
        await check_work_limits(session, tenant, evaluations, limits, many_field="arms" if body.arms is not None else "models")
    except WorkLimitRefused as exc:
        raise work_limit_error(exc) from exc
    session.add_all(evaluations)
    try:
        await budget.check_creation(session, tenant, evaluations)
    except budget.BudgetRefused as exc:
        raise work_limit_error(exc) from exc
    for ev, event in zip(evaluations, events, strict=True):
        add_to_outbox(session, event, ev.trace_context)
    await notify_waiting(session, [ev.id for ev in evaluations])  # the scheduler admits on commit, not after Kafka
    try:
        await session.commit()
    except IntegrityError as exc:
        # another creation with this Idempotency-Key won (one that did not take the lock above, e.g. an older
        # gateway during a rolling upgrade): nothing of this one was written; answer with the winner's rows
        await session.rollback()
        if idempotency_key and "uq_evaluations_idempotency_key" in str(exc.orig):
            winner = await session.scalar(
                select(Evaluation).where(Evaluation.tenant_id == tenant.id, Evaluation.idempotency_key == idempotency_key)
            )
            if winner is not None:
                return await _accepted_group(session, winner)
        raise
    request.app.state.relay.kick()
    response.headers["Location"] = f"/v1/evaluations/{evaluations[0].id}"
    return await _accepted_group(session, evaluations[0], evaluations)


async def _accepted_group(session: AsyncSession, first: Evaluation, group: list[Evaluation] | None = None) -> EvaluationAccepted:
    """The 202 body: ``first``'s fields and, for a batch or A/B request, every evaluation of its group."""
    if group is None:
        group = [first]
        if first.batch_id or first.experiment_id:
            col = Evaluation.batch_id if first.batch_id else Evaluation.experiment_id
            group = list(
                await session.scalars(
                    select(Evaluation)
                    .where(col == (first.batch_id or first.experiment_id), Evaluation.tenant_id == first.tenant_id)
                    .order_by(Evaluation.created_at, Evaluation.arm)
                )
            )
    names = {}
    for model_id in {e.model_id for e in group}:  # the models resolved by the request are in the identity map: no query
        model = await session.get(Model, model_id)
        names[model_id] = model.name if model else ""
    accepted = _accepted(first)
    return accepted.model_copy(
        update={
            "batch_id": first.batch_id,
            "experiment_id": first.experiment_id,
            "arm": first.arm,
            "estimated_cost": budget.combined_estimate([parse_evaluation_config(e.config).estimate_dict for e in group]),
            "evaluations": [
                EvaluationRef(
                    id=e.id,
                    status=e.status,
                    total_items=e.total_items,
                    model=names.get(e.model_id, ""),
                    arm=e.arm,
                    links=_accepted(e).links,
                )
                for e in group
            ]
            if len(group) > 1 or first.batch_id or first.experiment_id
            else [],
        }
    )


def _accepted(ev: Evaluation) -> EvaluationAccepted:
    return EvaluationAccepted(
        id=ev.id,
        status=ev.status,
        total_items=ev.total_items,
        links={"self": f"/v1/evaluations/{ev.id}", "results": f"/v1/evaluations/{ev.id}/results"},
        estimated_cost=parse_evaluation_config(ev.config).estimate_dict,
    )


class EvaluationListItem(BaseModel):
    """One evaluation of ``GET /v1/evaluations``: what it runs, where it stands (counters from PostgreSQL), its
    accuracy and its ``headline`` (:func:`uep_common.analytics.summary.headline_of`: a ranker's ``ndcg@10``, a
    classifier's primary metric, an LLM's accuracy); ``links.self`` is its full view."""

    model_config = ConfigDict(protected_namespaces=())

    id: uuid.UUID
    status: str
    priority: str
    benchmark: dict[str, Any]
    model: dict[str, Any]
    sample_limit: int | None
    repeats: int
    batch_id: uuid.UUID | None
    experiment_id: uuid.UUID | None
    arm: str
    schedule_id: uuid.UUID | None
    progress: Progress
    accuracy: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    headline: Headline | None = None
    error: str | None
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    links: dict[str, str]


class EvaluationPage(BaseModel):
    """A page of evaluations, newest first; pass ``next_cursor`` back as ``cursor`` (null: the last page)."""

    items: list[EvaluationListItem]
    next_cursor: str | None


def _list_item(ev: Evaluation, bench: Benchmark | None, model: Model | None) -> EvaluationListItem:
    summary = ev.summary or {}
    return EvaluationListItem(
        id=ev.id,
        status=ev.status,
        priority=ev.priority,
        benchmark={"id": str(ev.benchmark_id)}
        | ({"slug": bench.slug, "name": bench.name, "version": bench.version} if bench else {}),
        model={"id": str(ev.model_id)} | ({"name": model.name, "version": model.version} if model else {}),
        sample_limit=ev.sample_limit,
        repeats=ev.repeats,
        batch_id=ev.batch_id,
        experiment_id=ev.experiment_id,
        arm=ev.arm,
        schedule_id=ev.schedule_id,
        progress=Progress(
            completed=ev.completed_items,
            errors=ev.error_items,
            total=ev.total_items,
            fraction=ev.completed_items / ev.total_items if ev.total_items else 1.0,
            discarded=ev.discarded_items,
        ),
        accuracy=summary.get("accuracy"),
        ci_low=summary.get("ci_low"),
        ci_high=summary.get("ci_high"),
        headline=headline_of(summary),
        error=ev.error,
        created_at=ev.created_at,
        started_at=ev.started_at,
        completed_at=ev.completed_at,
        links={"self": f"/v1/evaluations/{ev.id}", "results": f"/v1/evaluations/{ev.id}/results"},
    )


def _statuses(values: list[str] | None) -> list[str]:
    """The statuses of ``status`` filters (repeated and/or comma-separated). Raises 422 naming ``status``."""
    out: list[str] = []
    for value in values or []:
        for part in value.split(","):
            name = part.strip()
            if not name:
                continue
            if name not in EVALUATION_STATUSES:
                raise FieldError(
                    "invalid",
                    ("query", "status"),
                    f"unknown status {name[:50]!r}; one of {', '.join(EVALUATION_STATUSES)}",
                    "bad_status",
                )
            out.append(name)
    return out


def _aware(value: datetime | None) -> datetime | None:
    """``value`` with a time zone (a naive datetime is taken as UTC)."""
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


@router.get("", response_model=EvaluationPage)
async def list_evaluations(
    status: list[str] | None = Query(
        None, max_length=500, description="Only these statuses: repeat the parameter or give a comma-separated list."
    ),
    benchmark: str | None = Query(None, min_length=1, max_length=100, description="Only evaluations of this benchmark slug."),
    model: str | None = Query(None, min_length=1, max_length=200, description="Only evaluations of this model name."),
    batch_id: uuid.UUID | None = Query(None, description="Only the evaluations of this batch."),
    experiment_id: uuid.UUID | None = Query(None, description="Only the arms of this A/B experiment."),
    created_after: datetime | None = Query(None, description="Created at or after this instant (ISO 8601; naive = UTC)."),
    created_before: datetime | None = Query(None, description="Created before this instant (ISO 8601; naive = UTC)."),
    limit: int = Query(50, ge=1, le=200),
    cursor: str | None = Query(None, max_length=500, description="The previous page's next_cursor."),
    session: AsyncSession = Depends(db_session),
) -> EvaluationPage:
    """The caller's tenant's evaluations, newest first (``created_at``, then ``id``, descending), keyset-
    paginated. Filters combine with AND; an unknown benchmark or model name matches nothing. 422 naming the
    query field for an unknown status, a malformed id, date or cursor, or ``created_before`` not after
    ``created_after``."""
    statuses = _statuses(status)
    after, before = _aware(created_after), _aware(created_before)
    if after is not None and before is not None and before <= after:
        raise FieldError("invalid", ("query", "created_before"), "created_before must be after created_after", "bad_range")
    q = (
        select(Evaluation, Benchmark, Model)
        .outerjoin(Benchmark, Benchmark.id == Evaluation.benchmark_id)
        .outerjoin(Model, Model.id == Evaluation.model_id)
        .where(tenant_filter(session, Evaluation))
    )
    if statuses:
        q = q.where(Evaluation.status.in_(statuses))
    if benchmark is not None:
        q = q.where(Evaluation.benchmark_id.in_(select(Benchmark.id).where(Benchmark.slug == benchmark)))
    if model is not None:
        q = q.where(Evaluation.model_id.in_(select(Model.id).where(Model.name == model)))
    if batch_id is not None:
        q = q.where(Evaluation.batch_id == batch_id)
    if experiment_id is not None:
        q = q.where(Evaluation.experiment_id == experiment_id)
    if after is not None:
        q = q.where(Evaluation.created_at >= after)
    if before is not None:
        q = q.where(Evaluation.created_at < before)
    if cursor:
        q = q.where(tuple_(Evaluation.created_at, Evaluation.id) < tuple_(*decode_time_id(cursor)))
    rows = (await session.execute(q.order_by(Evaluation.created_at.desc(), Evaluation.id.desc()).limit(limit + 1))).all()
    items = [_list_item(ev, bench, m) for ev, bench, m in rows[:limit]]
    nxt = encode_time_id(items[-1].created_at, items[-1].id) if len(rows) > limit else None
    return EvaluationPage(items=items, next_cursor=nxt)


@router.get("/{evaluation_id}", response_model=EvaluationView)
async def get_evaluation(
    evaluation_id: uuid.UUID, request: Request, session: AsyncSession = Depends(db_session)
) -> EvaluationView:
    """Status, progress (live from Redis while running, else from PostgreSQL) and summary. 404 naming
    ``evaluation_id`` when it is unknown or another tenant's."""
    return await evaluation_view(session, request.app.state.redis, evaluation_id)


def _decode_cursor(cursor: str) -> tuple[int, int, str]:
    """The (sample ordinal, repeat, arm) of a results cursor. Raises 422 naming ``cursor``."""
    ordinal, repeat, arm = cursor_values(cursor, 3)
    if not (type(ordinal) is int and type(repeat) is int and isinstance(arm, str)):
        raise bad_cursor()
    if not (-INT32_MAX <= ordinal <= INT32_MAX and -INT32_MAX <= repeat <= INT32_MAX and len(arm) <= 64 and "\x00" not in arm):
        raise bad_cursor()  # the columns are INTEGER and VARCHAR(64), and PostgreSQL refuses NUL
    return ordinal, repeat, arm


@router.get("/{evaluation_id}/results", response_model=ResultsPage)
async def list_results(
    evaluation_id: uuid.UUID,
    limit: int = Query(100, ge=1, le=1000),
    cursor: str | None = Query(None, max_length=500),
    session: AsyncSession = Depends(db_session),
) -> ResultsPage:
    """Stored results in benchmark order (sample ordinal, repeat, arm), keyset-paginated. 404 naming
    ``evaluation_id`` when it is unknown or another tenant's."""
    await owned_evaluation(session, evaluation_id)
    key = tuple_(Sample.ordinal, SampleResult.repeat, SampleResult.arm)
    q = (
        select(SampleResult, Sample.ordinal, Sample.external_id)
        .join(Sample, Sample.id == SampleResult.sample_id)
        .where(SampleResult.evaluation_id == evaluation_id)
        .order_by(Sample.ordinal, SampleResult.repeat, SampleResult.arm)
        .limit(limit + 1)
    )
    if cursor:
        q = q.where(key > tuple(_decode_cursor(cursor)))
    rows = (await session.execute(q)).all()
    items = [
        ResultItem(
            sample_ordinal=ordinal,
            external_id=external_id,
            **{k: getattr(r, k) for k in ResultItem.model_fields if k not in ("sample_ordinal", "external_id")},
        )
        for r, ordinal, external_id in rows[:limit]
    ]
    nxt = None
    if len(rows) > limit:
        last = items[-1]
        nxt = encode_cursor(last.sample_ordinal, last.repeat, last.arm)
    return ResultsPage(items=items, next_cursor=nxt)


@router.post("/{evaluation_id}/cancel", response_model=EvaluationView)
async def cancel_evaluation(
    evaluation_id: uuid.UUID, request: Request, session: AsyncSession = Depends(db_session)
) -> EvaluationView:
    """Cancel a pending or running evaluation: nothing more is dispatched, results already stored stay, results
    still in flight are discarded when they arrive (counted in ``progress.discarded``). An EvaluationCompleted
    with status ``cancelled`` is published. 404 when unknown or another tenant's; 409 when the evaluation has
    already finished."""
    await usecase_lifecycle.cancel(session, evaluation_id)
    request.app.state.relay.kick()
    return await evaluation_view(session, request.app.state.redis, evaluation_id)
