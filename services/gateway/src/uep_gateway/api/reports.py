"""Reports (HTML, JSON, PDF), baselines and comparisons.

- ``POST /v1/evaluations/{id}/pin`` / ``DELETE …/pin``: make an evaluation the pinned baseline of its model
  name and benchmark slug (one per pair: pinning unpins the previous one) / unpin it.
- ``GET /v1/evaluations/{id}/compare?baseline=…``: paired comparison with a baseline (default: the pinned
  one, else the last completed one of the same model name and benchmark).
- ``POST /v1/evaluations/{id}/reports``: build a report now (202; the reporter writes it).
- ``GET /v1/evaluations/{id}/reports`` and ``…/reports/{report_id}``: report rows and their status.
- ``GET /v1/evaluations/{id}/report.html|json|pdf``: the newest ready report's file.

Every evaluation named (the one in the path, a baseline) must be the caller's tenant's, and pins are per
tenant: another tenant's evaluation answers 404 with the body of an unknown one.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import BaseModel, Field
from sqlalchemy import exists, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.analytics.comparison import (
    Comparison,
    NotComparableError,
    check_comparable,
    compare,
    find_baseline,
    no_baseline_reason,
)
from uep_common.contract.events import ReportRequested
from uep_common.records.lifecycle import TERMINAL
from uep_common.runtime.artifacts import ArtifactStore, artifact_store
from uep_common.runtime.outbox import add_to_outbox
from uep_common.tables.models import Benchmark, Evaluation, Model, SampleResult
from uep_common.tables.reports import Artifact
from uep_common.tables.reports import Report as ReportRow
from uep_gateway.deps import db_session
from uep_gateway.errors import FieldError
from uep_gateway.tenancy import tenant_filter
from uep_gateway.usecases.evaluations import owned_evaluation
from uep_gateway.validation import NUL_CHECK

router = APIRouter(prefix="/v1/evaluations", tags=["reports"], dependencies=NUL_CHECK)

MEDIA = {"html": "text/html; charset=utf-8", "json": "application/json", "pdf": "application/pdf"}


class PinView(BaseModel):
    """An evaluation pinned as (or unpinned from) the baseline of its model name and benchmark slug."""

    evaluation_id: uuid.UUID
    pinned: bool
    model_name: str
    benchmark_slug: str
    unpinned: list[uuid.UUID] = Field(default_factory=list, description="Evaluations that were the pinned baseline before.")


class ReportRequest(BaseModel):
    """A request to build a report now; without ``baseline``, the pinned or the previous evaluation is the baseline."""

    baseline: uuid.UUID | None = Field(None, description="Compare with this evaluation instead of the default baseline.")


class ReportView(BaseModel):
    """A report of an evaluation: its status (pending, ready, failed), what triggered it (``completed`` or
    ``request``), the files written (``formats``), why the PDF or the whole report failed, the build time of
    each stage in milliseconds (``build_ms``) and the API paths of the report and its files (``links``)."""

    id: uuid.UUID
    evaluation_id: uuid.UUID
    status: str
    trigger: str
    schema_version: str | None
    baseline_evaluation_id: uuid.UUID | None
    formats: list[str]
    pdf_error: str | None
    error: str | None
    build_ms: dict[str, Any]
    created_at: datetime
    completed_at: datetime | None
    links: dict[str, str]


async def _evaluation(session: AsyncSession, evaluation_id: uuid.UUID, lock: bool = False) -> Evaluation:
    return await owned_evaluation(session, evaluation_id, lock=lock)


async def _names(session: AsyncSession, ev: Evaluation) -> tuple[str, str]:
    model_name = await session.scalar(select(Model.name).where(Model.id == ev.model_id))
    slug = await session.scalar(select(Benchmark.slug).where(Benchmark.id == ev.benchmark_id))
    # evaluations.model_id and .benchmark_id: NOT NULL foreign keys (no ON DELETE)
    assert model_name is not None and slug is not None
    return model_name, slug


async def _comparable(session: AsyncSession, ev: Evaluation, baseline: Evaluation, loc: tuple[str, ...]) -> None:
    """Raise 422 ``other_benchmark`` naming ``loc`` when ``baseline`` ran another benchmark than ``ev`` (another
    slug; another version of the same benchmark is comparable: :func:`uep_common.analytics.comparison.check_comparable`)."""
    try:
        await check_comparable(session, ev, baseline)
    except NotComparableError as exc:
        raise FieldError("invalid", loc, str(exc), exc.reason) from exc


@router.post("/{evaluation_id}/pin", response_model=PinView)
async def pin(evaluation_id: uuid.UUID, session: AsyncSession = Depends(db_session)) -> PinView:
    """Pin a completed evaluation as the baseline of its (model name, benchmark slug) in its tenant; the
    previous pin of that pair in the tenant is removed in the same transaction. 404 when unknown or another
    tenant's; 409 when the evaluation is not completed."""
    ev = await _evaluation(session, evaluation_id, lock=True)
    if ev.status != "completed":
        raise FieldError(
            "conflict",
            ("path", "evaluation_id"),
            f"evaluation is {ev.status}; only a completed one can be a baseline",
            "not_completed",
        )
    model_name, slug = await _names(session, ev)
    # one pin per tenant and pair, also under concurrent pins of two evaluations of the same pair
    lock_key = f"uep-pin:{ev.tenant_id}:{model_name}:{slug}"
    await session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": lock_key})
    others = (
        await session.scalars(
            update(Evaluation)
            .where(
                Evaluation.tenant_id == ev.tenant_id,
                Evaluation.pinned.is_(True),
                Evaluation.id != ev.id,
                Evaluation.model_id.in_(select(Model.id).where(Model.name == model_name)),
                Evaluation.benchmark_id.in_(select(Benchmark.id).where(Benchmark.slug == slug)),
            )
            .values(pinned=False)
            .returning(Evaluation.id)
        )
    ).all()
    ev.pinned = True
    await session.commit()
    return PinView(evaluation_id=ev.id, pinned=True, model_name=model_name, benchmark_slug=slug, unpinned=sorted(others))


@router.delete("/{evaluation_id}/pin", response_model=PinView)
async def unpin(evaluation_id: uuid.UUID, session: AsyncSession = Depends(db_session)) -> PinView:
    """Remove the pin of an evaluation (no-op when it is not pinned). 404 when unknown or another tenant's."""
    ev = await _evaluation(session, evaluation_id, lock=True)
    model_name, slug = await _names(session, ev)
    ev.pinned = False
    await session.commit()
    return PinView(evaluation_id=ev.id, pinned=False, model_name=model_name, benchmark_slug=slug)


@router.get("/{evaluation_id}/compare", response_model=Comparison)
async def compare_with_baseline(
    evaluation_id: uuid.UUID,
    baseline: uuid.UUID | None = Query(
        None,
        description="Baseline evaluation; default: pinned, else the last earlier completed one on the same items (else the one sharing the most).",
    ),
    limit: int = Query(1000, ge=1, le=100_000, description="Most transitions listed (counts cover every item)."),
    include_unchanged: bool = Query(False, description="Also list items whose outcome did not change."),
    session: AsyncSession = Depends(db_session),
) -> Comparison:
    """Paired comparison: 2×2 table, exact McNemar test, paired bootstrap of the accuracy (and continuous
    score) difference, per-item transitions (regressions first) and the fingerprint diff. 422
    ``other_benchmark`` naming ``baseline`` when the baseline ran another benchmark (another version of the same
    benchmark is compared on the items the versions share); 409 when no baseline exists; 404 naming ``evaluation_id`` / ``baseline`` when that evaluation is unknown or another
    tenant's; 409 ``no_results`` naming ``evaluation_id`` (or ``baseline``) when that evaluation has no scored
    result yet (e.g. a judged one before its first verdict)."""
    ev = await _evaluation(session, evaluation_id)
    if baseline is not None:
        if baseline == evaluation_id:
            raise FieldError("invalid", ("query", "baseline"), "the baseline must be another evaluation", "same_evaluation")
        await _comparable(session, ev, await owned_evaluation(session, baseline, ("query", "baseline")), ("query", "baseline"))
        reason = "requested"
    else:
        found, found_reason = await find_baseline(session, ev)
        if found is None:
            reason_text = await no_baseline_reason(session, ev)
            raise FieldError("conflict", ("query", "baseline"), f"{reason_text} (?baseline=, or pin one)", "no_baseline")
        assert found_reason is not None  # find_baseline names the reason of every baseline it finds
        baseline, reason = found.id, found_reason
    for eid, loc in ((evaluation_id, ("path", "evaluation_id")), (baseline, ("query", "baseline"))):
        if not await session.scalar(select(exists().where(SampleResult.evaluation_id == eid, SampleResult.score.is_not(None)))):
            raise FieldError(
                "conflict",
                loc,
                f"evaluation {eid} has no scored results yet (none stored, or only errors): nothing "
                "to compare; try again once its first items are scored",
                "no_results",
            )
    return await compare(session, evaluation_id, baseline, reason, limit=limit, include_unchanged=include_unchanged)


def _report_view(row: ReportRow) -> ReportView:
    formats = [f for f, a in (("html", row.html_artifact_id), ("json", row.json_artifact_id), ("pdf", row.pdf_artifact_id)) if a]
    base = f"/v1/evaluations/{row.evaluation_id}"
    return ReportView(
        id=row.id,
        evaluation_id=row.evaluation_id,
        status=row.status,
        trigger=row.trigger,
        schema_version=row.schema_version,
        baseline_evaluation_id=row.baseline_evaluation_id,
        formats=formats,
        pdf_error=row.pdf_error,
        error=row.error,
        build_ms=row.build_ms or {},
        created_at=row.created_at,
        completed_at=row.completed_at,
        links={"self": f"{base}/reports/{row.id}", **{f: f"{base}/report.{f}?report_id={row.id}" for f in formats}},
    )


@router.post("/{evaluation_id}/reports", status_code=202, response_model=ReportView)
async def request_report(
    evaluation_id: uuid.UUID,
    request: Request,
    response: Response,
    body: ReportRequest | None = None,
    session: AsyncSession = Depends(db_session),
) -> ReportView:
    """Build a report of an ended evaluation now (202 with the pending report; poll its ``self`` link).
    409 while the evaluation runs; 404 naming ``evaluation_id`` / ``baseline`` when that evaluation is unknown
    or another tenant's; 422 ``other_benchmark`` naming ``baseline`` when it ran another benchmark."""
    ev = await _evaluation(session, evaluation_id)
    if ev.status not in TERMINAL:
        raise FieldError(
            "conflict",
            ("path", "evaluation_id"),
            f"evaluation is {ev.status}; a report needs an ended evaluation",
            "not_finished",
        )
    baseline = body.baseline if body else None
    if baseline is not None:
        if baseline == evaluation_id:
            raise FieldError("invalid", ("body", "baseline"), "the baseline must be another evaluation", "same_evaluation")
        await _comparable(session, ev, await owned_evaluation(session, baseline, ("body", "baseline")), ("body", "baseline"))
    row = ReportRow(
        id=uuid.uuid4(), evaluation_id=ev.id, status="pending", trigger="request", baseline_evaluation_id=baseline, build_ms={}
    )
    session.add(row)
    add_to_outbox(
        session,
        ReportRequested(evaluation_id=ev.id, tenant_id=ev.tenant_id, report_id=row.id, baseline_evaluation_id=baseline),
        ev.trace_context or {},
    )
    await session.commit()
    await session.refresh(row)
    request.app.state.relay.kick()
    response.headers["Location"] = f"/v1/evaluations/{ev.id}/reports/{row.id}"
    return _report_view(row)


@router.get("/{evaluation_id}/reports", response_model=list[ReportView])
async def list_reports(evaluation_id: uuid.UUID, session: AsyncSession = Depends(db_session)) -> list[ReportView]:
    """Reports of an evaluation, newest first. 404 when the evaluation is unknown or another tenant's."""
    await _evaluation(session, evaluation_id)
    rows = await session.scalars(
        select(ReportRow)
        .where(ReportRow.evaluation_id == evaluation_id, tenant_filter(session, ReportRow))
        .order_by(ReportRow.created_at.desc())
    )
    return [_report_view(r) for r in rows]


@router.get("/{evaluation_id}/reports/{report_id}", response_model=ReportView)
async def get_report(evaluation_id: uuid.UUID, report_id: uuid.UUID, session: AsyncSession = Depends(db_session)) -> ReportView:
    """One report's status and links. 404 naming ``evaluation_id`` when the evaluation is unknown or another
    tenant's, naming ``report_id`` when the report is not one of its."""
    await _evaluation(session, evaluation_id)
    row = await session.scalar(
        select(ReportRow).where(
            ReportRow.id == report_id, ReportRow.evaluation_id == evaluation_id, tenant_filter(session, ReportRow)
        )
    )
    if row is None:
        raise FieldError(
            "not_found", ("path", "report_id"), f"unknown report {report_id} of evaluation {evaluation_id}", "unknown_report"
        )
    return _report_view(row)


@router.get(
    "/{evaluation_id}/report.{fmt}", response_class=Response, responses={200: {"content": {m: {} for m in MEDIA.values()}}}
)
async def report_file(
    evaluation_id: uuid.UUID,
    fmt: Literal["html", "json", "pdf"],
    request: Request,
    report_id: uuid.UUID | None = Query(None, description="A specific report; default: the newest ready one."),
    session: AsyncSession = Depends(db_session),
) -> Response:
    """The file of the newest ready report (or ``report_id``). 404 ``no_report`` when none is ready yet,
    ``no_pdf`` when Chromium could not render the PDF (the reason is given); 410 when retention deleted it;
    404 naming ``evaluation_id`` when the evaluation is unknown or another tenant's."""
    await _evaluation(session, evaluation_id)
    q = select(ReportRow).where(
        ReportRow.evaluation_id == evaluation_id, ReportRow.status == "ready", tenant_filter(session, ReportRow)
    )
    if report_id is not None:
        q = q.where(ReportRow.id == report_id)
    row = await session.scalar(q.order_by(ReportRow.completed_at.desc().nulls_last(), ReportRow.created_at.desc()).limit(1))
    if row is None:
        pending = await session.scalar(
            select(func.count()).where(ReportRow.evaluation_id == evaluation_id, ReportRow.status == "pending")
        )
        msg = (
            "the report is being written; retry shortly"
            if pending
            else "no report yet (POST /v1/evaluations/{id}/reports builds one)"
        )
        raise FieldError("not_found", ("path", "evaluation_id"), msg, "no_report")
    artifact_id = {"html": row.html_artifact_id, "json": row.json_artifact_id, "pdf": row.pdf_artifact_id}[fmt]
    if artifact_id is None:
        if fmt == "pdf":
            raise FieldError("not_found", ("path", "fmt"), f"this report has no PDF: {row.pdf_error or 'not rendered'}", "no_pdf")
        raise FieldError("gone", ("path", "fmt"), f"the {fmt} file of this report was deleted by retention", "artifact_deleted")
    artifact = await session.get(Artifact, artifact_id)
    data = await asyncio.to_thread(_store(request).read, artifact) if artifact else None
    if artifact is None or data is None:
        raise FieldError("gone", ("path", "fmt"), f"the {fmt} file of this report is gone", "artifact_deleted")
    headers = {"ETag": f'"{artifact.sha256}"', "X-UEP-Report-Id": str(row.id)}
    if fmt == "pdf":
        headers["Content-Disposition"] = f'inline; filename="report-{evaluation_id}.pdf"'
    return Response(data, media_type=MEDIA[fmt], headers=headers)


def _store(request: Request) -> ArtifactStore:
    """The app's artifact store (made on first use from the settings and the environment)."""
    store: ArtifactStore | None = getattr(request.app.state, "artifact_store", None)
    if store is None:
        store = request.app.state.artifact_store = artifact_store(request.app.state.settings)
    return store
