"""Budget exhaustion on a real PostgreSQL: an allocation pass only allocates; the evaluation whose cap leaves
no item is ended ``budget_exhausted`` by the records layer (``uep_common.records.exhaustion.finish_exhausted``)
after the pass, and found again by the reconcile query if that ending was cut short."""

from __future__ import annotations

from decimal import Decimal

from sqlalchemy import update

from uep_common.records import exhaustion
from uep_common.tables.budgets import BudgetAccount, BudgetCap
from uep_common.tables.models import Evaluation, Model
from uep_scheduler.allocation import allocate
from uep_scheduler.settings import SchedulerSettings


async def test_a_pass_records_exhaustion_and_the_records_layer_ends_the_evaluation(sm, world):
    tenant = await world.tenant("exhausted")
    model = await world.model(capacity=8)
    async with sm() as s, s.begin():  # one call costs 1.00: a cap of 2.50 lets two items through
        await s.execute(update(Model).where(Model.id == model).values(cost_unit="call", price_per_call=Decimal(1)))
    bench = await world.benchmark(5)
    ev_id = await world.evaluation(tenant, bench, model, 5)
    async with sm() as s, s.begin():
        s.add(BudgetCap(scope="evaluation", target=str(ev_id), tenant_id=tenant, evaluation_id=ev_id, amount=Decimal("2.5")))
    cfg = SchedulerSettings(max_in_flight_global=20, max_evaluation_share=1.0, adaptive_concurrency=False)

    async with sm() as s, s.begin():
        first = await allocate(s, cfg)
    assert first.leased == {ev_id: 2} and first.exhausted == []

    async with sm() as s, s.begin():  # both items stored and settled: nothing in flight, the cap is reached
        await s.execute(update(Evaluation).where(Evaluation.id == ev_id).values(completed_items=2))
        await s.execute(update(BudgetAccount).where(BudgetAccount.evaluation_id == ev_id).values(items_settled=2))
    async with sm() as s, s.begin():
        second = await allocate(s, cfg)
    assert second.leased == {} and second.exhausted == [ev_id]
    async with sm() as s:
        ev = await s.get(Evaluation, ev_id)
        acct = await s.get(BudgetAccount, ev_id)
        assert ev is not None and acct is not None
        assert (ev.status, ev.total_items) == ("running", 2)  # the pass allocated nothing and ended nothing
        assert acct.exhausted_reason is not None and "2 of 5 planned items" in acct.exhausted_reason
        assert await exhaustion.exhausted_and_done(s) == [ev_id]  # what the reconcile would end

    async with sm() as s, s.begin():
        assert await exhaustion.finish_exhausted(s, ev_id) is True
    async with sm() as s, s.begin():
        assert await exhaustion.finish_exhausted(s, ev_id) is False  # once
        ev = await s.get(Evaluation, ev_id)
        assert ev is not None and ev.status == "budget_exhausted"
        assert await exhaustion.exhausted_and_done(s) == []
