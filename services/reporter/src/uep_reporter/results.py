"""Storing scores idempotently and summarising finished evaluations (PostgreSQL).

Results that arrive after an evaluation was cancelled are not stored; ``evaluations.discarded_items``
counts them. Results that arrive after a stop are stored, and refresh the stopped evaluation's partial summary.

Idempotency: ``sample_results`` is unique on (evaluation, sample, repeat, arm) and rows are inserted with
``ON CONFLICT DO NOTHING``; progress counters move only by the rows actually inserted, so a redelivered
or duplicated ScoreComputed changes nothing. The evaluation row is updated with one atomic
``UPDATE … RETURNING``, and the summary plus its EvaluationCompleted outbox row are written in the same
transaction as the last result, so an evaluation is completed exactly once.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import Table, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.analytics.summary import compute_summary
from uep_common.contract.events import EvaluationCompleted, EvaluationStatus, ScoreComputed
from uep_common.records import exhaustion
from uep_common.records.lifecycle import TERMINAL, Transition, end
from uep_common.tables.bulk import column_arrays, insert_from_arrays
from uep_common.tables.models import Evaluation, Rescore, SampleResult, ScoreHistory

REFRESHED_WHEN_LATE = (EvaluationStatus.stopped,)
"""Ended evaluations whose results still in flight at the end are stored: each refreshes the partial summary."""


@dataclass(frozen=True)
class Progress:
    """Durable progress of one evaluation after a batch: counts and whether this batch finished it."""

    evaluation_id: uuid.UUID
    completed: int
    errors: int
    total: int
    finished: EvaluationCompleted | None


def _row(ev: ScoreComputed) -> dict[str, Any]:
    return {
        "evaluation_id": ev.evaluation_id,
        "sample_id": ev.sample_id,
        "repeat": ev.repeat,
        "arm": ev.arm,
        "output": ev.output,
        "extracted": ev.extracted,
        "is_correct": ev.is_correct,
        "score": ev.score,
        "metric_name": ev.metric_name,
        "metric_version": ev.metric_version,
        "metrics": ev.metrics,
        "latency_ms": ev.latency_ms,
        "prompt_tokens": ev.prompt_tokens,
        "completion_tokens": ev.completion_tokens,
        "error": ev.error.model_dump() if ev.error else None,
        "prediction": ev.prediction.model_dump(mode="json", exclude_none=True) if ev.prediction else None,
        "transcript": ev.transcript.model_dump(mode="json", exclude_none=True) if ev.transcript else None,
        "trajectory": ev.trajectory.model_dump(mode="json") if ev.trajectory else None,
        "attempt": ev.attempt,
        "score_event_id": ev.event_id,
    }


_RESULTS = cast(Table, SampleResult.__table__)
_RESULT_COLUMNS = (
    "evaluation_id",
    "sample_id",
    "repeat",
    "arm",
    "output",
    "extracted",
    "is_correct",
    "score",
    "metric_name",
    "metric_version",
    "metrics",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "error",
    "prediction",
    "transcript",
    "trajectory",
    "attempt",
    "score_event_id",
)
_INSERT_RESULTS = (
    insert_from_arrays(_RESULTS, _RESULT_COLUMNS)
    .on_conflict_do_nothing(constraint="uq_sample_results_item")
    .returning(_RESULTS.c.evaluation_id, _RESULTS.c.error)
)
"""One short statement for every batch size (a column array each, :mod:`uep_common.tables.bulk`): psycopg caches
and prepares it, where a multi-row ``VALUES`` of a batch was converted and parsed anew on every run."""


@dataclass(frozen=True)
class StopLoss:
    """Stop an evaluation whose error rate exceeds ``max_error_rate`` once ``min_items`` results are in."""

    max_error_rate: float = 0.5
    min_items: int = 20

    def reason(self, completed: int, errors: int) -> str | None:
        """Why the evaluation must stop, or None."""
        if completed >= self.min_items and completed and errors / completed > self.max_error_rate:
            return (
                f"stop-loss: {errors} of {completed} items failed ({errors / completed:.0%} > "
                f"{self.max_error_rate:.0%} after at least {self.min_items} items)"
            )
        return None


async def store_scores(session: AsyncSession, events: list[ScoreComputed], stop_loss: StopLoss | None = None) -> list[Progress]:
    """Insert the results of ``events`` (first write wins) and advance their evaluations; an evaluation
    that trips ``stop_loss`` ends ``failed`` with the reason and its partial summary.

    Must run inside a transaction; returns the progress of each evaluation that gained a result.
    """
    if not events:
        return []
    # Lock the evaluations first (in id order, as every writer does), so a concurrent cancel either
    # happens before this batch (its results are discarded) or after it (they count as completed).
    statuses = dict(
        (
            await session.execute(
                select(Evaluation.id, Evaluation.status)
                .where(Evaluation.id.in_({e.evaluation_id for e in events}))
                .order_by(Evaluation.id)
                .with_for_update()
            )
        ).all()
    )
    cancelled = {evaluation_id for evaluation_id, status in statuses.items() if status == EvaluationStatus.cancelled}
    if cancelled:  # late results of a cancelled evaluation are discarded, and counted
        late: dict[uuid.UUID, int] = defaultdict(int)
        for e in events:
            if e.evaluation_id in cancelled:
                late[e.evaluation_id] += 1
        for evaluation_id, n in sorted(late.items()):
            await session.execute(
                update(Evaluation).where(Evaluation.id == evaluation_id).values(discarded_items=Evaluation.discarded_items + n)
            )
        events = [e for e in events if e.evaluation_id not in cancelled]
        if not events:
            return []
    inserted = (await session.execute(_INSERT_RESULTS, column_arrays([_row(e) for e in events], _RESULT_COLUMNS))).all()
    gained: dict[uuid.UUID, list[int]] = defaultdict(lambda: [0, 0])
    for evaluation_id, error in inserted:
        gained[evaluation_id][0] += 1
        gained[evaluation_id][1] += error is not None
    progress: list[Progress] = []
    for evaluation_id in sorted(gained):  # fixed lock order across concurrent reporters
        n, e = gained[evaluation_id]
        row = (
            await session.execute(
                update(Evaluation)
                .where(Evaluation.id == evaluation_id)
                .values(completed_items=Evaluation.completed_items + n, error_items=Evaluation.error_items + e)
                .returning(
                    Evaluation.completed_items,
                    Evaluation.error_items,
                    Evaluation.total_items,
                    Evaluation.status,
                )
            )
        ).first()
        if row is None:
            continue
        completed, errors, total, status = row
        finished = None
        stop = stop_loss.reason(completed, errors) if stop_loss and completed < total else None
        if status not in TERMINAL and (completed >= total or stop):
            finished = await finish_evaluation(session, evaluation_id, stop)
        elif status in REFRESHED_WHEN_LATE:
            summary = await compute_summary(session, evaluation_id)
            await session.execute(
                update(Evaluation).where(Evaluation.id == evaluation_id).values(summary=summary.model_dump(mode="json"))
            )
        progress.append(Progress(evaluation_id, completed, errors, total, finished))
    return progress


async def finish_evaluation(
    session: AsyncSession, evaluation_id: uuid.UUID, stop_reason: str | None = None
) -> EvaluationCompleted:
    """Decide the final status of the evaluation (locked by the caller) and end it with
    :func:`uep_common.records.lifecycle.end` (``finish``: summary, status, error, completed_at, EvaluationCompleted in
    the outbox). Returns the event.

    The status is ``completed``, or ``failed`` when every item errored (nothing could be scored) or when
    ``stop_reason`` (stop-loss) ends it early, or ``budget_exhausted`` when a budget cap stopped its dispatch
    (its ``total_items`` was shrunk to the items dispatched); the summary then covers the items stored so far.

    Raises:
        LookupError: unknown evaluation.
        uep_common.records.lifecycle.IllegalTransition: the evaluation has already ended.
    """
    summary = await compute_summary(session, evaluation_id)
    failed = stop_reason is not None or (summary.n > 0 and summary.errors == summary.n)
    error = stop_reason or (f"all {summary.n} items failed; see the results for each item's error" if failed else None)
    status = EvaluationStatus.failed if failed else EvaluationStatus.completed
    exhausted = None if stop_reason else await exhaustion.exhausted_reason(session, evaluation_id)
    if exhausted:  # a cap stopped dispatch (uep_common.records.budget); the items in flight then are all in
        status, error = EvaluationStatus.budget_exhausted, exhausted
    # the row was moved by Core updates in this transaction: load it as it is now
    ev = await session.get(Evaluation, evaluation_id, populate_existing=True)
    if ev is None:
        raise LookupError(evaluation_id)
    return await end(session, ev, Transition.finish, status, error, summary)


async def apply_rescores(session: AsyncSession, events: list[ScoreComputed]) -> list[uuid.UUID]:
    """Apply re-computed scores (``rescore_id`` set): the replaced score goes to ``score_history``, the
    result row takes the new one, and the rescore counts items done and flipped. A rescore event applied
    before (same ``rescore_id`` on the row) changes nothing. When the last item of a rescore is in, the
    evaluation's summary is recomputed and the rescore completed. Returns the rescores completed.

    Must run inside a transaction.
    """
    per_rescore: dict[uuid.UUID, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # done, flipped, +, -
    versions: dict[uuid.UUID, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for ev in events:
        row = await session.scalar(
            select(SampleResult)
            .where(
                SampleResult.evaluation_id == ev.evaluation_id,
                SampleResult.sample_id == ev.sample_id,
                SampleResult.repeat == ev.repeat,
                SampleResult.arm == ev.arm,
            )
            .with_for_update()
        )
        if row is None or row.rescore_id == ev.rescore_id:
            continue
        session.add(
            ScoreHistory(
                result_id=row.id,
                evaluation_id=row.evaluation_id,
                replaced_by_rescore_id=ev.rescore_id,
                metric_name=row.metric_name,
                metric_version=row.metric_version,
                is_correct=row.is_correct,
                score=row.score,
                extracted=row.extracted,
                metrics=row.metrics,
                error=row.error,
                scored_at=row.rescored_at or row.created_at,
            )
        )
        counts = per_rescore[ev.rescore_id]
        counts[0] += 1
        if row.is_correct != ev.is_correct:
            counts[1] += 1
            counts[2] += ev.is_correct is True
            counts[3] += row.is_correct is True
        versions[ev.rescore_id][ev.metric_name].add(ev.metric_version)
        row.is_correct, row.score, row.extracted = ev.is_correct, ev.score, ev.extracted
        row.metric_name, row.metric_version, row.metrics = ev.metric_name, ev.metric_version, ev.metrics
        row.error = ev.error.model_dump() if ev.error else None
        row.prediction = ev.prediction.model_dump(mode="json", exclude_none=True) if ev.prediction else None
        row.rescore_id, row.rescored_at = ev.rescore_id, func.now()
    await session.flush()
    completed: list[uuid.UUID] = []
    for rescore_id in sorted(per_rescore):
        done, flipped, plus, minus = per_rescore[rescore_id]
        r = await session.scalar(select(Rescore).where(Rescore.id == rescore_id).with_for_update())
        if r is None:
            continue
        r.done_items += done
        r.flipped_items += flipped
        r.to_correct += plus
        r.to_incorrect += minus
        merged = {k: set(v) for k, v in (r.new_metric_versions or {}).items()}
        for name, vs in versions[rescore_id].items():
            merged.setdefault(name, set()).update(vs)
        r.new_metric_versions = {k: sorted(v) for k, v in sorted(merged.items())}
        if r.done_items >= r.total_items and r.status == "pending":
            summary = await compute_summary(session, r.evaluation_id)
            r.new_summary = summary.model_dump(mode="json")
            r.status = "completed"
            r.completed_at = func.now()
            await session.execute(update(Evaluation).where(Evaluation.id == r.evaluation_id).values(summary=r.new_summary))
            completed.append(rescore_id)
    return completed
