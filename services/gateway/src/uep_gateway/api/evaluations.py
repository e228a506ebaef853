"""Evaluations: create (202 + transactional outbox), read with live progress, page through results."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from sqlalchemy import select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common import budget
from uep_common.db.models import Benchmark, Evaluation, Model, Sample, SampleResult, Tenant
from uep_common.events import EvaluationCompleted, EvaluationRequested, EvaluationStatus, EvaluationSummary
from uep_common.outbox import add_to_outbox
from uep_common.telemetry import current_trace_headers, tracer
from uep_gateway.deps import db_session
from uep_gateway.errors import FieldError
from uep_gateway.schemas import EvaluationAccepted, EvaluationCreate, EvaluationView, Progress, ResultItem, ResultsPage

router = APIRouter(prefix="/v1/evaluations", tags=["evaluations"])
_tracer = tracer("uep.gateway")
TENANT_HEADER = "X-UEP-Tenant"


def _as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


async def resolve_tenant(session: AsyncSession, slug: str) -> Tenant:
    """The tenant named by the ``X-UEP-Tenant`` header (default ``default``). Raises 404 naming the header."""
    tenant = await session.scalar(select(Tenant).where(Tenant.slug == slug))
    if tenant is None:
        raise FieldError(404, ("header", TENANT_HEADER), f"unknown tenant {slug!r}", "unknown_tenant")
    return tenant


async def resolve_benchmark(session: AsyncSession, ref: str, version: str | None) -> Benchmark:
    """Benchmark by slug or id (newest active version unless ``version``). Raises 422 naming the field."""
    q = select(Benchmark)
    as_id = _as_uuid(ref)
    q = q.where(Benchmark.id == as_id) if as_id else q.where(Benchmark.slug == ref)
    if version:
        q = q.where(Benchmark.version == version)
    bench = await session.scalar(q.where(Benchmark.status != "draft").order_by(Benchmark.created_at.desc()).limit(1))
    if bench is None:
        if version and await session.scalar(select(Benchmark.id).where(Benchmark.slug == ref).limit(1)):
            raise FieldError(422, ("body", "benchmark_version"), f"benchmark {ref!r} has no version {version!r}", "unknown_benchmark_version")
        raise FieldError(422, ("body", "benchmark"), f"unknown benchmark {ref!r}", "unknown_benchmark")
    if bench.evaluation_type != "automatic":
        raise FieldError(
            422, ("body", "benchmark"),
            f"benchmark {ref!r} needs evaluation type {bench.evaluation_type!r}, which is not available yet",
            "unsupported_evaluation_type",
        )
    if bench.sample_count == 0:
        raise FieldError(422, ("body", "benchmark"), f"benchmark {ref!r} has no samples", "empty_benchmark")
    return bench


async def resolve_model(session: AsyncSession, ref: str, version: str | None) -> Model:
    """Model by name or id (newest version unless ``version``). Raises 422 naming the field."""
    as_id = _as_uuid(ref)
    q = select(Model).where(Model.id == as_id) if as_id else select(Model).where(Model.name == ref)
    if version:
        q = q.where(Model.version == version)
    model = await session.scalar(q.order_by(Model.created_at.desc()).limit(1))
    if model is None:
        loc = ("body", "model_version") if version else ("body", "model")
        raise FieldError(422, loc, f"unknown model {ref!r}" + (f" version {version!r}" if version else ""), "unknown_model")
    return model


@router.post("", status_code=202, response_model=EvaluationAccepted)
async def create_evaluation(
    body: EvaluationCreate,
    request: Request,
    response: Response,
    session: AsyncSession = Depends(db_session),
    tenant_slug: str = Header("default", alias=TENANT_HEADER, max_length=64),
    idempotency_key: str | None = Header(None, alias="Idempotency-Key", max_length=200),
) -> EvaluationAccepted:
    """Accept an evaluation: the row and its EvaluationRequested event are committed in one transaction
    (transactional outbox); the relay publishes the event. A repeated ``Idempotency-Key`` returns the
    evaluation created the first time."""
    settings = request.app.state.settings
    if body.repeats > settings.max_repeats:
        raise FieldError(422, ("body", "repeats"), f"at most {settings.max_repeats} repeats", "too_many_repeats")
    tenant = await resolve_tenant(session, tenant_slug)
    if idempotency_key:
        existing = await session.scalar(
            select(Evaluation).where(Evaluation.tenant_id == tenant.id, Evaluation.idempotency_key == idempotency_key)
        )
        if existing is not None:
            return _accepted(existing)
    bench = await resolve_benchmark(session, body.benchmark, body.benchmark_version)
    model = await resolve_model(session, body.model, body.model_version)
    n_samples = min(body.sample_limit or bench.sample_count, bench.sample_count)
    evaluation_id = uuid.uuid4()
    with _tracer.start_as_current_span(
        "evaluation",
        attributes={"uep.evaluation_id": str(evaluation_id), "uep.benchmark": bench.slug, "uep.model": model.name},
    ):
        evaluation = Evaluation(
            id=evaluation_id,
            tenant_id=tenant.id,
            benchmark_id=bench.id,
            model_id=model.id,
            status="pending",
            priority=body.priority.value,
            sample_limit=body.sample_limit,
            repeats=body.repeats,
            total_items=n_samples * body.repeats,
            config={
                k: v
                for k, v in (("max_in_flight", body.max_in_flight), ("fewshot_k", body.fewshot_k), ("chat_template", body.chat_template))
                if v is not None
            },
            trace_context=current_trace_headers(),
            idempotency_key=idempotency_key,
        )
        event = EvaluationRequested(
            evaluation_id=evaluation_id,
            tenant_id=tenant.id,
            benchmark_id=bench.id,
            benchmark_slug=bench.slug,
            benchmark_version=bench.version,
            model_id=model.id,
            model_name=model.name,
            sample_limit=body.sample_limit,
            repeats=body.repeats,
            priority=body.priority,
            total_items=evaluation.total_items,
        )
        session.add(evaluation)
        try:
            await budget.check_creation(session, tenant, [evaluation])
        except budget.BudgetRefused as exc:
            raise FieldError(exc.status_code, ("body", exc.field), exc.reason, exc.kind) from exc
        add_to_outbox(session, event)
        await session.commit()
    request.app.state.relay.kick()
    response.headers["Location"] = f"/v1/evaluations/{evaluation_id}"
    return _accepted(evaluation)


def _accepted(ev: Evaluation) -> EvaluationAccepted:
    return EvaluationAccepted(
        id=ev.id,
        status=ev.status,
        total_items=ev.total_items,
        links={"self": f"/v1/evaluations/{ev.id}", "results": f"/v1/evaluations/{ev.id}/results"},
    )


async def _get_evaluation(session: AsyncSession, evaluation_id: uuid.UUID) -> Evaluation:
    ev = await session.get(Evaluation, evaluation_id)
    if ev is None:
        raise FieldError(404, ("path", "evaluation_id"), f"unknown evaluation {evaluation_id}", "unknown_evaluation")
    return ev


@router.get("/{evaluation_id}", response_model=EvaluationView)
async def get_evaluation(
    evaluation_id: uuid.UUID, request: Request, session: AsyncSession = Depends(db_session)
) -> EvaluationView:
    """Status, progress (live from Redis while running, else from PostgreSQL) and summary."""
    ev = await _get_evaluation(session, evaluation_id)
    bench = await session.get(Benchmark, ev.benchmark_id)
    model = await session.get(Model, ev.model_id)
    completed, errors = ev.completed_items, ev.error_items
    if ev.status == "running":
        try:
            live = await request.app.state.redis.hgetall(f"uep:evaluation:{ev.id}")
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
        progress=Progress(
            completed=completed, errors=errors, total=ev.total_items,
            fraction=completed / ev.total_items if ev.total_items else 1.0, discarded=ev.discarded_items,
        ),
        summary=EvaluationSummary.model_validate(ev.summary) if ev.summary else None,
        error=ev.error,
        created_at=ev.created_at,
        started_at=ev.started_at,
        completed_at=ev.completed_at,
    )


def _encode_cursor(ordinal: int, repeat: int, arm: str) -> str:
    return base64.urlsafe_b64encode(json.dumps([ordinal, repeat, arm]).encode()).decode()


def _decode_cursor(cursor: str) -> tuple[int, int, str]:
    try:
        ordinal, repeat, arm = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if not (isinstance(ordinal, int) and isinstance(repeat, int) and isinstance(arm, str)):
            raise ValueError
        return ordinal, repeat, arm
    except (ValueError, TypeError, json.JSONDecodeError):
        raise FieldError(422, ("query", "cursor"), "malformed cursor; pass next_cursor back unchanged", "bad_cursor") from None


@router.get("/{evaluation_id}/results", response_model=ResultsPage)
async def list_results(
    evaluation_id: uuid.UUID,
    limit: int = Query(100, ge=1, le=1000),
    cursor: str | None = Query(None, max_length=500),
    session: AsyncSession = Depends(db_session),
) -> ResultsPage:
    """Stored results in benchmark order (sample ordinal, repeat, arm), keyset-paginated."""
    await _get_evaluation(session, evaluation_id)
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
        nxt = _encode_cursor(last.sample_ordinal, last.repeat, last.arm)
    return ResultsPage(items=items, next_cursor=nxt)


@router.post("/{evaluation_id}/cancel", response_model=EvaluationView)
async def cancel_evaluation(
    evaluation_id: uuid.UUID, request: Request, session: AsyncSession = Depends(db_session)
) -> EvaluationView:
    """Cancel a pending or running evaluation: nothing more is dispatched, results already stored stay, results
    still in flight are discarded when they arrive (counted in ``progress.discarded``). An EvaluationCompleted
    with status ``cancelled`` is published. 409 when the evaluation has already finished."""
    ev = await session.scalar(select(Evaluation).where(Evaluation.id == evaluation_id).with_for_update())
    if ev is None:
        raise FieldError(404, ("path", "evaluation_id"), f"unknown evaluation {evaluation_id}", "unknown_evaluation")
    if ev.status not in ("pending", "running"):
        raise FieldError(409, ("path", "evaluation_id"), f"evaluation is already {ev.status}", "already_finished")
    ev.status = "cancelled"
    ev.error = "cancelled by request"
    ev.completed_at = datetime.now(UTC)
    add_to_outbox(
        session,
        EvaluationCompleted(evaluation_id=ev.id, tenant_id=ev.tenant_id, status=EvaluationStatus.cancelled,
                            summary=None, error=ev.error),
        ev.trace_context or {},
    )
    await session.commit()
    request.app.state.relay.kick()
    return await get_evaluation(evaluation_id, request, session)
