"""Adaptive concurrency per model (AIMD, uep_scheduler.capacity) on a real PostgreSQL, through allocation
passes: overload errors halve a model's in-flight limit, successes add 1/limit each, back up to the
registry capacity; a model never overloaded is not tracked. Expected values follow the rule in
capacity.py's docstring (Chiu & Jain 1989): from capacity 8, two overloaded batches → 8·½·½ = 2; then
successes: 2 + 2/2 = 3, 3 + 3/3 = 4, …"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import select, update

from uep_common.contract.events import ErrorInfo, ScoreComputed
from uep_common.tables.models import SampleLease
from uep_common.tables.scheduling import SchedModel
from uep_scheduler.capacity import adapt

from .test_allocation import in_flight, run_pass, settings


def _score(model_id: uuid.UUID, error: str | None) -> ScoreComputed:
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
        error=ErrorInfo(stage="inference", type=error, message="overloaded") if error else None,
    )


async def _limit(sm, model_id) -> float | None:
    async with sm() as s:
        return await s.scalar(select(SchedModel.limit).where(SchedModel.model_id == model_id))


async def _adapt(sm, scores, default_capacity: int = 0) -> dict:
    async with sm() as s, s.begin():
        return await adapt(s, scores, default_capacity)


async def _release_all(sm) -> None:
    async with sm() as s, s.begin():
        await s.execute(update(SampleLease).where(SampleLease.state == "leased").values(state="released"))


async def test_overload_halves_the_limit_and_successes_restore_it(sm, world):
    tenant, bench = await world.tenant("t"), await world.benchmark(200)
    model, healthy = await world.model(8), await world.model(8)
    await world.evaluation(tenant, bench, model, 200, max_parallel=100)
    cfg, now = settings(max_in_flight_global=100, model_lease_factor=1.0, adaptive_concurrency=True), datetime.now(UTC)

    await run_pass(sm, cfg, now)
    assert await in_flight(sm, model_id=model) == 8  # the registry capacity while no error was seen

    assert await _adapt(sm, [_score(healthy, None)] * 5) == {}  # never overloaded: not tracked
    assert await _limit(sm, healthy) is None

    assert await _adapt(sm, [_score(model, "triton_unavailable"), _score(model, None)]) == {model: "decrease"}
    assert await _limit(sm, model) == 4.0  # first overload: half the capacity
    await _adapt(sm, [_score(model, "timeout")])
    assert await _limit(sm, model) == 2.0
    await _adapt(sm, [_score(model, "rate_limited")])
    await _adapt(sm, [_score(model, "rate_limited")])
    assert await _limit(sm, model) == 1.0  # 2 → 1 → never below 1

    await _release_all(sm)
    await run_pass(sm, cfg, now)
    assert await in_flight(sm, model_id=model) == 1  # the pass obeys the adaptive limit

    await _adapt(sm, [_score(model, None)])  # 1 + 1/1
    assert await _limit(sm, model) == 2.0
    await _adapt(sm, [_score(model, None)] * 2)  # 2 + 2/2
    assert await _limit(sm, model) == 3.0
    await _release_all(sm)
    await run_pass(sm, cfg, now)
    assert await in_flight(sm, model_id=model) == 3

    for _ in range(20):
        await _adapt(sm, [_score(model, None)] * 8)
    assert await _limit(sm, model) == 8.0  # capped at the registry capacity


async def test_errors_that_are_not_overload_do_not_move_the_limit(sm, world):
    model = await world.model(6)
    await _adapt(sm, [_score(model, "timeout")])
    assert await _limit(sm, model) == 3.0
    moved = await _adapt(sm, [_score(model, "model_not_found")])  # a permanent error: no step either way
    assert moved == {} and await _limit(sm, model) == 3.0


async def test_a_rate_limit_a_retry_got_past_still_halves_the_limit(sm, world):
    model = await world.model(8)
    answered_after_429 = _score(model, None).model_copy(update={"throttled": True})  # a success, but throttled first
    assert await _adapt(sm, [answered_after_429]) == {model: "decrease"}
    assert await _limit(sm, model) == 4.0


async def test_a_model_without_a_capacity_is_held_to_the_default_and_backs_off(sm, world):
    """A model registered without ``max_in_flight`` was unbounded (every lease its evaluation allowed went out at
    once) and never tracked, so timeouts under load failed item after item. It now gets the scheduler's
    ``default_model_capacity`` (4 here) and the same AIMD steps: 4 → 2 on a timeout, back up on successes."""
    tenant, bench = await world.tenant("t"), await world.benchmark(100)
    model = await world.model(None)
    await world.evaluation(tenant, bench, model, 100, max_parallel=50)
    cfg = settings(max_in_flight_global=100, model_lease_factor=1.0, adaptive_concurrency=True, default_model_capacity=4)
    now = datetime.now(UTC)

    await run_pass(sm, cfg, now)
    assert await in_flight(sm, model_id=model) == 4  # the default capacity, not the evaluation's 50

    assert await _adapt(sm, [_score(model, "timeout")], default_capacity=4) == {model: "decrease"}
    assert await _limit(sm, model) == 2.0  # half the default capacity
    await _release_all(sm)
    await run_pass(sm, cfg, now)
    assert await in_flight(sm, model_id=model) == 2

    for _ in range(10):
        await _adapt(sm, [_score(model, None)] * 4, default_capacity=4)
    assert await _limit(sm, model) == 4.0  # back up to the default, never above it
    assert await _adapt(sm, [_score(model, "timeout")]) == {}  # default 0: an unbounded model is not tracked
