"""Rescoring: score an evaluation's stored outputs again with the current metric versions, without
calling the model; the replaced scores are kept in ``score_history`` and the rescore records what changed.
Only the caller's tenant's evaluations (and their rescores) are found: another tenant's answer 404."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Depends, Request, Response
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.events import RescoreRequested
from uep_common.runtime.outbox import add_to_outbox
from uep_common.runtime.telemetry import context_from_headers, current_trace_headers, tracer
from uep_common.tables.models import Rescore, SampleResult
from uep_gateway.deps import db_session
from uep_gateway.errors import FieldError
from uep_gateway.schemas import RescoreView
from uep_gateway.tenancy import tenant_filter
from uep_gateway.usecases.evaluations import owned_evaluation
from uep_gateway.validation import NUL_CHECK

router = APIRouter(prefix="/v1/evaluations", tags=["rescoring"], dependencies=NUL_CHECK)
_tracer = tracer("uep.gateway")


async def metric_versions(session: AsyncSession, evaluation_id: uuid.UUID) -> dict[str, list[str]]:
    """``{metric_name: [versions…]}`` of the scores currently stored for an evaluation."""
    rows = await session.execute(
        select(SampleResult.metric_name, SampleResult.metric_version)
        .where(SampleResult.evaluation_id == evaluation_id, SampleResult.metric_name.is_not(None))
        .distinct()
    )
    out: dict[str, list[str]] = {}
    for name, version in rows:
        # both written together from a ScoreComputed (str, str); rows with no score are filtered out above
        assert name is not None and version is not None
        out.setdefault(name, []).append(version)
    return {k: sorted(v) for k, v in sorted(out.items())}


def _view(r: Rescore) -> RescoreView:
    return RescoreView.model_validate(r, from_attributes=True)


@router.post("/{evaluation_id}/rescore", status_code=202, response_model=RescoreView)
async def request_rescore(
    evaluation_id: uuid.UUID, request: Request, response: Response, session: AsyncSession = Depends(db_session)
) -> RescoreView:
    """Start a rescore of a finished evaluation (202). 409 while the evaluation runs, while another rescore
    of it is pending, or when it has no stored output to score; 404 when the evaluation is unknown or
    another tenant's."""
    ev = await owned_evaluation(session, evaluation_id, lock=True)
    if ev.status not in ("completed", "failed"):
        raise FieldError(
            "conflict",
            ("path", "evaluation_id"),
            f"evaluation is {ev.status}; only a finished one can be rescored",
            "not_finished",
        )
    if await session.scalar(select(Rescore.id).where(Rescore.evaluation_id == ev.id, Rescore.status == "pending")):
        raise FieldError(
            "conflict", ("path", "evaluation_id"), "a rescore of this evaluation is already pending", "rescore_pending"
        )
    total = await session.scalar(
        select(func.count()).where(SampleResult.evaluation_id == ev.id, SampleResult.output.is_not(None))
    )
    if not total:
        raise FieldError(
            "conflict", ("path", "evaluation_id"), "the evaluation has no stored output to rescore", "nothing_to_rescore"
        )
    rescore = Rescore(
        id=uuid.uuid4(),
        evaluation_id=ev.id,
        status="pending",
        total_items=total,
        old_summary=ev.summary,
        old_metric_versions=await metric_versions(session, ev.id),
        new_metric_versions={},
    )
    with _tracer.start_as_current_span(
        "rescore", context=context_from_headers(ev.trace_context), attributes={"uep.rescore_id": str(rescore.id)}
    ):
        session.add(rescore)
        add_to_outbox(
            session,
            RescoreRequested(
                evaluation_id=ev.id,
                tenant_id=ev.tenant_id,
                rescore_id=rescore.id,
                benchmark_id=ev.benchmark_id,
                model_id=ev.model_id,
            ),
            current_trace_headers(),
        )
        await session.commit()
    request.app.state.relay.kick()
    response.headers["Location"] = f"/v1/evaluations/{ev.id}/rescores/{rescore.id}"
    return _view(rescore)


@router.get("/{evaluation_id}/rescores/{rescore_id}", response_model=RescoreView)
async def get_rescore(
    evaluation_id: uuid.UUID, rescore_id: uuid.UUID, session: AsyncSession = Depends(db_session)
) -> RescoreView:
    """A rescore's progress and, when completed, what changed. 404 naming ``evaluation_id`` when the
    evaluation is unknown or another tenant's, naming ``rescore_id`` when the rescore is not one of its."""
    await owned_evaluation(session, evaluation_id)
    r = await session.scalar(
        select(Rescore).where(Rescore.id == rescore_id, Rescore.evaluation_id == evaluation_id, tenant_filter(session, Rescore))
    )
    if r is None:
        raise FieldError(
            "not_found", ("path", "rescore_id"), f"unknown rescore {rescore_id} of evaluation {evaluation_id}", "unknown_rescore"
        )
    return _view(r)
