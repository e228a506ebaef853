"""The evaluation lifecycle: its statuses, the transitions allowed between them, and what each one does.

Every change of ``evaluations.status`` is made by a function of this module, inside the caller's transaction
and on a row the caller locked (``SELECT … FOR UPDATE``, :func:`uep_common.tables.lifecycle.lock_evaluation`).
A transition asked from a status its rule does not list raises :class:`IllegalTransition`, a
:class:`~uep_common.tables.lifecycle.LifecycleConflict` (the gateway answers 409 with its ``kind``).

Statuses are :class:`uep_common.contract.events.EvaluationStatus`. :data:`TERMINAL` statuses are *ended*: nothing is
dispatched and the reporter completes them no more; only an explicit retry or a redrive moves one back to
``running``. The table (:data:`TRANSITIONS`)::

    transition  from                                   to                                   called by
    admit       pending                                running                              scheduler, allocation pass
    cancel      pending, running                       cancelled                            gateway, POST …/cancel
    stop        pending, running, interrupted          stopped                              gateway, POST …/stop
    finish      pending, running, interrupted          completed, failed, budget_exhausted  reporter (last result,
                                                                                            stop-loss), budget hook
    interrupt   running                                interrupted                          scheduler start-up alone
    retry       failed, stopped, interrupted,          running                              gateway, POST …/retry
                cancelled, budget_exhausted, completed
    reopen      every status but pending and running   running                              gateway, dead-letter redrive

What each does to leases, counters, the summary and events is in its :class:`Rule`. Initial statuses are not
transitions: a new evaluation is ``pending`` (:func:`uep_common.records.creation.new_evaluation`), the result
evaluation of a human annotation task is born ``running``. Relays are kicked by the callers after commit.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from sqlalchemy import func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.attributes import set_committed_value

from uep_common.analytics.summary import compute_summary
from uep_common.contract.configs import EvaluationType
from uep_common.contract.events import EvaluationCompleted, EvaluationStatus, EvaluationSummary
from uep_common.runtime.outbox import add_to_outbox
from uep_common.tables.lifecycle import LifecycleConflict, lock_evaluation, recount
from uep_common.tables.models import Evaluation

S = EvaluationStatus

TERMINAL: tuple[EvaluationStatus, ...] = (S.completed, S.failed, S.cancelled, S.stopped, S.budget_exhausted)
"""Ended statuses (see the module docstring); the only definition of the set."""
UNFINISHED: tuple[EvaluationStatus, ...] = tuple(s for s in S if s not in TERMINAL)
"""``pending``, ``running``, ``interrupted``: every status that is not :data:`TERMINAL`."""


class Transition(StrEnum):
    """The named moves between statuses (rows of :data:`TRANSITIONS`)."""

    admit = "admit"
    cancel = "cancel"
    stop = "stop"
    finish = "finish"
    interrupt = "interrupt"
    retry = "retry"
    reopen = "reopen"


@dataclass(frozen=True)
class Rule:
    """One transition: the statuses it starts from (in the order refusals name them), those it may end in, the
    refusal (``kind`` and message, formatted with ``status`` and ``allowed``), and its effects.

    ``event``: whether it stages an EvaluationCompleted in the outbox. ``leases``, ``counters``, ``summary``:
    what it does to the evaluation's leases, its ``completed_items``/``error_items`` and its ``summary``.
    """

    sources: tuple[EvaluationStatus, ...]
    targets: tuple[EvaluationStatus, ...]
    kind: str
    message: str
    event: bool
    leases: str
    counters: str
    summary: str


TRANSITIONS: MappingProxyType[Transition, Rule] = MappingProxyType(
    {
        Transition.admit: Rule(
            sources=(S.pending,),
            targets=(S.running,),
            kind="not_pending",
            message="evaluation is {status}; only {allowed} evaluations can be admitted",
            event=False,
            leases="none yet: the admitting allocation pass leases its first items",
            counters="unchanged",
            summary="unchanged (none)",
        ),
        Transition.cancel: Rule(
            sources=(S.pending, S.running),
            targets=(S.cancelled,),
            kind="already_finished",
            message="evaluation is already {status}",
            event=True,
            leases="kept until they expire; nothing more is dispatched, results in flight are discarded (counted)",
            counters="unchanged; late results go to discarded_items",
            summary="unchanged; the event carries none",
        ),
        Transition.stop: Rule(
            sources=(S.pending, S.running, S.interrupted),
            targets=(S.stopped,),
            kind="not_stoppable",
            message="evaluation is {status}; only {allowed} evaluations can be stopped",
            event=True,
            leases="kept until they expire; nothing more is dispatched, results in flight are stored",
            counters="unchanged; late results still count",
            summary="partial, now; refreshed by each late result",
        ),
        Transition.finish: Rule(
            sources=(S.pending, S.running, S.interrupted),
            targets=(S.completed, S.failed, S.budget_exhausted),
            kind="already_finished",
            message="evaluation is already {status}",
            event=True,
            leases="released by the scores that ended it; no new ones",
            counters="unchanged (they ended it)",
            summary="final (partial for stop-loss and budget_exhausted)",
        ),
        Transition.interrupt: Rule(
            sources=(S.running,),
            targets=(S.interrupted,),
            kind="not_running",
            message="evaluation is {status}; only {allowed} evaluations can be interrupted",
            event=False,
            leases="kept; a retry sets them expired",
            counters="recounted from the stored rows",
            summary="partial",
        ),
        Transition.retry: Rule(
            sources=(S.failed, S.stopped, S.interrupted, S.cancelled, S.budget_exhausted, S.completed),
            targets=(S.running,),
            kind="not_retryable",
            message="evaluation is {status}; only {allowed} evaluations can be retried",
            event=False,
            leases="of failed and unfinished items set expired (attempt_base = attempt): dispatched again",
            counters="recounted after failed results are moved to retired_results",
            summary="cleared (with error and completed_at)",
        ),
        Transition.reopen: Rule(
            sources=(*TERMINAL, S.interrupted),
            targets=(S.running,),
            kind="not_reopenable",
            message="evaluation is {status}; only {allowed} evaluations can be re-opened",
            event=False,
            leases="the redriven item's lease re-opened until the redriven message's deadline",
            counters="recounted after the item's failed result is moved to retired_results",
            summary="cleared (with error and completed_at)",
        ),
    }
)
"""The transition table: the only place that says which status may follow which."""

RETRYABLE = TRANSITIONS[Transition.retry].sources
"""Statuses ``POST …/retry`` starts from (``completed`` only with failed items; never pending/running)."""
STOPPABLE = TRANSITIONS[Transition.stop].sources
"""Statuses ``POST …/stop`` accepts."""


class IllegalTransition(LifecycleConflict):
    """``transition`` (to ``target``) is not allowed from ``status``; ``kind`` is the rule's machine-readable
    refusal, the message names the status and the statuses allowed."""

    def __init__(self, transition: Transition, status: str, target: str | None = None) -> None:
        rule = TRANSITIONS[transition]
        if status in rule.sources:  # the start is fine: the target is not one of this transition's
            message = f"{transition} cannot end an evaluation {target}; only {', '.join(rule.targets)}"
        else:
            message = rule.message.format(status=status, allowed=", ".join(rule.sources))
        super().__init__(message, rule.kind)
        self.transition, self.status, self.target = transition, status, target


def allowed(status: str, transition: Transition, target: str | None = None) -> bool:
    """Whether ``transition`` may start from ``status`` (and end in ``target``, when given)."""
    rule = TRANSITIONS[transition]
    return status in rule.sources and (target is None or target in rule.targets)


def check(status: str, transition: Transition, target: str | None = None) -> None:
    """Raise :class:`IllegalTransition` unless :func:`allowed`."""
    if not allowed(status, transition, target):
        raise IllegalTransition(transition, status, target)


def _single_target(transition: Transition) -> EvaluationStatus:
    (target,) = TRANSITIONS[transition].targets
    return target


_ADMIT_SQL = text(
    "WITH asked AS (SELECT id, experiment_id FROM evaluations WHERE id = ANY(CAST(:ids AS uuid[]))), "
    "locked AS (SELECT e.id, e.status FROM evaluations e WHERE e.id IN (SELECT id FROM asked) "
    "           OR e.experiment_id IN (SELECT experiment_id FROM asked WHERE experiment_id IS NOT NULL) "
    "           ORDER BY e.id FOR UPDATE), "
    "moved AS (UPDATE evaluations SET status = :target, started_at = :now, updated_at = now() "
    "          FROM locked WHERE evaluations.id = locked.id AND locked.status = :source RETURNING evaluations.id) "
    "SELECT l.id FROM locked l WHERE l.id = ANY(CAST(:ids AS uuid[])) "
    "AND (l.status = :target OR l.id IN (SELECT id FROM moved))"
)


async def admit(session: AsyncSession, evaluation_ids: list[uuid.UUID]) -> list[uuid.UUID]:
    """``admit``: pending → running (idempotent), in one statement; ``started_at`` is set. Returns those of
    ``evaluation_ids`` that are running afterwards (admitted now or before), in their order.

    The arms of an A/B experiment are admitted together (every pending arm of its ``experiment_id``), so item
    ``i`` of every arm goes out in the same allocation pass. The rows are locked in id order, as every other
    multi-row lock of ``evaluations`` is, so admission cannot deadlock with a cancel or another pass. Statuses
    other than pending are left as they are (not an error: admission is asked again and again).
    """
    if not evaluation_ids:
        return []
    rule = TRANSITIONS[Transition.admit]
    (source,), target = rule.sources, _single_target(Transition.admit)
    rows = await session.execute(
        _ADMIT_SQL,
        {"ids": [str(i) for i in evaluation_ids], "now": datetime.now(UTC), "source": source.value, "target": target.value},
    )
    running = {r[0] for r in rows}
    return [i for i in evaluation_ids if i in running]


async def end(
    session: AsyncSession,
    ev: Evaluation,
    transition: Transition,
    status: EvaluationStatus,
    error: str | None,
    summary: EvaluationSummary | None,
) -> EvaluationCompleted:
    """``cancel``, ``stop`` or ``finish`` the locked ``ev``: ``status``, ``error`` and ``completed_at`` (now,
    UTC) are set, ``summary`` is written when given (a cancel passes None and keeps the stored one), and the
    EvaluationCompleted (same status, summary and error) is staged in the outbox with the evaluation's trace
    context. Returns the event; the caller kicks its relay after commit.

    Raises:
        IllegalTransition: ``transition`` does not allow ``ev.status`` → ``status``.
    """
    check(ev.status, transition, status)
    if not TRANSITIONS[transition].event:
        raise ValueError(f"{transition} does not end an evaluation")
    values: dict[str, Any] = {"status": status.value, "error": error, "completed_at": datetime.now(UTC)}
    if summary is not None:
        values["summary"] = summary.model_dump(mode="json")
    # One UPDATE now (pending changes of ``ev`` are flushed first), mirrored on ``ev`` as its committed state:
    # the row is written the same way whether the caller loaded it through the ORM for other changes or only
    # to end it.
    await session.execute(update(Evaluation).where(Evaluation.id == ev.id).values(**values))
    for name, value in values.items():
        set_committed_value(ev, name, value)
    event = EvaluationCompleted(evaluation_id=ev.id, tenant_id=ev.tenant_id, status=status, summary=summary, error=error)
    add_to_outbox(session, event, ev.trace_context or {})
    return event


def resume(ev: Evaluation, transition: Transition) -> None:
    """``retry`` or ``reopen`` the locked ``ev``: ``running`` again, with ``error``, ``summary`` and
    ``completed_at`` cleared and ``resumed_at`` now (``started_at`` too if it never started). What the
    transition does to results, leases and counters is done by its caller (:mod:`uep_common.tables.lifecycle`).

    Raises:
        IllegalTransition: ``ev.status`` is not one of the transition's sources.
    """
    check(ev.status, transition)
    if transition not in (Transition.retry, Transition.reopen):
        raise ValueError(f"{transition} does not resume an evaluation")
    now = datetime.now(UTC)
    ev.status, ev.error, ev.summary, ev.completed_at = _single_target(transition).value, None, None, None
    ev.resumed_at = now
    if ev.started_at is None:
        ev.started_at = now


async def interrupt_running(session: AsyncSession, started_before: datetime) -> list[uuid.UUID]:
    """``interrupt`` every evaluation ``running`` since before ``started_before`` (its ``resumed_at`` or
    ``started_at``): counters recounted from the stored rows, a partial summary, the reason in ``error``.
    Evaluations admitted or retried after ``started_before`` and human evaluations (driven by annotators, not
    by the scheduler) are left alone. Returns the ids interrupted, in id order."""
    source = TRANSITIONS[Transition.interrupt].sources[0]
    ids = list(
        await session.scalars(
            select(Evaluation.id)
            .where(
                Evaluation.status == source.value, func.coalesce(Evaluation.resumed_at, Evaluation.started_at) < started_before
            )
            .where(
                func.coalesce(Evaluation.config["evaluation_type"].astext, EvaluationType.automatic.value)
                != EvaluationType.human.value
            )
            .order_by(Evaluation.id)
        )
    )
    done: list[uuid.UUID] = []
    for evaluation_id in ids:
        ev = await lock_evaluation(session, evaluation_id)
        if ev is None or not allowed(ev.status, Transition.interrupt):
            continue
        await recount(session, ev)
        ev.status = _single_target(Transition.interrupt).value
        ev.error = (
            "interrupted: the scheduler restarted while this evaluation was running; "
            f"POST /v1/evaluations/{ev.id}/retry resumes it"
        )
        ev.summary = (await compute_summary(session, ev.id)).model_dump(mode="json")
        done.append(ev.id)
    return done
