"""uep_common.records.lifecycle: the transition table (each allowed move, the refused ones and their 409 kinds), the
single TERMINAL set, and what ending and resuming do to an evaluation row and the outbox (no database)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest

from uep_common.contract.events import EvaluationStatus, EvaluationSummary
from uep_common.records import lifecycle
from uep_common.records.lifecycle import TERMINAL, TRANSITIONS, UNFINISHED, IllegalTransition, Transition
from uep_common.tables.lifecycle import LifecycleConflict
from uep_common.tables.models import EVALUATION_STATUSES, Evaluation, OutboxMessage

S = EvaluationStatus

EXPECTED = {
    Transition.admit: ((S.pending,), (S.running,), "not_pending", False),
    Transition.cancel: ((S.pending, S.running), (S.cancelled,), "already_finished", True),
    Transition.stop: ((S.pending, S.running, S.interrupted), (S.stopped,), "not_stoppable", True),
    Transition.finish: (
        (S.pending, S.running, S.interrupted),
        (S.completed, S.failed, S.budget_exhausted),
        "already_finished",
        True,
    ),
    Transition.interrupt: ((S.running,), (S.interrupted,), "not_running", False),
    Transition.retry: (
        (S.failed, S.stopped, S.interrupted, S.cancelled, S.budget_exhausted, S.completed),
        (S.running,),
        "not_retryable",
        False,
    ),
    Transition.reopen: (
        (S.completed, S.failed, S.cancelled, S.stopped, S.budget_exhausted, S.interrupted),
        (S.running,),
        "not_reopenable",
        False,
    ),
}


def test_the_table_is_exactly_the_documented_one():
    assert set(TRANSITIONS) == set(Transition)
    for transition, (sources, targets, kind, event) in EXPECTED.items():
        rule = TRANSITIONS[transition]
        assert (rule.sources, rule.targets, rule.kind, rule.event) == (sources, targets, kind, event), transition
        assert rule.leases and rule.counters and rule.summary  # every effect is stated


def test_terminal_and_unfinished_partition_the_statuses():
    assert (S.completed, S.failed, S.cancelled, S.stopped, S.budget_exhausted) == TERMINAL
    assert (S.pending, S.running, S.interrupted) == UNFINISHED
    assert set(TERMINAL) | set(UNFINISHED) == set(S) and not set(TERMINAL) & set(UNFINISHED)
    assert tuple(s.value for s in S) == EVALUATION_STATUSES  # the check constraint lists the same statuses
    assert (S.pending, S.running, S.interrupted) == lifecycle.STOPPABLE
    assert (S.failed, S.stopped, S.interrupted, S.cancelled, S.budget_exhausted, S.completed) == lifecycle.RETRYABLE


@pytest.mark.parametrize(
    ("transition", "status", "target"),
    [(t, s, d) for t, (sources, targets, _k, _e) in EXPECTED.items() for s in sources for d in targets],
)
def test_each_allowed_transition(transition, status, target):
    assert lifecycle.allowed(status, transition, target)
    assert lifecycle.allowed(status.value, transition)  # plain strings, as read from the database
    lifecycle.check(status.value, transition, target.value)


@pytest.mark.parametrize(
    ("transition", "status"),
    [(t, s) for t, (sources, _d, _k, _e) in EXPECTED.items() for s in S if s not in sources],
)
def test_each_refused_transition_raises_a_conflict_with_the_rules_kind(transition, status):
    assert not lifecycle.allowed(status, transition)
    with pytest.raises(IllegalTransition) as info:
        lifecycle.check(status.value, transition)
    assert isinstance(info.value, LifecycleConflict) and info.value.kind == EXPECTED[transition][2]
    assert (info.value.transition, info.value.status) == (transition, status)


def test_a_terminal_status_only_goes_back_to_running_by_retry_or_reopen():
    back_to_running = {t for t, rule in TRANSITIONS.items() if S.running in rule.targets}
    assert back_to_running == {Transition.admit, Transition.retry, Transition.reopen}
    for status in TERMINAL:
        assert not lifecycle.allowed(status, Transition.admit)
        assert not lifecycle.allowed(status, Transition.interrupt)
        for ending in (Transition.cancel, Transition.stop, Transition.finish):  # ended once, never twice
            assert not lifecycle.allowed(status, ending)
    assert not lifecycle.allowed(S.pending, Transition.retry) and not lifecycle.allowed(S.running, Transition.retry)


def test_a_transition_cannot_end_in_another_transitions_status():
    assert not lifecycle.allowed(S.running, Transition.cancel, S.stopped)
    assert not lifecycle.allowed(S.running, Transition.finish, S.cancelled)
    with pytest.raises(IllegalTransition) as info:
        lifecycle.check(S.running, Transition.finish, S.running)
    assert str(info.value) == "finish cannot end an evaluation running; only completed, failed, budget_exhausted"


def test_refusal_messages_name_the_status_and_what_is_allowed():
    messages = {t: str(IllegalTransition(t, "completed")) for t in (Transition.cancel, Transition.stop, Transition.admit)}
    assert messages == {
        Transition.cancel: "evaluation is already completed",
        Transition.stop: "evaluation is completed; only pending, running, interrupted evaluations can be stopped",
        Transition.admit: "evaluation is completed; only pending evaluations can be admitted",
    }
    assert str(IllegalTransition(Transition.retry, "running")) == (
        "evaluation is running; only failed, stopped, interrupted, cancelled, budget_exhausted, completed "
        "evaluations can be retried"
    )


class _Session:
    """Collects the statements executed and what :func:`uep_common.runtime.outbox.add_to_outbox` adds."""

    def __init__(self) -> None:
        self.added: list[object] = []
        self.updates: list[dict] = []

    def add(self, row: object) -> None:
        self.added.append(row)

    async def execute(self, statement) -> None:
        self.updates.append(statement.compile().params)


def _evaluation(status: str, **extra) -> Evaluation:
    return Evaluation(id=uuid.uuid4(), tenant_id=uuid.uuid4(), status=status, trace_context={}, **extra)


def test_end_sets_status_error_summary_and_stages_evaluation_completed():
    session, ev = _Session(), _evaluation("running", summary=None)
    summary = EvaluationSummary(
        n=3, scored=2, correct=2, errors=1, accuracy=1.0, ci_low=0.34, ci_high=1.0, latency_ms_p50=10.0,
        latency_ms_p90=12.0, prompt_tokens=30, completion_tokens=6, metric_name="exact_match",
    )  # fmt: skip
    before = datetime.now(UTC)
    event = asyncio.run(lifecycle.end(session, ev, Transition.stop, S.stopped, "stopped by request", summary))
    assert (ev.status, ev.error, ev.summary) == ("stopped", "stopped by request", summary.model_dump(mode="json"))
    assert ev.completed_at >= before
    (written,) = session.updates  # one UPDATE of the row, with the values mirrored on ``ev``
    assert (written["status"], written["error"], written["summary"]) == ("stopped", "stopped by request", ev.summary)
    assert written["id_1"] == ev.id and written["completed_at"] == ev.completed_at
    (row,) = session.added
    assert isinstance(row, OutboxMessage) and row.event_type == "EvaluationCompleted" and row.key == str(ev.id).encode()
    assert (event.status, event.error, event.summary, event.evaluation_id) == (S.stopped, "stopped by request", summary, ev.id)
    assert row.payload["status"] == "stopped" and row.payload["summary"]["n"] == 3


def test_cancel_keeps_the_stored_summary_and_an_ended_evaluation_cannot_end_again():
    session, ev = _Session(), _evaluation("pending", summary={"n": 1})
    event = asyncio.run(lifecycle.end(session, ev, Transition.cancel, S.cancelled, "cancelled by request", None))
    assert (ev.status, ev.summary, event.summary) == ("cancelled", {"n": 1}, None)
    assert "summary" not in session.updates[0] and session.updates[0]["status"] == "cancelled"
    with pytest.raises(IllegalTransition) as info:
        asyncio.run(lifecycle.end(session, ev, Transition.cancel, S.cancelled, "again", None))
    assert info.value.kind == "already_finished" and ev.error == "cancelled by request" and len(session.added) == 1


def test_resume_clears_the_end_and_stamps_resumed_at():
    started = datetime(2024, 1, 1, tzinfo=UTC)
    ev = _evaluation("failed", error="all 2 items failed", summary={"n": 2}, completed_at=started, started_at=started)
    lifecycle.resume(ev, Transition.retry)
    assert (ev.status, ev.error, ev.summary, ev.completed_at, ev.started_at) == ("running", None, None, None, started)
    assert ev.resumed_at > started
    never_started = _evaluation("cancelled", started_at=None)
    lifecycle.resume(never_started, Transition.reopen)
    assert never_started.status == "running" and never_started.started_at == never_started.resumed_at
    with pytest.raises(IllegalTransition):
        lifecycle.resume(_evaluation("running"), Transition.retry)
