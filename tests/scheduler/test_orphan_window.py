"""The windowed orphan sweep (uep_scheduler.leases.lost_condition with ``orphans_since``) on a real
PostgreSQL: it finds exactly the released-but-unstored leases that became orphans since the previous sweep.

A lease becomes an orphan at max(released_at + grace, lease_expires_at) (the docstring of _lost_condition).
Two items are leased at t0 with a 30 s lease (expiry t0 + 30) and released without a stored result: A at t0
(an orphan from t0 + 30), B at t0 + 40, after its expiry (an orphan from t0 + 40 + grace = t0 + 50). The sweep
runs at t0 + 100 with a grace of 10 s; each check runs in a transaction that is rolled back.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from uep_common.tables.models import SampleLease
from uep_scheduler.allocation import allocate

from .test_allocation import run_pass, settings


async def test_the_window_holds_what_became_an_orphan_since_the_last_sweep(sm, world):
    t, bench, model = await world.tenant("t"), await world.benchmark(2), await world.model(None)
    ev = await world.evaluation(t, bench, model, 2)
    cfg, t0 = settings(lease_seconds=30), datetime.now(UTC)
    assert (await run_pass(sm, cfg, t0)).leased == {ev: 2}
    async with sm() as s, s.begin():
        a, b = list(await s.scalars(select(SampleLease).where(SampleLease.evaluation_id == ev).order_by(SampleLease.id)))
        a.state, a.released_at = "released", t0
        b.state, b.released_at = "released", t0 + timedelta(seconds=40)
        ids = {a.id: "A", b.id: "B"}

    at = t0 + timedelta(seconds=100)

    async def found(since_s: float | None) -> set[str]:
        since = None if since_s is None else t0 + timedelta(seconds=since_s)
        async with sm() as s:
            tx = await s.begin()
            await allocate(s, cfg, reconcile=True, now=at, orphans_before=at - timedelta(seconds=10), orphans_since=since)
            again = await s.scalars(select(SampleLease.id).where(SampleLease.evaluation_id == ev, SampleLease.attempt == 2))
            out = {ids[i] for i in again}
            await tx.rollback()
        return out

    assert await found(None) == {"A", "B"}  # a full sweep: every released lease without a result
    assert await found(25) == {"A", "B"}  # both became orphans after t0 + 25
    assert await found(45) == {"B"}  # A was one from t0 + 30, found by the sweep before; B from t0 + 50
    assert await found(55) == set()  # both before the previous sweep: it found them
