"""Handing items to annotators and taking their answers, safely under concurrency.

Next item (:func:`next_item`), in one transaction:

1. the annotator row is locked (``FOR UPDATE``), so one annotator's concurrent calls are serialised; an
   open assignment of theirs in this task (not submitted, not expired) is returned again (a page reload
   never skips an item);
2. candidate items are selected in hand-out order with ``FOR UPDATE SKIP LOCKED`` (concurrent annotators
   take different items instead of waiting): open items the annotator never held, and — unless gold —
   with ``submitted + open assignments < N``; when every such item is locked by another annotator's
   transaction (SKIP LOCKED then finds none, though items are left), the same query waits for the locks;
3. each locked candidate is checked again by a new statement (a fresh snapshot: another transaction may have
   assigned it between our snapshot and our lock) and the first that still qualifies is assigned.

Every writer of an item's assignments or annotations locks the item row first, so the count in step 3
is exact. Locks are ``FOR NO KEY UPDATE``: they exclude each other but not the ``FOR KEY SHARE`` locks that
foreign-key checks take when assignment and annotation rows are inserted (``FOR UPDATE`` would deadlock two
submissions that both inserted an annotation of the task and then lock the task row). An assignment not submitted within the task's ``assignment_ttl_seconds`` expires: its slot is
free for others, and a late submission is still accepted while the item is not complete. The unique
constraints (item, annotator) on assignments and on annotations make "never the same item twice to one
annotator" hold even against a bug here.

Submission (:func:`submit`) locks the item, stores the annotation, and when it is the N-th of a scored item
completes the item and stages its ScoreComputed in the outbox in the same transaction
(:mod:`uep_gateway.annotation.scores`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, ScalarSelect, and_, exists, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.tables.annotation import Annotation, AnnotationAssignment, AnnotationItem, AnnotationTask, Annotator
from uep_gateway.annotation.questions import gold_check, parse_questions, validate_answers
from uep_gateway.annotation.scores import stage_score
from uep_gateway.auth import Principal
from uep_gateway.errors import DomainError, FieldError

CANDIDATES_PER_ROUND = 8
ROUNDS = 6


def _missing(loc: tuple[Any, ...]) -> FieldError:
    return FieldError(
        "invalid", loc, "an annotator is required (X-UEP-Annotator header or annotator query parameter)", "missing_annotator"
    )


async def _by_ref(session: AsyncSession, tenant_id: uuid.UUID, ref: str) -> Annotator | None:
    """The annotator of ``tenant_id`` whose id or name is ``ref``."""
    try:
        as_id = uuid.UUID(ref)
    except ValueError:
        return await session.scalar(select(Annotator).where(Annotator.tenant_id == tenant_id, Annotator.name == ref))
    return await session.scalar(select(Annotator).where(Annotator.tenant_id == tenant_id, Annotator.id == as_id))


async def register_annotator(
    session: AsyncSession, tenant_id: uuid.UUID, name: str, user_id: uuid.UUID | None = None
) -> Annotator:
    """The annotator ``name`` of ``tenant_id``, registered when missing (concurrent registrations of one name
    make one row). ``user_id`` binds the row to a signed-in user when it has no user yet."""
    await session.execute(
        pg_insert(Annotator)
        .values(id=uuid.uuid4(), tenant_id=tenant_id, name=name, user_id=user_id)
        .on_conflict_do_nothing(constraint="uq_annotators_tenant_name")
    )
    a = await session.scalar(select(Annotator).where(Annotator.tenant_id == tenant_id, Annotator.name == name))
    assert a is not None  # inserted just above, or already there (ON CONFLICT DO NOTHING)
    if user_id is not None and a.user_id is None:
        a.user_id = user_id
        await session.flush()
    return a


async def resolve_annotator(
    session: AsyncSession,
    principal: Principal,
    ref: str | None,
    loc: tuple[Any, ...],
    create: bool = True,
    tenant_id: uuid.UUID | None = None,
) -> Annotator:
    """The annotator a call works as, always one of ``tenant_id`` (the task's tenant; default the caller's —
    they differ only for a site admin acting across tenants).

    - A signed-in user with the ``annotator`` role is the annotator named by its username (registered on
      first use, bound to the user); naming anyone else is 403 naming ``loc``.
    - A signed-in builder or admin is that annotator too unless ``ref`` names another of the tenant.
    - An API key must name one (``ref``: a name or an id). Unknown names are registered on first use when
      ``create`` and the key is a builder's or admin's; an ``annotator`` key names registered ones only.

    Raises:
        FieldError 422: no annotator given, or a name over 200 characters; 403: a signed-in annotator naming
            another; 404: unknown id or name (also one of another tenant).
    """
    tenant_id = tenant_id or principal.tenant.id
    ref = ref.strip() if ref else None
    if principal.kind == "user" and principal.user_id is not None:
        username = principal.name.removeprefix("user:")
        mine = await session.scalar(
            select(Annotator).where(Annotator.tenant_id == tenant_id, Annotator.user_id == principal.user_id)
        )
        if ref and not (mine is not None and ref in (mine.name, str(mine.id))) and ref != username:
            if not principal.at_least("builder"):
                raise FieldError(
                    "forbidden", loc, f"a signed-in annotator works as itself ({username!r}), not {ref!r}", "forbidden"
                )
            other = await _by_ref(session, tenant_id, ref)
            if other is None:
                raise FieldError("not_found", loc, f"unknown annotator {ref!r}", "unknown_annotator")
            return other
        return mine or await register_annotator(session, tenant_id, username, principal.user_id)
    if not ref:
        raise _missing(loc)
    if len(ref) > 200:
        raise FieldError("invalid", loc, "annotator names have at most 200 characters", "invalid_annotator")
    a = await _by_ref(session, tenant_id, ref)
    if a is not None:
        return a
    try:
        uuid.UUID(ref)
        is_id = True
    except ValueError:
        is_id = False
    if is_id or not create or not principal.at_least("builder"):
        raise FieldError("not_found", loc, f"unknown annotator {ref!r}", "unknown_annotator")
    return await register_annotator(session, tenant_id, ref)


@dataclass(frozen=True)
class AnnotatorQuality:
    """Gold accuracy of one annotator in one task. ``accuracy`` = correct / checked (None before any
    check); flagged when ``checked >= min_gold_answers`` and ``accuracy < quality_threshold``."""

    annotator_id: uuid.UUID
    name: str
    annotations: int
    gold_checked: int
    gold_correct: int
    accuracy: float | None
    flagged: bool


async def quality(session: AsyncSession, task: AnnotationTask) -> dict[uuid.UUID, AnnotatorQuality]:
    """Gold accuracy and flag of every annotator who submitted in ``task``."""
    rows = await session.execute(
        select(
            Annotation.annotator_id,
            Annotator.name,
            func.count(),
            func.sum(Annotation.gold_checked),
            func.sum(Annotation.gold_correct),
        )
        .join(Annotator, Annotator.id == Annotation.annotator_id)
        .where(Annotation.task_id == task.id)
        .group_by(Annotation.annotator_id, Annotator.name)
        .order_by(Annotator.name)
    )
    out = {}
    for annotator_id, name, n, checked, correct in rows.all():
        checked, correct = int(checked or 0), int(correct or 0)
        acc = correct / checked if checked else None
        flagged = checked >= task.min_gold_answers and acc is not None and acc < task.quality_threshold
        out[annotator_id] = AnnotatorQuality(annotator_id, name, int(n), checked, correct, acc, flagged)
    return out


async def progress(session: AsyncSession, task: AnnotationTask, annotator_id: uuid.UUID | None) -> dict[str, Any]:
    """``{completed_items, total_items, annotator_done, annotator_gold_done}`` of ``task``."""
    completed = await session.scalar(
        select(func.count()).where(AnnotationItem.task_id == task.id, AnnotationItem.status == "complete")
    )
    done = gold_done = 0
    if annotator_id is not None:
        row = (
            await session.execute(
                select(func.count(), func.count().filter(AnnotationItem.is_gold))
                .select_from(Annotation)
                .join(AnnotationItem, AnnotationItem.id == Annotation.item_id)
                .where(Annotation.task_id == task.id, Annotation.annotator_id == annotator_id)
            )
        ).one()
        done, gold_done = int(row[0]), int(row[1])
    return {
        "completed_items": int(completed or 0),
        "total_items": task.total_items,
        "annotator_done": done,
        "annotator_gold_done": gold_done,
    }


def _open_count(now: datetime) -> ScalarSelect[int]:
    """Correlated count of an item's open assignments (not submitted, not expired)."""
    return (
        select(func.count())
        .where(
            AnnotationAssignment.item_id == AnnotationItem.id,
            AnnotationAssignment.submitted_at.is_(None),
            AnnotationAssignment.expires_at > now,
        )
        .scalar_subquery()
    )


def _available(task: AnnotationTask, annotator_id: uuid.UUID, now: datetime) -> ColumnElement[bool]:
    held_by_me = exists().where(
        and_(AnnotationAssignment.item_id == AnnotationItem.id, AnnotationAssignment.annotator_id == annotator_id)
    )
    return and_(
        AnnotationItem.task_id == task.id,
        AnnotationItem.status == "open",
        ~held_by_me,
        AnnotationItem.is_gold | (AnnotationItem.submitted_count + _open_count(now) < task.annotations_per_item),
    )


async def _lock_candidates(
    session: AsyncSession, task: AnnotationTask, annotator_id: uuid.UUID, now: datetime, skip_locked: bool
) -> list[AnnotationItem]:
    """Up to CANDIDATES_PER_ROUND available items in hand-out order, locked ``FOR NO KEY UPDATE``; with
    ``skip_locked`` items locked by others are passed over, else waited for (always in hand-out order, so two
    waiters cannot deadlock each other)."""
    return list(
        await session.scalars(
            select(AnnotationItem)
            .where(_available(task, annotator_id, now))
            .order_by(AnnotationItem.position)
            .limit(CANDIDATES_PER_ROUND)
            .with_for_update(skip_locked=skip_locked, key_share=True, of=AnnotationItem)
        )
    )


async def next_item(
    session: AsyncSession, task: AnnotationTask, annotator: Annotator
) -> tuple[AnnotationAssignment, AnnotationItem] | None:
    """The annotator's open assignment in ``task``, or a new one on the next available item; None when
    nothing is left for them (task complete, or every remaining item is full or was theirs already).
    Must run inside a transaction (the caller commits)."""
    await session.execute(select(Annotator.id).where(Annotator.id == annotator.id).with_for_update(key_share=True))
    now = datetime.now(UTC)
    mine = (
        await session.execute(
            select(AnnotationAssignment, AnnotationItem)
            .join(AnnotationItem, AnnotationItem.id == AnnotationAssignment.item_id)
            .where(
                AnnotationAssignment.task_id == task.id,
                AnnotationAssignment.annotator_id == annotator.id,
                AnnotationAssignment.submitted_at.is_(None),
                AnnotationAssignment.expires_at > now,
                AnnotationItem.status == "open",
            )
            .order_by(AnnotationItem.position)
            .limit(1)
        )
    ).first()
    if mine is not None:
        return mine[0], mine[1]
    if task.status != "open":
        return None
    for _ in range(ROUNDS):
        candidates = await _lock_candidates(session, task, annotator.id, now, skip_locked=True)
        if not candidates:
            # SKIP LOCKED returns nothing both when nothing is left and when every remaining item is locked by
            # other annotators' transactions at this moment: wait for those locks to tell the two apart
            candidates = await _lock_candidates(session, task, annotator.id, now, skip_locked=False)
        if not candidates:
            return None
        now = datetime.now(UTC)
        for item in candidates:
            # a new statement sees every assignment committed before we locked the item
            still = await session.scalar(
                select(AnnotationItem.id).where(AnnotationItem.id == item.id, _available(task, annotator.id, now))
            )
            if still is None:
                continue
            a = AnnotationAssignment(
                id=uuid.uuid4(),
                task_id=task.id,
                item_id=item.id,
                annotator_id=annotator.id,
                assigned_at=now,
                expires_at=now + timedelta(seconds=task.assignment_ttl_seconds),
            )
            session.add(a)
            await session.flush()
            return a, item
    return None


async def submit(
    session: AsyncSession, task: AnnotationTask, annotator: Annotator, assignment_id: uuid.UUID, answers: dict[str, Any]
) -> tuple[Annotation, AnnotationItem]:
    """Store the annotator's answers to the item of ``assignment_id``; complete the item (and stage its
    ScoreComputed) when this is its N-th annotation. Must run inside a transaction (the caller commits).

    Raises:
        DomainError 422: answers invalid (each problem names the question).
        FieldError 404: the assignment is not this annotator's in this task; 409: already submitted, or the
            item was completed by others after this assignment expired.
    """
    questions = parse_questions(task.questions)
    clean, problems = validate_answers(questions, answers)
    if problems:
        raise DomainError("invalid", problems)
    a = await session.get(AnnotationAssignment, assignment_id)
    if a is None or a.task_id != task.id or a.annotator_id != annotator.id:
        raise FieldError(
            "not_found",
            ("body", "assignment_id"),
            f"no assignment {assignment_id} of this annotator in this task",
            "unknown_assignment",
        )
    item = await session.scalar(
        select(AnnotationItem)
        .where(AnnotationItem.id == a.item_id)
        .with_for_update(key_share=True)
        .execution_options(populate_existing=True)
    )
    assert item is not None  # annotation_assignments.item_id: a NOT NULL foreign key, ON DELETE CASCADE
    await session.refresh(a)
    if a.submitted_at is not None:
        raise FieldError("conflict", ("body", "assignment_id"), "this assignment was already submitted", "already_submitted")
    if item.status != "open":
        raise FieldError(
            "conflict",
            ("body", "assignment_id"),
            "the assignment expired and the item was completed by other annotators",
            "item_complete",
        )
    checked = correct = 0
    if item.is_gold:
        checked, correct = gold_check(questions, item.gold_answers or {}, clean, task.gold_rating_tolerance)
    now = datetime.now(UTC)
    ann = Annotation(
        task_id=task.id,
        item_id=item.id,
        annotator_id=annotator.id,
        assignment_id=a.id,
        answers=clean,
        gold_checked=checked,
        gold_correct=correct,
    )
    session.add(ann)
    a.submitted_at = now
    item.submitted_count += 1
    if not item.is_gold and item.submitted_count >= task.annotations_per_item:
        item.status = "complete"
        item.completed_at = now
        await session.flush()
        item.score_event_id = await stage_score(session, task, item, questions, await quality(session, task))
        # the task row lock orders concurrent completions: the last one counts with every other committed
        await session.execute(select(AnnotationTask.id).where(AnnotationTask.id == task.id).with_for_update(key_share=True))
        left = await session.scalar(
            select(func.count()).where(
                AnnotationItem.task_id == task.id, AnnotationItem.status == "open", AnnotationItem.is_gold.is_(False)
            )
        )
        if not left:
            await session.execute(
                update(AnnotationTask).where(AnnotationTask.id == task.id).values(status="completed", completed_at=now)
            )
    await session.flush()
    return ann, item
