"""A/B arms under capacity too small to pair them: they take turns instead of waiting for room they never get.

The arms of an experiment are one fair-queuing flow; its packet is the next item of each arm furthest behind
(``uep_scheduler.flows.arm_packet``). These passes run on a real PostgreSQL (no broker, no services).
The expected orders follow from that rule by hand: with room for one item at a time, arms alternate in arm
order (a, b, a, b, …); with room for all, item ``i`` of every arm goes out in one pass.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

from sqlalchemy import select, update

from uep_common.tables.models import Evaluation, SampleLease
from uep_scheduler.flows import arm_packet

from .test_allocation import in_flight, release_random, run_pass, settings


async def _release_all(sm) -> None:
    async with sm() as s, s.begin():
        await s.execute(update(SampleLease).where(SampleLease.state == "leased").values(state="released"))


async def _dispatched(sm, *ids) -> list[int]:
    async with sm() as s:
        rows = dict((await s.execute(select(Evaluation.id, Evaluation.dispatched_items).where(Evaluation.id.in_(ids)))).all())
    return [rows[i] for i in ids]


async def test_two_arms_on_a_capacity_1_model_take_turns_and_finish(sm, world):
    t = await world.tenant("t")
    model, bench = await world.model(1), await world.benchmark(4)
    exp = uuid.uuid4()
    arm_a = await world.evaluation(t, bench, model, 4, experiment_id=exp, arm="a")
    arm_b = await world.evaluation(t, bench, model, 4, experiment_id=exp, arm="b")
    cfg, now = settings(max_in_flight_global=10), datetime.now(UTC)
    order = []
    for _ in range(10):  # 8 items, one at a time; two passes more find nothing left
        r = await run_pass(sm, cfg, now)
        assert await in_flight(sm, model_id=model) <= 1  # the model's capacity holds
        order += r.order
        await _release_all(sm)  # the item in flight is scored
        now += timedelta(milliseconds=100)
    assert order == [arm_a, arm_b] * 4  # turns in arm order, one item each, until both arms are done
    assert await _dispatched(sm, arm_a, arm_b) == [4, 4]


async def test_three_arms_under_a_global_bound_of_one_take_turns(sm, world):
    t = await world.tenant("t")
    model, bench = await world.model(None), await world.benchmark(2)
    exp = uuid.uuid4()
    arms = [await world.evaluation(t, bench, model, 2, experiment_id=exp, arm=name) for name in ("a", "b", "c")]
    cfg, now = settings(max_in_flight_global=1), datetime.now(UTC)
    order = []
    for _ in range(7):
        order += (await run_pass(sm, cfg, now)).order
        await _release_all(sm)
        now += timedelta(milliseconds=100)
    assert order == arms * 2


async def test_arms_go_out_together_when_they_fit(sm, world):
    t = await world.tenant("t")
    model, bench = await world.model(2), await world.benchmark(3)
    exp = uuid.uuid4()
    arm_a = await world.evaluation(t, bench, model, 3, experiment_id=exp, arm="a")
    arm_b = await world.evaluation(t, bench, model, 3, experiment_id=exp, arm="b")
    cfg, now = settings(max_in_flight_global=10), datetime.now(UTC)
    for step in range(3):
        r = await run_pass(sm, cfg, now)
        assert r.leased == {arm_a: 1, arm_b: 1}  # item i of both arms in the same pass (room for both)
        assert await _dispatched(sm, arm_a, arm_b) == [step + 1, step + 1]
        await _release_all(sm)
        now += timedelta(milliseconds=100)


async def test_an_experiment_is_not_starved_when_slots_free_one_at_a_time(sm, world):
    """A capacity-4 model shared by an experiment (2 arms) and a single evaluation of another tenant; each
    step one open lease is scored. Waiting for two free slots at once, the experiment would lose every slot
    to the single evaluation; taking turns, it gets its tenant's half (SFQ, Goyal et al. 1996: two backlogged
    equal-weight tenants within one item each of N/2), its arms within one item of each other."""
    a, b = await world.tenant("experimenter"), await world.tenant("other")
    model, bench = await world.model(4), await world.benchmark(200)
    exp = uuid.uuid4()
    arm_a = await world.evaluation(a, bench, model, 200, experiment_id=exp, arm="a")
    arm_b = await world.evaluation(a, bench, model, 200, experiment_id=exp, arm="b")
    single = await world.evaluation(b, bench, model, 200)
    cfg, rng, now = settings(max_in_flight_global=20), random.Random(4), datetime.now(UTC)
    await run_pass(sm, cfg, now)  # fill the model's 4 slots
    counts: Counter = Counter()
    for _ in range(60):
        await release_random(sm, 1, rng)
        now += timedelta(milliseconds=100)
        counts.update((await run_pass(sm, cfg, now)).order)
        da, db_ = await _dispatched(sm, arm_a, arm_b)
        assert abs(da - db_) <= 1, (da, db_)
    assert sum(counts.values()) == 60  # every freed slot was given again
    experiment = counts[arm_a] + counts[arm_b]
    assert abs(experiment - 30) <= 2, counts  # N/2 ± one item per tenant
    assert counts[single] == 60 - experiment


def _arm(name: str, dispatched: int, model_id: uuid.UUID, total: int = 10) -> Evaluation:
    return Evaluation(id=uuid.uuid4(), arm=name, dispatched_items=dispatched, total_items=total, model_id=model_id)


def test_packet_holds_the_leading_arm_until_the_lagging_one_can_go():
    """Pure rule: only the arms furthest behind take part; a lagging arm at its own bound holds the others
    (they never get more than one item ahead), and a finished arm no longer counts."""
    m = uuid.uuid4()
    a, b = _arm("a", 3, m), _arm("b", 2, m)
    used = {a.id: 0, b.id: 1}
    assert arm_packet([a, b], {}, 5, used, {a.id: 4, b.id: 4}, {}, {m: None}) == [b]  # b is behind: b alone
    assert arm_packet([a, b], {}, 5, used, {a.id: 4, b.id: 1}, {}, {m: None}) == []  # b at its bound: a waits
    assert arm_packet([a, b], {b.id: 1}, 5, used, {a.id: 4, b.id: 4}, {}, {m: None}) == [a, b]  # level: both
    assert arm_packet([a, b], {b.id: 1}, 1, used, {a.id: 4, b.id: 4}, {}, {m: None}) == [a]  # one slot: a's turn
    assert arm_packet([a, b], {b.id: 1}, 5, used, {a.id: 4, b.id: 4}, {m: 3}, {m: 4}) == [a]  # model room for one
    done = _arm("c", 10, m)
    assert arm_packet([done, b], {}, 5, {done.id: 0, b.id: 0}, {done.id: 4, b.id: 4}, {}, {m: None}) == [b]
