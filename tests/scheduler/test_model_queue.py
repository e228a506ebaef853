"""Items kept queued at inference (uep_scheduler.capacity: queue_depth, CallTimes, the model and evaluation
bounds), the rules and then allocation passes on a real PostgreSQL.

Expected values follow queue_depth's docstring: ceil(slots × model_queue_seconds / call time), at most
MAX_QUEUE_PER_SLOT (64) per slot — e.g. 1 slot, 20 ms calls, 0.5 s → 25 items; 2 slots, 50 ms, 0.5 s → 20.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from uep_common.contract.events import ErrorInfo, ScoreComputed
from uep_common.tables.models import Evaluation, SampleLease
from uep_scheduler.allocation import allocate
from uep_scheduler.capacity import MAX_QUEUE_PER_SLOT, CallTimes, queue_depth

from .test_allocation import in_flight, release_random, run_pass, settings


def _score(model_id: uuid.UUID, latency_ms: float | None, error: str | None = None) -> ScoreComputed:
    return ScoreComputed(
        evaluation_id=uuid.uuid4(),
        tenant_id=uuid.uuid4(),
        sample_id=uuid.uuid4(),
        benchmark_id=uuid.uuid4(),
        model_id=model_id,
        metric_name="exact_match",
        metric_version="1",
        is_correct=None if error else True,
        score=None if error else 1.0,
        output=None if error else "x",
        latency_ms=latency_ms,
        error=ErrorInfo(stage="inference", type=error, message="x") if error else None,
    )


@pytest.mark.parametrize(
    ("slots", "call_s", "queue_s", "expected"),
    [
        (1, 0.02, 0.5, 25),  # 0.5 s of 20 ms calls
        (4, 0.02, 0.5, 100),
        (4, 1.0, 0.5, 2),  # slow calls: two more than the slots
        (1, 3.0, 0.5, 1),  # at least one item waits while the call runs
        (1, 0.0001, 0.5, MAX_QUEUE_PER_SLOT),  # capped per slot
        (2.5, 0.0001, 0.5, 160),  # an adaptive (fractional) limit: ceil(2.5 × 64)
        (4, None, 0.5, 0),  # no call time known yet: no queue
        (4, 0.02, 0.0, 0),  # switched off
    ],
)
def test_queue_depth(slots, call_s, queue_s, expected):
    assert queue_depth(slots, call_s, queue_s) == expected


def test_call_times_average_successful_calls_only():
    model, other = uuid.uuid4(), uuid.uuid4()
    times = CallTimes()
    assert times.get(model) is None
    times.observe([_score(model, 100.0)])
    assert times.get(model) == pytest.approx(0.1)  # the first call is the estimate
    times.observe([_score(model, 200.0), _score(model, 1.0, "timeout"), _score(model, None), _score(other, 50.0)])
    assert times.get(model) == pytest.approx(0.1 + 0.1 * (0.2 - 0.1))  # weight 0.1; the error and None skipped
    assert times.as_dict() == {model: pytest.approx(0.11), other: pytest.approx(0.05)}


async def _pass(sm, cfg, calls):
    async with sm() as s, s.begin():
        return await allocate(s, cfg, now=datetime.now(UTC), call_seconds=calls)


async def test_a_model_with_a_known_call_time_gets_its_queue_and_one_evaluation_may_fill_it(sm, world):
    tenant, bench = await world.tenant("t"), await world.benchmark(200)
    model = await world.model(2)
    ev = await world.evaluation(tenant, bench, model, 200)  # no max_parallel: the scheduler's default 16
    cfg = settings(max_in_flight_global=100, model_queue_seconds=0.5)

    await run_pass(sm, cfg, datetime.now(UTC))
    assert await in_flight(sm, model_id=model) == 2  # no call time yet: the slots only

    await _pass(sm, cfg, {model: 0.05})
    # 2 slots + ceil(2 × 0.5 / 0.05) = 22 queued: above the per-evaluation default of 16, since that default
    # gives way to the model's bound (an evaluation alone keeps its model busy)
    assert await in_flight(sm, id=ev) == 22

    explicit = await world.evaluation(tenant, await world.benchmark(50), model, 50, max_parallel=3)
    await release_random(sm, 22, random.Random(1))
    await _pass(sm, cfg, {model: 0.05})
    assert await in_flight(sm, id=explicit) <= 3  # an explicit max_parallel still caps its evaluation
    assert await in_flight(sm, model_id=model) == 22


async def test_the_queue_is_shared_fairly_and_off_keeps_leases_at_the_slots(sm, world):
    a, b = await world.tenant("a"), await world.tenant("b")
    bench, model = await world.benchmark(300), await world.model(4)
    evs = {await world.evaluation(a, bench, model, 300): "a", await world.evaluation(b, bench, model, 300): "b"}
    cfg = settings(max_in_flight_global=500, model_queue_seconds=0.5)

    await _pass(sm, cfg, {model: 0.1})
    assert await in_flight(sm, model_id=model) == 4 + 20  # ceil(4 × 0.5 / 0.1)
    async with sm() as s:
        rows = await s.execute(select(SampleLease.evaluation_id).join(Evaluation).where(Evaluation.model_id == model))
        per_tenant = Counter(evs[r] for (r,) in rows)
    assert per_tenant == {"a": 12, "b": 12}  # the fair queue still decides every lease

    off = await world.model(4)
    await world.evaluation(a, bench, off, 300)
    await _pass(sm, settings(max_in_flight_global=500, model_queue_seconds=0.0), {off: 0.1})
    assert await in_flight(sm, model_id=off) == 4
