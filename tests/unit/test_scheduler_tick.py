"""The scheduler's reconcile period (``Scheduler.tick``): a slow safety net while busy, bounded by the lease."""

from __future__ import annotations

from types import SimpleNamespace

from uep_scheduler.service import Scheduler
from uep_scheduler.settings import SchedulerSettings


def _tick(busy: bool, **settings: float) -> float:
    return Scheduler.tick(SimpleNamespace(busy=busy, settings=SchedulerSettings(**settings)))  # type: ignore[arg-type]


def test_a_busy_scheduler_reconciles_every_five_seconds_by_default():
    assert _tick(True) == 5.0  # tick_seconds 5, a quarter of the 300 s lease is 75
    assert _tick(False) == 5.0  # idle_tick_seconds 5


def test_a_short_lease_brings_the_busy_period_down_to_a_quarter_of_it():
    assert _tick(True, lease_seconds=3.0) == 0.75  # tests that kill processes use 3 s leases
    assert _tick(False, lease_seconds=3.0) == 5.0  # nothing runs: no lease to expire


def test_idle_is_never_shorter_than_busy():
    assert _tick(False, tick_seconds=30.0) == 30.0
    assert _tick(False, tick_seconds=1.0, idle_tick_seconds=10.0) == 10.0
