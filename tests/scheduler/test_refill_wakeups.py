"""When released leases wake the allocator: at once when a pass is worth it (refill_fraction of the leases open
after the last pass, at least one), else within refill_delay_s — so under load passes come fewer and larger,
and a model with a single lease open is refilled at once."""

import asyncio

from uep_scheduler.service import Scheduler
from uep_scheduler.settings import SchedulerSettings


def _scheduler(**settings) -> tuple[Scheduler, list[float]]:
    scheduler = Scheduler(None, None, SchedulerSettings(**settings))  # type: ignore[arg-type]  # no pass is run here
    wakes: list[float] = []
    scheduler.wake = lambda: wakes.append(asyncio.get_running_loop().time())  # type: ignore[method-assign]
    return scheduler, wakes


def test_the_threshold_is_a_share_of_the_open_leases_and_at_least_one():
    scheduler, _ = _scheduler(refill_fraction=0.25)
    assert [scheduler.refill_threshold(n) for n in (0, 1, 4, 7, 8, 256)] == [1, 1, 1, 1, 2, 64]
    assert _scheduler(refill_fraction=0)[0].refill_threshold(256) == 1


async def test_releases_below_the_threshold_wait_for_the_delay_and_reaching_it_wakes_at_once():
    scheduler, wakes = _scheduler(refill_fraction=0.25, refill_delay_s=0.2)
    scheduler._refill_at = scheduler.refill_threshold(256)  # as after a pass that left 256 leases open
    loop = asyncio.get_running_loop()
    start = loop.time()
    scheduler._on_released(10)
    scheduler._on_released(20)
    assert wakes == []  # 30 < 64: no pass yet, one timer
    scheduler._on_released(34)
    assert len(wakes) == 1 and wakes[0] - start < 0.05  # 64 released: at once
    await asyncio.sleep(0.3)
    assert len(wakes) == 2 and 0.19 <= wakes[1] - start < 0.3  # the timer of the first release fires as well


async def test_a_single_open_lease_is_refilled_at_once():
    scheduler, wakes = _scheduler()
    scheduler._refill_at = scheduler.refill_threshold(1)
    scheduler._on_released(1)
    assert len(wakes) == 1
