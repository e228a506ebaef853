"""Budget enforcement hooks called by the gateway, the scheduler and the judge.

Creation and dispatch are here; settlement and the judge's charges are :mod:`uep_common.records.settlement`;
tables are in :mod:`uep_common.tables.budgets`, the arithmetic in :mod:`uep_common.contract.costs`.

Flow of money for one evaluation (one arm):

1. **Creation** (:func:`check_creation`, gateway, before commit): estimate = items × per-item estimate
   (:func:`uep_common.contract.costs.evaluation_estimate`). Refused with **409** when the estimate exceeds the
   evaluation's cap from the site default or the tenant's benchmark cap (the request can never fit: lower
   ``sample_limit``/``repeats`` or ask an admin for a higher cap), and with **402** when it exceeds what is
   left today of the tenant's daily cap (spending elsewhere frees nothing before the next UTC day). A cap the
   caller sets on this very evaluation (``max_cost``) is a spending limit, not a reason to refuse: the
   evaluation runs until it is reached and ends ``budget_exhausted``. The evaluation's budget account is
   opened with its per-item estimate fixed.
2. **Dispatch** (:func:`reserve_for_dispatch`, scheduler, under the evaluation's row lock): each new item
   reserves the per-item estimate, as many as the evaluation cap and the tenant's daily cap leave room for
   (the tenant's cap row is locked ``FOR UPDATE`` while checking, so concurrent dispatches of one tenant
   never over-reserve). When a cap lets no item through and none of the evaluation's items is in flight,
   the evaluation is **exhausted**: the reason is recorded, ``total_items`` shrinks to the items dispatched,
   and the reporter's normal completion ends it ``budget_exhausted`` when the last of them is stored. When all
   of them already are, the allocation pass (which only allocates) hands it to
   :func:`uep_common.records.exhaustion.finish_exhausted`, run by
   the scheduler in a transaction of its own after the pass commits. In-flight items are never cut short.
3. **Settlement** (:func:`uep_common.records.settlement.settle_scores`, scheduler, in the lease-release transaction): the actual cost of
   each scored item (:meth:`uep_common.contract.costs.Pricing.cost` of its tokens/latency) is recorded and its
   reservation released, once per (item, attempt) — a redelivered score is a conflict on a unique index and
   changes nothing; a second attempt (expired lease) adds its actual cost but releases nothing again.
4. **Judge calls** (:func:`uep_common.records.settlement.charge`, judge): charged to the same evaluation with role ``judge``.

Caps are enforced on estimates at dispatch; actual spend can exceed a cap by at most what the items in
flight cost beyond their estimates. Open reservations of any day count against today's tenant cap.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select, tuple_
from sqlalchemy.dialects.postgresql import insert as pg_insert

from uep_common.contract.configs import check_evaluation_config, parse_evaluation_config
from uep_common.contract.costs import Expected, Pricing, affordable, currency, evaluation_estimate, money, per_item_estimate
from uep_common.tables.budgets import BenchmarkCostProfile, BudgetAccount, BudgetCap, SpendEntry, cap_target
from uep_common.tables.models import Benchmark, Evaluation, Model, Tenant

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy.ext.asyncio import AsyncSession


class BudgetRefused(Exception):  # noqa: N818 - a public name that callers and tests catch; renaming it breaks them
    """Creation refused because the estimate exceeds what is left (HTTP ``status_code`` 402 or 409)."""

    def __init__(self, status_code: int, field: str, reason: str, kind: str) -> None:
        super().__init__(reason)
        self.status_code, self.field, self.reason, self.kind = status_code, field, reason, kind


def pricing_of(model: Model | None) -> Pricing:
    """The :class:`Pricing` of a model registry row (free when ``model`` is None)."""
    if model is None:
        return Pricing()
    return Pricing(
        unit=model.cost_unit or "none",
        per_1k_input_tokens=Decimal(model.price_per_1k_input_tokens or 0),
        per_1k_output_tokens=Decimal(model.price_per_1k_output_tokens or 0),
        per_gpu_second=Decimal(model.price_per_gpu_second or 0),
        per_call=Decimal(model.price_per_call or 0),
    )


async def expected_of(session: AsyncSession, model: Model, benchmark_slug: str) -> Expected:
    """The model's expected item size with the benchmark's cost profile (if any) taking precedence."""
    base = Expected(model.expected_input_tokens, model.expected_output_tokens, model.expected_latency_ms)
    profile = await session.get(BenchmarkCostProfile, benchmark_slug)
    return base.merged(profile.as_override() if profile else None)


@dataclass(frozen=True)
class Plan:
    """The estimate of one evaluation (one arm) before it runs."""

    evaluation_id: uuid.UUID
    model: str
    benchmark: str
    arm: str
    items: int
    cost_unit: str
    per_item: Decimal
    estimate: Decimal
    expected: Expected

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form (money as floats in the site currency)."""
        return {
            "evaluation_id": str(self.evaluation_id),
            "model": self.model,
            "benchmark": self.benchmark,
            "arm": self.arm,
            "items": self.items,
            "cost_unit": self.cost_unit,
            "per_item": float(self.per_item),
            "estimate": float(self.estimate),
            "currency": currency(),
            "expected": {
                "input_tokens": self.expected.input_tokens,
                "output_tokens": self.expected.output_tokens,
                "latency_ms": self.expected.latency_ms,
            },
        }


async def plan(session: AsyncSession, ev: Evaluation) -> Plan:
    """Estimate one evaluation row (persisted or not): ``total_items`` × the per-item estimate of its model
    on its benchmark."""
    model = await session.get(Model, ev.model_id)
    bench = await session.get(Benchmark, ev.benchmark_id)
    assert model is not None and bench is not None  # foreign keys of the evaluation
    pricing = pricing_of(model)
    expected = await expected_of(session, model, bench.slug)
    return Plan(
        evaluation_id=ev.id,
        model=model.name,
        benchmark=bench.slug,
        arm=getattr(ev, "arm", None) or "main",
        items=ev.total_items,
        cost_unit=pricing.unit,
        per_item=per_item_estimate(pricing, expected),
        estimate=evaluation_estimate(pricing, expected, ev.total_items),
        expected=expected,
    )


async def _caps(session: AsyncSession, keys: list[tuple[str, str]], lock: bool = False) -> dict[tuple[str, str], BudgetCap]:
    if not keys:
        return {}
    q = select(BudgetCap).where(tuple_(BudgetCap.scope, BudgetCap.target).in_(keys))
    if lock:
        q = q.order_by(BudgetCap.id).with_for_update()
    return {(c.scope, c.target): c for c in await session.scalars(q)}


async def evaluation_cap(
    session: AsyncSession, tenant_id: uuid.UUID, benchmark_slug: str, evaluation_id: uuid.UUID | None
) -> tuple[Decimal | None, str]:
    """The cap of one evaluation and where it comes from: its own cap (``evaluation``), else the tenant's cap
    on the benchmark (``benchmark``), else the site default (``site_evaluation``); ``(None, "none")`` if none."""
    keys = _evaluation_cap_keys(tenant_id, benchmark_slug, evaluation_id)
    return _first_cap(keys, await _caps(session, keys))


def _evaluation_cap_keys(tenant_id: uuid.UUID, benchmark_slug: str, evaluation_id: uuid.UUID | None) -> list[tuple[str, str]]:
    keys = [("site_evaluation", ""), ("benchmark", cap_target("benchmark", tenant_id, benchmark_slug))]
    if evaluation_id is not None:
        keys.append(("evaluation", str(evaluation_id)))
    return keys


def _first_cap(keys: list[tuple[str, str]], found: dict[tuple[str, str], BudgetCap]) -> tuple[Decimal | None, str]:
    """The most specific of ``keys`` (last first) that has a cap in ``found``."""
    for scope, target in reversed(keys):
        if (scope, target) in found:
            return Decimal(found[(scope, target)].amount), scope
    return None, "none"


def utc_today() -> date:
    """Today's date in UTC (the day of the daily caps and of the ledger)."""
    return datetime.now(UTC).date()


async def tenant_used_today(session: AsyncSession, tenant_id: uuid.UUID) -> Decimal:
    """What counts against the tenant's cap today: costs settled or charged today (UTC) + every open
    reservation of the tenant (whatever day it was made)."""
    settled = await session.scalar(
        select(func.coalesce(func.sum(SpendEntry.settled), 0)).where(
            SpendEntry.tenant_id == tenant_id, SpendEntry.day == utc_today()
        )
    )
    open_ = await session.scalar(
        select(func.coalesce(func.sum(BudgetAccount.reserved_open), 0)).where(BudgetAccount.tenant_id == tenant_id)
    )
    assert settled is not None and open_ is not None  # coalesce(..., 0)
    return Decimal(settled) + Decimal(open_)


def _fmt(x: Decimal | None) -> str:
    return "no cap" if x is None else f"{money(x).normalize():f} {currency()}"


SCOPE_WORDS = {
    "site_evaluation": "the site's default evaluation cap",
    "benchmark": "the tenant's cap for evaluations of benchmark {slug!r}",
    "evaluation": "this evaluation's cap",
}


async def check_creation(
    session: AsyncSession, tenant: Tenant, evaluations: list[Evaluation], principal: object | None = None
) -> None:
    """Called by the gateway before it commits new evaluations (all of one request: a batch, the arms of an
    A/B experiment). Refuses (raises :class:`BudgetRefused`) with 409 when one evaluation's estimate exceeds
    its cap from the site default or the tenant's benchmark cap, and with 402 when the estimates together
    exceed what is left of the tenant's daily cap; otherwise opens each evaluation's budget account, records
    a ``max_cost`` found in its ``config`` as the evaluation's cap, and stores the estimate in
    ``config["cost_estimate"]`` (returned by the create call). ``principal`` is unused (roles gate caps, not
    creation). Nothing is written when it raises."""
    with session.no_autoflush:  # nothing is inserted before the checks pass, then once, with the estimate
        plans = [await plan(session, ev) for ev in evaluations]
        day_key = ("tenant_day", str(tenant.id))
        cap_keys = {p.benchmark: _evaluation_cap_keys(tenant.id, p.benchmark, None) for p in plans}
        found = await _caps(session, sorted({k for keys in cap_keys.values() for k in keys} | {day_key}))  # one round trip
        committed = Decimal(0)
        for ev, p in zip(evaluations, plans, strict=True):
            own = parse_evaluation_config(ev.config).max_cost
            cap, scope = _first_cap(cap_keys[p.benchmark], found)
            if cap is not None and p.estimate > cap:
                raise BudgetRefused(
                    409,
                    "sample_limit",
                    f"estimated cost {_fmt(p.estimate)} ({p.items} items × {_fmt(p.per_item)}) of {p.model} on {p.benchmark} "
                    f"exceeds {SCOPE_WORDS[scope].format(slug=p.benchmark)} of {_fmt(cap)}; evaluate fewer items or ask an "
                    "admin to raise the cap",
                    "over_evaluation_cap",
                )
            committed += min(p.estimate, Decimal(str(own))) if own is not None else p.estimate
        day_cap = Decimal(found[day_key].amount) if day_key in found else None
        if day_cap is not None:
            used = await tenant_used_today(session, tenant.id)
            left = day_cap - used
            if committed > left:
                raise BudgetRefused(
                    402,
                    "sample_limit",
                    f"estimated cost {_fmt(committed)} exceeds what is left of tenant {tenant.slug!r}'s daily cap of "
                    f"{_fmt(day_cap)} on {utc_today().isoformat()} (UTC): {_fmt(max(left, Decimal(0)))} left, {_fmt(used)} "
                    "spent or reserved",
                    "over_daily_cap",
                )
    for ev, p in zip(evaluations, plans, strict=True):
        ev.config = check_evaluation_config(
            {**(ev.config or {}), "cost_estimate": p.as_dict()}
        )  # before the INSERT: no UPDATE after it
    await session.flush()  # the evaluation rows first: accounts and caps refer to them
    for ev, p in zip(evaluations, plans, strict=True):
        own = parse_evaluation_config(ev.config).max_cost
        session.add(_account(ev, p))
        if own is not None:
            session.add(
                BudgetCap(
                    scope="evaluation",
                    target=str(ev.id),
                    tenant_id=ev.tenant_id,
                    evaluation_id=ev.id,
                    amount=money(own),
                    updated_by="creation",
                )
            )
    await session.flush()


def _account(ev: Evaluation, p: Plan) -> BudgetAccount:
    return BudgetAccount(
        evaluation_id=ev.id,
        tenant_id=ev.tenant_id,
        model_id=ev.model_id,
        benchmark_slug=p.benchmark,
        cost_unit=p.cost_unit,
        per_item=p.per_item,
        planned_items=p.items,
        estimate=p.estimate,
        items_reserved=0,
        items_settled=0,
        reserved_total=0,
        reserved_open=0,
        settled_total=0,
        judge_total=0,
    )


async def locked_account(session: AsyncSession, ev: Evaluation) -> BudgetAccount:
    """The evaluation's account, locked; opened now for an evaluation created without one (e.g. before
    budgets existed, or by a path that did not call :func:`check_creation`)."""
    acct = await session.get(BudgetAccount, ev.id, with_for_update=True, populate_existing=True)
    if acct is None:
        p = await plan(session, ev)
        await session.execute(
            pg_insert(BudgetAccount)
            .values(
                evaluation_id=ev.id,
                tenant_id=ev.tenant_id,
                model_id=ev.model_id,
                benchmark_slug=p.benchmark,
                cost_unit=p.cost_unit,
                per_item=p.per_item,
                planned_items=p.items,
                estimate=p.estimate,
            )
            .on_conflict_do_nothing()
        )
        acct = await session.get(BudgetAccount, ev.id, with_for_update=True, populate_existing=True)
        assert acct is not None  # inserted just above (or by a concurrent caller)
    return acct


async def reserve_for_dispatch(session: AsyncSession, ev: Evaluation, model: Model, n: int) -> int:
    """Called by the scheduler, inside its transaction (``ev`` locked), before leasing ``n`` new items of
    ``ev``. Reserves the per-item estimate for as many as the evaluation cap and the tenant's daily cap
    allow and returns that number (0..n). When no item fits and none is in flight, the evaluation is
    exhausted (see the module docstring): reason recorded and ``ev.total_items`` shrunk to
    ``ev.dispatched_items``. It is not ended here: an allocation pass only allocates. When every dispatched
    item is already stored, the caller ends it after its transaction commits
    (:func:`uep_common.records.exhaustion.finish_exhausted`); the reporter ends it when the last one is stored
    (:func:`uep_common.records.exhaustion.exhausted_reason`)."""
    if n <= 0:
        return 0
    acct = await locked_account(session, ev)
    per_item = Decimal(acct.per_item)
    allowed, why = n, None
    keys = _evaluation_cap_keys(ev.tenant_id, acct.benchmark_slug, ev.id)
    day_key = ("tenant_day", str(ev.tenant_id))
    found = await _caps(session, [*keys, day_key], lock=True)  # one round trip; the rows locked in id order
    cap, scope = _first_cap(keys, found)
    if cap is not None:
        k = affordable(per_item, cap - acct.used, n)
        if k < allowed:
            allowed = k
            why = (
                f"{SCOPE_WORDS[scope].format(slug=acct.benchmark_slug)} of {_fmt(cap)} is reached "
                f"({_fmt(acct.used)} spent or reserved, next item estimated at {_fmt(per_item)})"
            )
    day_cap = Decimal(found[day_key].amount) if day_key in found else None
    if day_cap is not None and allowed > 0:
        used = await tenant_used_today(session, ev.tenant_id)
        k = affordable(per_item, day_cap - used, allowed)
        if k < allowed:
            allowed = k
            why = (
                f"the tenant's daily cap of {_fmt(day_cap)} is reached on {utc_today().isoformat()} (UTC) "
                f"({_fmt(used)} spent or reserved, next item estimated at {_fmt(per_item)})"
            )
    if allowed > 0:
        if acct.exhausted_reason:  # dispatch asked again after an exhaustion (items restored, cap raised): resumed
            acct.exhausted_reason, acct.exhausted_at = None, None
        amount = money(per_item * allowed)
        acct.items_reserved += allowed
        acct.reserved_total = Decimal(acct.reserved_total) + amount
        acct.reserved_open = Decimal(acct.reserved_open) + amount
        session.add(
            SpendEntry(
                tenant_id=ev.tenant_id,
                evaluation_id=ev.id,
                model_id=ev.model_id,
                role="inference",
                kind="reserve",
                items=allowed,
                reserved=amount,
                settled=0,
                day=utc_today(),
            )
        )
    elif acct.items_reserved == acct.items_settled:  # nothing fits and nothing is in flight: exhausted
        reason = (
            f"budget exhausted: {why}; {ev.dispatched_items} of {acct.planned_items} planned items were "
            "dispatched and their results are kept"
        )
        acct.exhausted_reason, acct.exhausted_at = reason, datetime.now(UTC)
        ev.total_items = ev.dispatched_items
        ev.error = reason
    return allowed


def combined_estimate(estimates: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The ``cost_estimate`` dicts of the evaluations of one request (:meth:`Plan.as_dict`) as one:
    ``{"estimate", "items", "currency", "evaluations": [...]}`` (the one dict itself for a single evaluation;
    None when none has an estimate)."""
    found = [e for e in estimates if e]
    if not found:
        return None
    if len(found) == 1:
        return found[0]
    return {
        "estimate": float(sum(Decimal(str(e["estimate"])) for e in found)),
        "items": sum(e["items"] for e in found),
        "currency": found[0]["currency"],
        "evaluations": found,
    }
