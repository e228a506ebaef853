"""Per-model limits of the inference service (:mod:`uep_inference.limits`): resized when the registry's capacity
changes, never back to an older one."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from uep_common.contract.events import ModelTarget
from uep_inference.limits import CallLimit, ModelLimits

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _target(capacity: int | None) -> ModelTarget:
    return ModelTarget(model_id=uuid.UUID(int=1), name="m", backend="triton", endpoint="grpc://t:8001", max_concurrency=capacity)


async def _hold(limit: CallLimit, entered: list[int], release: asyncio.Event, n: int) -> None:
    async with limit:
        entered.append(n)
        await release.wait()


async def _started(tasks: int) -> None:
    for _ in range(3 * tasks):  # each task runs to its first wait
        await asyncio.sleep(0)


async def test_a_limit_lets_in_its_size_and_queues_the_rest_in_order():
    limit, release, entered = CallLimit(2), asyncio.Event(), list[int]()
    tasks = [asyncio.create_task(_hold(limit, entered, release, n)) for n in range(5)]
    await _started(5)
    assert (entered, limit.in_flight, limit.waiting) == ([0, 1], 2, 3)
    release.set()
    await asyncio.gather(*tasks)
    assert (entered, limit.in_flight, limit.waiting) == ([0, 1, 2, 3, 4], 0, 0)


async def test_growing_a_limit_lets_waiting_calls_in_at_once_and_shrinking_holds_new_ones():
    limit, release, entered = CallLimit(1), asyncio.Event(), list[int]()
    tasks = [asyncio.create_task(_hold(limit, entered, release, n)) for n in range(4)]
    await _started(4)
    assert entered == [0]
    limit.resize(3)
    await _started(4)
    assert (entered, limit.in_flight) == ([0, 1, 2], 3)
    limit.resize(1)  # the three in flight finish; the fourth waits until fewer than 1 are
    await _started(4)
    assert (entered, limit.waiting) == ([0, 1, 2], 1)
    release.set()
    await asyncio.gather(*tasks)
    assert (entered, limit.in_flight) == ([0, 1, 2, 3], 0)


async def test_a_call_cancelled_while_waiting_leaves_the_queue():
    limit, release, entered = CallLimit(1), asyncio.Event(), list[int]()
    first = asyncio.create_task(_hold(limit, entered, release, 0))
    second = asyncio.create_task(_hold(limit, entered, release, 1))
    await _started(2)
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    assert (limit.in_flight, limit.waiting) == (1, 0)
    release.set()
    await first
    assert limit.in_flight == 0


def test_a_limit_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        CallLimit(0)
    with pytest.raises(ValueError, match="at least 1"):
        CallLimit(2).resize(0)


async def test_a_newer_capacity_resizes_the_models_limit_and_an_older_one_does_not():
    limits = ModelLimits()
    limit = limits.for_target(_target(4), as_of=T0)
    assert limit is not None and limit.limit == 4
    assert limits.for_target(_target(1), as_of=T0 + timedelta(seconds=5)) is limit
    assert limit.limit == 1  # max_in_flight lowered: the next item's target resizes it
    assert limits.for_target(_target(4), as_of=T0 + timedelta(seconds=2)) is limit
    assert limit.limit == 1  # an item dispatched before the change brings the old capacity: ignored
    limits.for_target(_target(8))  # a judge call reads the registry now
    assert limit.limit == 8
    assert limits.for_target(_target(None)) is None  # unbounded: no limit
