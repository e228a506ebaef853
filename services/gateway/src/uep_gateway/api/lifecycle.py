"""Stop and retry of evaluations; dead-letter records and their re-drive.

* ``POST /v1/evaluations/{id}/stop`` — pending, running or interrupted → ``stopped``: nothing more is
  dispatched (the scheduler dispatches only running evaluations), results already in flight are still
  stored and refresh the partial summary (the reporter), an EvaluationCompleted with status ``stopped`` and
  the partial summary at the stop is published. 409 (``not_stoppable``) from any other status.
* ``POST /v1/evaluations/{id}/retry`` — re-runs only the failed and unfinished items of an evaluation that is
  failed, stopped, interrupted, cancelled, budget_exhausted, or completed with failed items; finished results
  are never touched (see :mod:`uep_common.tables.lifecycle`). 409 naming the status otherwise
  (``not_retryable``), or ``nothing_to_retry``.
* ``GET /v1/dead-letters``, ``GET /v1/dead-letters/{id}``, ``POST /v1/dead-letters/{id}/redrive`` — the
  records the scheduler keeps from ``uep.dead-letter.v1``; a redrive re-publishes the original message
  (key, body, headers) to its source topic. For a SampleDispatched whose item ended failed, the failed
  result is first moved aside and the item's lease re-opened, so the re-driven item can be stored, and a
  lost re-drive is dispatched again when that lease expires. Consumers are idempotent, so a redrive is safe.

Every route sees only the caller's tenant's evaluations and dead letters: another tenant's id answers 404
with the body of an unknown one, and lists hold the caller's rows only (a dead letter without an
evaluation belongs to no tenant: only a site admin acting across tenants sees it).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel
from sqlalchemy import select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.events import SampleDispatched, Topics
from uep_common.records.reruns import reopen_item
from uep_common.runtime.messaging import UndecodableEvent, decode_event
from uep_common.tables.lifecycle import DeadLetter
from uep_common.tables.models import Evaluation
from uep_gateway.cursors import decode_time_id, encode_time_id
from uep_gateway.deps import db_session
from uep_gateway.errors import FieldError
from uep_gateway.schemas import EvaluationView
from uep_gateway.tenancy import owned, tenant_filter
from uep_gateway.usecases import lifecycle as usecase_lifecycle
from uep_gateway.usecases.evaluations import evaluation_view
from uep_gateway.validation import NUL_CHECK

router = APIRouter(tags=["lifecycle"], dependencies=NUL_CHECK)


@router.post("/v1/evaluations/{evaluation_id}/stop", response_model=EvaluationView)
async def stop_evaluation(
    evaluation_id: uuid.UUID, request: Request, session: AsyncSession = Depends(db_session)
) -> EvaluationView:
    """Stop an evaluation: nothing more is dispatched, results in flight are still stored, and it ends
    ``stopped`` with its partial summary. 404 unknown (or another tenant's); 409 when it is not pending,
    running or interrupted."""
    await usecase_lifecycle.stop(session, evaluation_id)
    request.app.state.relay.kick()
    return await evaluation_view(session, request.app.state.redis, evaluation_id)


class RetryView(BaseModel):
    """What ``POST …/retry`` re-opened, and the evaluation afterwards."""

    retry_id: uuid.UUID
    previous_status: str
    failed_items: int
    unfinished_items: int
    undispatched_items: int
    evaluation: EvaluationView


@router.post("/v1/evaluations/{evaluation_id}/retry", response_model=RetryView, status_code=202)
async def retry(evaluation_id: uuid.UUID, request: Request, session: AsyncSession = Depends(db_session)) -> RetryView:
    """Re-run the failed and unfinished items (never the finished ones): failed results are moved to
    ``retired_results``, their leases and those of unfinished items expire so the scheduler dispatches them
    again, counters are recounted, and the evaluation is ``running``. 404 unknown (or another tenant's); 409
    when its status does not allow a retry (pending/running) or nothing is left to re-run."""
    outcome = await usecase_lifecycle.retry(session, request.app.state.redis, evaluation_id)
    return RetryView(
        retry_id=outcome.retry_id,
        previous_status=outcome.previous_status,
        failed_items=outcome.failed,
        unfinished_items=outcome.unfinished,
        undispatched_items=outcome.undispatched,
        evaluation=await evaluation_view(session, request.app.state.redis, evaluation_id),
    )


# ----------------------------------------------------------------------------------------------- dead letters
class DeadLetterView(BaseModel):
    """One dead-letter record. ``body`` is the original message as text (invalid UTF-8 replaced)."""

    id: uuid.UUID
    source_topic: str
    reason: str
    event_type: str | None
    evaluation_id: uuid.UUID | None
    item_key: str | None
    body: str
    first_seen_at: datetime
    last_seen_at: datetime
    redrive_count: int
    last_redriven_at: datetime | None


class DeadLetterPage(BaseModel):
    """A page of dead letters, newest first; pass ``next_cursor`` back as ``cursor``."""

    items: list[DeadLetterView]
    next_cursor: str | None


def _view(d: DeadLetter) -> DeadLetterView:
    return DeadLetterView(
        id=d.id,
        source_topic=d.source_topic,
        reason=d.reason,
        event_type=d.event_type,
        evaluation_id=d.evaluation_id,
        item_key=d.item_key,
        body=d.body.decode("utf-8", "replace")[:20_000],
        first_seen_at=d.first_seen_at,
        last_seen_at=d.last_seen_at,
        redrive_count=d.redrive_count,
        last_redriven_at=d.last_redriven_at,
    )


@router.get("/v1/dead-letters", response_model=DeadLetterPage, tags=["dead letters"])
async def list_dead_letters(
    evaluation_id: uuid.UUID | None = Query(None, description="Only the dead letters of this evaluation."),
    source_topic: str | None = Query(None, max_length=200),
    limit: int = Query(50, ge=1, le=500),
    cursor: str | None = Query(None, max_length=500),
    session: AsyncSession = Depends(db_session),
) -> DeadLetterPage:
    """The caller's tenant's dead-letter records, newest first (keyset-paginated), optionally of one evaluation
    or source topic."""
    q = select(DeadLetter).where(tenant_filter(session, DeadLetter))
    if evaluation_id:
        q = q.where(DeadLetter.evaluation_id == evaluation_id)
    if source_topic:
        q = q.where(DeadLetter.source_topic == source_topic)
    if cursor:
        q = q.where(tuple_(DeadLetter.first_seen_at, DeadLetter.id) < tuple_(*decode_time_id(cursor)))
    rows = (await session.scalars(q.order_by(DeadLetter.first_seen_at.desc(), DeadLetter.id.desc()).limit(limit + 1))).all()
    nxt = None
    if len(rows) > limit:
        last = rows[limit - 1]
        nxt = encode_time_id(last.first_seen_at, last.id)
    return DeadLetterPage(items=[_view(d) for d in rows[:limit]], next_cursor=nxt)


async def _dead_letter(session: AsyncSession, dead_letter_id: uuid.UUID, lock: bool = False) -> DeadLetter:
    return await owned(session, DeadLetter, dead_letter_id, ("path", "dead_letter_id"), "dead letter", lock=lock)


@router.get("/v1/dead-letters/{dead_letter_id}", response_model=DeadLetterView, tags=["dead letters"])
async def get_dead_letter(dead_letter_id: uuid.UUID, session: AsyncSession = Depends(db_session)) -> DeadLetterView:
    """One dead-letter record. 404 when unknown or another tenant's."""
    return _view(await _dead_letter(session, dead_letter_id))


class RedriveView(BaseModel):
    """A redrive: the record afterwards, and whether an ended item was re-opened for it."""

    dead_letter: DeadLetterView
    republished_to: str
    reopened_item: bool


@router.post("/v1/dead-letters/{dead_letter_id}/redrive", response_model=RedriveView, status_code=202, tags=["dead letters"])
async def redrive(dead_letter_id: uuid.UUID, request: Request, session: AsyncSession = Depends(db_session)) -> RedriveView:
    """Re-publish the original message to its source topic. A SampleDispatched whose item ended failed is
    re-opened first (failed result moved aside, lease re-opened, evaluation running again) when its
    evaluation is the caller's tenant's. 404 unknown (or another tenant's);
    409 (``already_finished``) when the item already has a result without an error; 503 when the broker did
    not take the message (a re-opened item is then dispatched again when its lease expires)."""
    d = await _dead_letter(session, dead_letter_id, lock=True)
    reopened = False
    if d.source_topic == Topics.SAMPLE_DISPATCHED:
        try:
            decoded = decode_event(SampleDispatched, d.body)
            assert isinstance(decoded, SampleDispatched)  # decode_event validates the body as the class it is given
            event = decoded
        except UndecodableEvent:
            event = None
        if event is not None:
            ev = await session.scalar(
                select(Evaluation)
                .where(Evaluation.id == event.evaluation_id, tenant_filter(session, Evaluation))
                .with_for_update()
            )
            if ev is not None:
                lease_length = max(event.lease_expires_at - event.occurred_at, timedelta(seconds=30))
                reopened = await reopen_item(
                    session, ev, event.sample_id, event.repeat, event.arm, datetime.now(UTC) + lease_length
                )
                if not reopened:
                    raise FieldError(
                        "conflict",
                        ("path", "dead_letter_id"),
                        f"item {event.item_key()} already has a result without an error; it is never run again",
                        "already_finished",
                    )
                counts = (ev.completed_items, ev.error_items, ev.total_items, ev.id)
    d.redrive_count += 1
    d.last_redriven_at = datetime.now(UTC)
    await session.commit()
    if reopened:
        await usecase_lifecycle.mirror_progress(request.app.state.redis, counts[3], *counts[:3])
    headers = {k: str(v) for k, v in (d.headers or {}).items()}
    try:
        await request.app.state.broker.publish(d.body, topic=d.source_topic, key=d.key, headers=headers)
    except Exception as exc:
        raise FieldError(
            "unavailable", ("path", "dead_letter_id"), f"the broker did not take the message: {exc!r}"[:500], "broker_unavailable"
        ) from exc
    return RedriveView(dead_letter=_view(d), republished_to=d.source_topic, reopened_item=reopened)
