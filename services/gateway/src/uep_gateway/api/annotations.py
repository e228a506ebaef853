"""Human evaluation: annotators, annotation tasks, next item, submissions, results, agreement, and the
annotation page (``GET /annotate/{task_id}``).

Everything here belongs to one tenant: annotators (``annotators.tenant_id``), tasks and what hangs off them
(items, assignments, annotations). A task of another tenant is 404 naming ``path.task_id``, as an unknown
one is.

Who annotates (:func:`uep_gateway.annotation.assignment.resolve_annotator`): a signed-in user works as the
annotator named by its username (registered on first use, bound to the user); an API key names a registered
annotator of its own tenant by the ``X-UEP-Annotator`` header or the ``annotator`` query parameter (a name
or an id; a builder's or admin's key registers a new name on first use).
"""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.tables.annotation import Annotation, AnnotationItem, AnnotationTask, Annotator
from uep_common.tables.models import Evaluation
from uep_gateway.annotation import analysis
from uep_gateway.annotation.assignment import next_item, progress, quality, register_annotator, resolve_annotator, submit
from uep_gateway.annotation.calibration import record_calibration
from uep_gateway.annotation.questions import aggregate, parse_questions
from uep_gateway.annotation.schemas import (
    AnnotationAccepted,
    AnnotationSubmit,
    AnnotationTaskCreate,
    AnnotationTaskView,
    AnnotatorCreate,
    AnnotatorView,
    NextItem,
    TaskProgress,
)
from uep_gateway.annotation.tasks import create_task
from uep_gateway.deps import db_session
from uep_gateway.errors import FieldError
from uep_gateway.tenancy import caller_tenant_id, owned, principal_of_session, tenant_filter
from uep_gateway.validation import INT32_MAX, NUL_CHECK

router = APIRouter(tags=["human evaluation"], dependencies=NUL_CHECK)
ANNOTATOR_HEADER = "X-UEP-Annotator"
_pages = Environment(
    loader=FileSystemLoader(Path(__file__).resolve().parents[1] / "annotation" / "templates"),
    autoescape=select_autoescape(["html"]),
)


def _annotator_ref(query: str | None, header: str | None) -> tuple[str | None, tuple[Any, ...]]:
    if query:
        return query, ("query", "annotator")
    return header, ("header", ANNOTATOR_HEADER)


async def _task(session: AsyncSession, task_id: uuid.UUID) -> AnnotationTask:
    """The caller's task ``task_id``; 404 naming ``path.task_id`` otherwise (also for another tenant's)."""
    task = await session.scalar(
        select(AnnotationTask).where(AnnotationTask.id == task_id, tenant_filter(session, AnnotationTask))
    )
    if task is None:
        raise FieldError("not_found", ("path", "task_id"), f"unknown annotation task {task_id}", "unknown_task")
    return task


async def _task_view(session: AsyncSession, task: AnnotationTask) -> AnnotationTaskView:
    p = await progress(session, task, None)
    n = await session.scalar(select(func.count()).where(Annotation.task_id == task.id))
    base = f"/v1/annotation-tasks/{task.id}"
    links = {
        "self": base,
        "next": f"{base}/next",
        "results": f"{base}/results",
        "agreement": f"{base}/agreement",
        "judge_agreement": f"{base}/judge-agreement",
        "annotators": f"{base}/annotators",
        "page": f"/annotate/{task.id}",
    }
    if task.result_evaluation_id:
        links["evaluation"] = f"/v1/evaluations/{task.result_evaluation_id}"
    return AnnotationTaskView(
        **{k: getattr(task, k) for k in AnnotationTaskView.model_fields if k not in ("completed_items", "annotations", "links")},
        completed_items=p["completed_items"],
        annotations=int(n or 0),
        links=links,
    )


def _annotator_view(a: Annotator) -> AnnotatorView:
    return AnnotatorView(id=a.id, name=a.name, created_at=a.created_at)


@router.post("/v1/annotators", response_model=AnnotatorView, status_code=201)
async def create_annotator(
    body: AnnotatorCreate, response: Response, session: AsyncSession = Depends(db_session)
) -> AnnotatorView:
    """Register an annotator of the caller's tenant by name (201), or return the tenant's existing one of that
    name (200). Names are unique within a tenant."""
    name = body.name.strip()
    if not name:
        raise FieldError("invalid", ("body", "name"), "an annotator name is required", "missing_annotator")
    tenant_id = caller_tenant_id(session)
    existing = await session.scalar(select(Annotator).where(Annotator.tenant_id == tenant_id, Annotator.name == name))
    if existing is not None:
        response.status_code = 200
        return _annotator_view(existing)
    a = await register_annotator(session, tenant_id, name)
    await session.commit()
    return _annotator_view(a)


@router.get("/v1/annotators", response_model=list[AnnotatorView])
async def list_annotators(session: AsyncSession = Depends(db_session)) -> list[AnnotatorView]:
    """The annotators of the caller's tenant, by name."""
    q = select(Annotator).where(tenant_filter(session, Annotator)).order_by(Annotator.name)
    return [_annotator_view(a) for a in await session.scalars(q)]


@router.post("/v1/annotation-tasks", response_model=AnnotationTaskView, status_code=201)
async def create_annotation_task(
    body: AnnotationTaskCreate, response: Response, session: AsyncSession = Depends(db_session)
) -> AnnotationTaskView:
    """Create a task from an evaluation's stored outputs (``source`` 'evaluation': a new evaluation row of
    type human receives the scores, see ``result_evaluation_id``) or from the items a hybrid evaluation
    routed to humans (``source`` 'hybrid'). Gold items are given by sample ordinal and repeat with their
    known answers. Nothing is stored when a check fails (422 naming the field)."""
    task = await create_task(session, body)
    await session.commit()
    response.headers["Location"] = f"/v1/annotation-tasks/{task.id}"
    return await _task_view(session, task)


@router.get("/v1/annotation-tasks", response_model=list[AnnotationTaskView])
async def list_annotation_tasks(
    evaluation_id: uuid.UUID | None = Query(None, description="Tasks whose source or result is this evaluation."),
    session: AsyncSession = Depends(db_session),
) -> list[AnnotationTaskView]:
    """The caller's tenant's annotation tasks, newest first. An ``evaluation_id`` of another tenant (or an
    unknown one) is 404 naming it."""
    q = select(AnnotationTask).where(tenant_filter(session, AnnotationTask)).order_by(AnnotationTask.created_at.desc())
    if evaluation_id:
        await owned(session, Evaluation, evaluation_id, ("query", "evaluation_id"), "evaluation")
        q = q.where(
            (AnnotationTask.source_evaluation_id == evaluation_id) | (AnnotationTask.result_evaluation_id == evaluation_id)
        )
    return [await _task_view(session, t) for t in await session.scalars(q.limit(200))]


@router.get("/v1/annotation-tasks/{task_id}", response_model=AnnotationTaskView)
async def get_annotation_task(task_id: uuid.UUID, session: AsyncSession = Depends(db_session)) -> AnnotationTaskView:
    """A task with its progress (complete scored items out of total, annotations submitted)."""
    return await _task_view(session, await _task(session, task_id))


def _item_body(item: AnnotationItem) -> dict[str, Any]:
    c = item.content or {}
    return {
        "id": item.id,
        "sample_ordinal": item.sample_ordinal,
        "repeat": item.repeat,
        "arm": item.arm,
        "prompt": c.get("prompt"),
        "output": c.get("output"),
        "output_b": c.get("output_b"),
        "reference": c.get("reference"),
    }


@router.get("/v1/annotation-tasks/{task_id}/next", response_model=NextItem)
async def get_next_item(
    task_id: uuid.UUID,
    annotator: str | None = Query(None, max_length=200, description="Annotator name or id (or the X-UEP-Annotator header)."),
    annotator_header: str | None = Header(None, alias=ANNOTATOR_HEADER, max_length=200),
    session: AsyncSession = Depends(db_session),
) -> NextItem:
    """The annotator's next item, in one call: their open assignment, else a new assignment of the next
    item that still needs annotations and that they never had (``item`` null when none is left). The
    assignment expires after the task's ``assignment_ttl_seconds``."""
    task = await _task(session, task_id)
    ref, loc = _annotator_ref(annotator, annotator_header)
    who = await resolve_annotator(session, principal_of_session(session), ref, loc, tenant_id=task.tenant_id)
    got = await next_item(session, task, who)
    await session.commit()
    p = TaskProgress(**await progress(session, task, who.id))
    if got is None:
        reason = "task_completed" if p.completed_items >= task.total_items else "nothing_left_for_annotator"
        return NextItem(
            task_id=task.id,
            annotator=_annotator_view(who),
            assignment_id=None,
            expires_at=None,
            item=None,
            reason=reason,
            progress=p,
        )
    a, item = got
    return NextItem(
        task_id=task.id,
        annotator=_annotator_view(who),
        assignment_id=a.id,
        expires_at=a.expires_at,
        item=_item_body(item),
        progress=p,
    )


@router.post("/v1/annotation-tasks/{task_id}/annotations", response_model=AnnotationAccepted, status_code=201)
async def submit_annotation(
    task_id: uuid.UUID,
    body: AnnotationSubmit,
    request: Request,
    annotator: str | None = Query(None, max_length=200),
    annotator_header: str | None = Header(None, alias=ANNOTATOR_HEADER, max_length=200),
    session: AsyncSession = Depends(db_session),
) -> AnnotationAccepted:
    """Submit the answers of an assignment (question name → answer). The N-th annotation of a scored item
    completes it; its ScoreComputed is written to the outbox in the same transaction."""
    task = await _task(session, task_id)
    ref, loc = _annotator_ref(annotator, annotator_header)
    who = await resolve_annotator(session, principal_of_session(session), ref, loc, create=False, tenant_id=task.tenant_id)
    ann, item = await submit(session, task, who, body.assignment_id, body.answers)
    if (
        item.status == "complete"
        and await session.scalar(select(AnnotationTask.status).where(AnnotationTask.id == task.id)) == "completed"
    ):
        await record_calibration(session, task)  # the task's last item: the judges' calibration, in its transaction
    await session.commit()
    if item.score_event_id is not None:
        request.app.state.relay.kick()
    return AnnotationAccepted(
        annotation_id=ann.id,
        item_id=item.id,
        item_complete=item.status == "complete",
        score_event_id=item.score_event_id,
        progress=TaskProgress(**await progress(session, task, who.id)),
    )


@router.get("/v1/annotation-tasks/{task_id}/annotators")
async def task_annotators(task_id: uuid.UUID, session: AsyncSession = Depends(db_session)) -> dict[str, Any]:
    """Each annotator's annotations, gold accuracy (correct / checked gold answers) and flag (accuracy under
    ``quality_threshold`` after at least ``min_gold_answers`` gold answers)."""
    task = await _task(session, task_id)
    qual = await quality(session, task)
    return {
        "quality_threshold": task.quality_threshold,
        "min_gold_answers": task.min_gold_answers,
        "annotators": [
            {
                "id": str(q.annotator_id),
                "name": q.name,
                "annotations": q.annotations,
                "gold_checked": q.gold_checked,
                "gold_correct": q.gold_correct,
                "accuracy": q.accuracy,
                "flagged": q.flagged,
            }
            for q in qual.values()
        ],
    }


@router.get("/v1/annotation-tasks/{task_id}/agreement")
async def task_agreement(
    task_id: uuid.UUID,
    exclude_flagged: bool = Query(False, description="Leave out the answers of flagged annotators."),
    session: AsyncSession = Depends(db_session),
) -> dict[str, Any]:
    """Krippendorff's alpha per question: interval for ratings, nominal for pass/fail and pairwise; null
    with a ``reason`` when undefined (no item with two answers, or no variation)."""
    return await analysis.task_agreement(session, await _task(session, task_id), exclude_flagged)


@router.get("/v1/annotation-tasks/{task_id}/judge-agreement")
async def task_judge_agreement(
    task_id: uuid.UUID,
    exclude_flagged: bool = Query(False),
    session: AsyncSession = Depends(db_session),
) -> dict[str, Any]:
    """Judge–human agreement per judge model and template version, per question (items the judge service
    also judged: see ``judge_verdicts``)."""
    return await analysis.judge_agreement(session, await _task(session, task_id), exclude_flagged)


@router.post("/v1/annotation-tasks/{task_id}/calibration", status_code=201)
async def record_task_calibration(task_id: uuid.UUID, session: AsyncSession = Depends(db_session)) -> dict[str, Any]:
    """Record the judges' calibration on the task now (also done when its last item completes): per judge
    and question, the agreement with the annotators (flagged annotators left out) as a new snapshot of the
    judge's calibration history (``GET /v1/judges``). ``calibrations`` is empty when no judge verdict covers
    the task's items."""
    task = await _task(session, task_id)
    rows = await record_calibration(session, task)
    keys = ("id", "judge_model_name", "template", "template_version", "question", "question_type", "items", "agreement", "alpha")
    out = {
        "task_id": str(task.id),
        "computed_at": rows[0].computed_at if rows else None,
        "calibrations": [{**{k: getattr(r, k) for k in keys}, "statistics": r.statistics} for r in rows],
    }
    await session.commit()
    return out


def _cursor(position: int) -> str:
    return base64.urlsafe_b64encode(json.dumps([position]).encode()).decode()


def _position(cursor: str) -> int:
    try:
        (position,) = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        if type(position) is not int or not -INT32_MAX <= position <= INT32_MAX:  # annotation_items.position is INTEGER
            raise ValueError
        return position
    except (ValueError, TypeError, json.JSONDecodeError):
        raise FieldError(
            "invalid", ("query", "cursor"), "malformed cursor; pass next_cursor back unchanged", "bad_cursor"
        ) from None


@router.get("/v1/annotation-tasks/{task_id}/results")
async def task_results(
    task_id: uuid.UUID,
    exclude_flagged: bool = Query(False, description="Leave out the answers of flagged annotators."),
    include_gold: bool = Query(True),
    limit: int = Query(100, ge=1, le=1000),
    cursor: str | None = Query(None, max_length=200),
    session: AsyncSession = Depends(db_session),
) -> dict[str, Any]:
    """Per item, in hand-out order: status, every answer (annotator, flagged) and the aggregate per question
    (rating mean, pass rate and majority, A win rate and majority, comments)."""
    task = await _task(session, task_id)
    questions = parse_questions(task.questions)
    q = select(AnnotationItem).where(AnnotationItem.task_id == task.id).order_by(AnnotationItem.position).limit(limit + 1)
    if not include_gold:
        q = q.where(AnnotationItem.is_gold.is_(False))
    if cursor:
        q = q.where(AnnotationItem.position > _position(cursor))
    items = list(await session.scalars(q))
    page = items[:limit]
    by_item, _ = await analysis.load_answers(session, task, exclude_flagged, page)
    out = []
    for it in page:
        rows = by_item.get(it.id, [])
        out.append(
            {
                **_item_body(it),
                "is_gold": it.is_gold,
                "gold_answers": it.gold_answers,
                "status": it.status,
                "submitted_count": it.submitted_count,
                "score_event_id": it.score_event_id,
                "answers": [
                    {"annotator": aq.name, "flagged": aq.flagged, "answers": a.answers, "created_at": a.created_at}
                    for a, aq in rows
                ],
                "aggregate": aggregate(questions, [a.answers for a, _ in rows]),
            }
        )
    return {
        "exclude_flagged": exclude_flagged,
        "items": out,
        "next_cursor": _cursor(page[-1].position) if len(items) > limit else None,
    }


@router.get("/annotate/{task_id}", response_class=HTMLResponse, include_in_schema=False)
async def annotation_page(task_id: uuid.UUID, session: AsyncSession = Depends(db_session)) -> HTMLResponse:
    """The annotation page of one of the caller's tasks: one item at a time, keyboard shortcuts, progress;
    talks to the API above with the browser's session cookie (writes echo the ``uep_csrf`` cookie in
    ``X-CSRF-Token``). The signed-in user annotates as itself; a builder or admin may add ``?annotator=``
    to work as another annotator of the tenant. No external resources (works without a CDN)."""
    task = await _task(session, task_id)
    html = _pages.get_template("annotate.html").render(
        task_id=str(task.id),
        task_name=task.name,
        guidelines=task.guidelines,
        questions=task.questions,
        total_items=task.total_items,
    )
    return HTMLResponse(html)
