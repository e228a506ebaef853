"""Cost estimates, caps, prices and spend.

- ``POST /v1/evaluations/estimate``: the create body; what the evaluations would cost and whether creation
  would be refused (402/409, see :mod:`uep_common.records.budget`), nothing stored.
- ``GET /v1/caps``, ``PUT /v1/caps/tenant/day``, ``PUT /v1/caps/benchmarks/{slug}``,
  ``PUT /v1/caps/evaluations/{id}`` (``{"amount": number | null}``, null removes the cap): the caller's
  tenant's caps. A viewer may change nothing; a builder may only lower a cap (the cap in force after the
  change must not exceed the one before; removing a cap raises it to "none"); an admin may also raise it.
  403 names the field. An evaluation cap targets only an evaluation of the caller's tenant (404 otherwise).
- Site administration (a site admin sending ``X-UEP-Site-Admin: true``, see :mod:`uep_gateway.access`):
  ``PUT /v1/caps/site/evaluation`` (the site default of every evaluation), ``PUT /v1/caps/tenant/limits``
  (the work limits of the tenant named by ``X-UEP-Tenant`` — items per evaluation, items queued,
  evaluations per minute, minimum schedule interval, :class:`uep_common.records.creation.WorkLimits`),
  ``PUT /v1/costs/models/{model}`` (the registry's cost model) and ``PUT /v1/costs/benchmarks/{slug}``
  (expected item size of a benchmark). ``GET /v1/caps/tenant/limits``, ``GET /v1/costs/models`` and
  ``GET /v1/costs/benchmarks/{slug}`` read them.
- ``GET /v1/spend?group_by=tenant|day|evaluation|role`` with filters ``tenant``, ``evaluation_id``, ``role``,
  ``since``, ``until`` (UTC dates, inclusive): the spend ledger of the caller's tenant (a site admin acting
  across tenants: every tenant's, or the one named by ``tenant``).
- ``GET /v1/evaluations/{id}/budget``: one evaluation's account (estimate, reserved, settled, cap, reason).
"""

from __future__ import annotations

import uuid
from dataclasses import asdict
from datetime import date
from decimal import Decimal
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import case, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.costs import COST_UNITS, currency, money
from uep_common.records import budget
from uep_common.records.creation import WorkLimits
from uep_common.tables.budgets import BenchmarkCostProfile, BudgetAccount, BudgetCap, SpendEntry, cap_target
from uep_common.tables.models import TENANT_LIMIT_COLUMNS, Benchmark, Model, Tenant
from uep_gateway.auth import Principal, current_principal, forget_all
from uep_gateway.deps import db_session
from uep_gateway.errors import FieldError
from uep_gateway.schemas import EvaluationCreate
from uep_gateway.usecases.evaluations import owned_evaluation
from uep_gateway.usecases.planning import plan_evaluations
from uep_gateway.validation import INT32_MAX, NUL_CHECK

router = APIRouter(tags=["budgets"], dependencies=NUL_CHECK)


def _f(x: Decimal | None) -> float | None:
    return None if x is None else float(x)


# ---------------------------------------------------------------- estimate


@router.post("/v1/evaluations/estimate")
async def estimate(
    body: EvaluationCreate,
    session: AsyncSession = Depends(db_session),
    principal: Principal = Depends(current_principal),
) -> dict[str, Any]:
    """What ``POST /v1/evaluations`` with this body would cost — per evaluation (items × per-item estimate)
    and in total — and the refusal it would get (``refusal``: status 402/409, reason, type), or null.
    Nothing is stored."""
    evaluations, _ = await plan_evaluations(session, principal.tenant, body)
    plans = [await budget.plan(session, ev) for ev in evaluations]
    refusal = None
    session.add_all(evaluations)
    try:
        await budget.check_creation(session, principal.tenant, evaluations, principal)
    except budget.BudgetRefused as exc:
        refusal = {"status": exc.status_code, "loc": ["body", exc.field], "msg": exc.reason, "type": exc.kind}
    finally:
        await session.rollback()  # an estimate stores nothing
    total = sum((p.estimate for p in plans), Decimal(0))
    return {
        "currency": currency(),
        "estimate": float(total),
        "items": sum(p.items for p in plans),
        "evaluations": [{k: v for k, v in p.as_dict().items() if k != "evaluation_id"} for p in plans],
        "refusal": refusal,
    }


# ---------------------------------------------------------------- caps


class CapUpdate(BaseModel):
    """``PUT /v1/caps/...``: the cap in the site currency; null removes it (no cap at that level)."""

    model_config = ConfigDict(extra="forbid")

    amount: Decimal | None = Field(..., ge=0, max_digits=24, decimal_places=10)


def _gt(a: Decimal | None, b: Decimal | None) -> bool:
    """Whether cap ``a`` is greater than cap ``b``, None meaning no cap (infinite)."""
    if a is None:
        return b is not None
    return b is not None and a > b


async def _set_cap(
    session: AsyncSession,
    principal: Principal,
    scope: str,
    target: str,
    amount: Decimal | None,
    before: Decimal | None,
    after_if_removed: Decimal | None,
    label: str,
    **cols: Any,
) -> dict[str, Any]:
    principal.require("builder", f"changing {label}")
    after = money(amount) if amount is not None else after_if_removed
    if _gt(after, before) and not principal.at_least("admin"):
        raise FieldError(
            "forbidden",
            ("body", "amount"),
            f"a builder may only lower a cap: {label} would go from {_cap_words(before)} to {_cap_words(after)}; "
            "raising it needs the admin role",
            "cap_raise_forbidden",
        )
    row = await session.scalar(select(BudgetCap).where(BudgetCap.scope == scope, BudgetCap.target == target).with_for_update())
    if amount is None:
        if row is not None:
            await session.delete(row)
    elif row is None:
        session.add(BudgetCap(scope=scope, target=target, amount=money(amount), updated_by=principal.name, **cols))
    else:
        row.amount, row.updated_by = money(amount), principal.name
    await session.commit()
    return {
        "scope": scope,
        "amount": _f(money(amount)) if amount is not None else None,
        "effective_before": _f(before),
        "effective": _f(after),
        "currency": currency(),
        "updated_by": principal.name,
    }


def _cap_words(x: Decimal | None) -> str:
    return "no cap" if x is None else f"{money(x).normalize():f} {currency()}"


async def _row_amount(session: AsyncSession, scope: str, target: str) -> Decimal | None:
    v = await session.scalar(select(BudgetCap.amount).where(BudgetCap.scope == scope, BudgetCap.target == target))
    return None if v is None else Decimal(v)


@router.get("/v1/caps")
async def list_caps(
    session: AsyncSession = Depends(db_session), principal: Principal = Depends(current_principal)
) -> dict[str, Any]:
    """The caps that apply to the caller's tenant: the site default per evaluation, the tenant's daily cap
    (with what is used and left today), its benchmark caps and its evaluation caps."""
    tenant = principal.tenant
    site = await _row_amount(session, "site_evaluation", "")
    day = await _row_amount(session, "tenant_day", str(tenant.id))
    used = await budget.tenant_used_today(session, tenant.id)
    rows = list(
        await session.scalars(
            select(BudgetCap)
            .where(BudgetCap.tenant_id == tenant.id, BudgetCap.scope.in_(("benchmark", "evaluation")))
            .order_by(BudgetCap.scope, BudgetCap.target)
        )
    )
    return {
        "currency": currency(),
        "site": {"evaluation": _f(site)},
        "tenant": {
            "slug": tenant.slug,
            "day": _f(day),
            "day_utc": budget.utc_today().isoformat(),
            "used_today": float(used),
            "left_today": None if day is None else float(max(day - used, Decimal(0))),
        },
        "benchmarks": [
            {"benchmark": r.benchmark_slug, "amount": float(r.amount), "updated_by": r.updated_by}
            for r in rows
            if r.scope == "benchmark"
        ],
        "evaluations": [
            {"evaluation_id": str(r.evaluation_id), "amount": float(r.amount), "updated_by": r.updated_by}
            for r in rows
            if r.scope == "evaluation"
        ],
    }


@router.put("/v1/caps/site/evaluation")
async def put_site_cap(
    body: CapUpdate, session: AsyncSession = Depends(db_session), principal: Principal = Depends(current_principal)
) -> dict[str, Any]:
    """The site's default cap of every evaluation (site administration: it applies to every tenant)."""
    before = await _row_amount(session, "site_evaluation", "")
    return await _set_cap(
        session, principal, "site_evaluation", "", body.amount, before, None, "the site's default evaluation cap"
    )


@router.put("/v1/caps/tenant/day")
async def put_tenant_day_cap(
    body: CapUpdate, session: AsyncSession = Depends(db_session), principal: Principal = Depends(current_principal)
) -> dict[str, Any]:
    """The caller's tenant's cap per UTC day."""
    t = principal.tenant
    before = await _row_amount(session, "tenant_day", str(t.id))
    return await _set_cap(
        session, principal, "tenant_day", str(t.id), body.amount, before, None, f"tenant {t.slug!r}'s daily cap", tenant_id=t.id
    )


class TenantLimitsUpdate(BaseModel):
    """``PUT /v1/caps/tenant/limits``: the tenant's own work limits; a field left out is unchanged, null
    returns it to the site default."""

    model_config = ConfigDict(extra="forbid")

    max_items_per_evaluation: int | None = Field(
        None, ge=1, le=INT32_MAX, description="Items (samples × repeats) of one evaluation."
    )
    max_queued_items: int | None = Field(None, ge=1, le=INT32_MAX, description="Items not yet finished across its evaluations.")
    max_evaluations_per_minute: int | None = Field(None, ge=1, le=INT32_MAX, description="Evaluations created in any 60 s.")
    min_schedule_interval_s: int | None = Field(None, ge=1, le=INT32_MAX, description="Closest two runs of a schedule, seconds.")


def _limits_view(request: Request, tenant: Tenant) -> dict[str, Any]:
    site = WorkLimits.from_settings(request.app.state.settings)
    return {
        "tenant": tenant.slug,
        "site": asdict(site),
        "own": {c: getattr(tenant, c) for c in TENANT_LIMIT_COLUMNS},
        "effective": asdict(site.for_tenant(tenant)),
    }


@router.get("/v1/caps/tenant/limits")
async def get_tenant_limits(request: Request, principal: Principal = Depends(current_principal)) -> dict[str, Any]:
    """The caller's tenant's work limits: the site defaults (``UEP_MAX_ITEMS_PER_EVALUATION``,
    ``UEP_MAX_QUEUED_ITEMS``, ``UEP_MAX_EVALUATIONS_PER_MINUTE``, ``UEP_MIN_SCHEDULE_INTERVAL_S``), the tenant's
    own values (null = the default) and the effective ones (see :class:`uep_common.records.creation.WorkLimits`)."""
    return _limits_view(request, principal.tenant)


@router.put("/v1/caps/tenant/limits")
async def put_tenant_limits(
    body: TenantLimitsUpdate,
    request: Request,
    session: AsyncSession = Depends(db_session),
    principal: Principal = Depends(current_principal),
) -> dict[str, Any]:
    """Set the own work limits of the tenant the site admin acts for (named by ``X-UEP-Tenant``; site
    administration). Returns the view of ``GET /v1/caps/tenant/limits``; this gateway's principals see the
    new limits at once, other replicas within the credential cache's TTL."""
    tenant = await session.scalar(select(Tenant).where(Tenant.id == principal.tenant.id).with_for_update())
    assert tenant is not None  # the principal's tenant, loaded by current_principal
    for name, value in body.model_dump(exclude_unset=True).items():
        setattr(tenant, name, value)
    await session.commit()
    forget_all(request)  # cached principals hold the tenant row with its old limits
    return _limits_view(request, tenant)


@router.put("/v1/caps/benchmarks/{slug}")
async def put_benchmark_cap(
    slug: str, body: CapUpdate, session: AsyncSession = Depends(db_session), principal: Principal = Depends(current_principal)
) -> dict[str, Any]:
    """The cap of each of the tenant's evaluations of benchmark ``slug`` (overrides the site default)."""
    if await session.scalar(select(Benchmark.id).where(Benchmark.slug == slug).limit(1)) is None:
        raise FieldError("not_found", ("path", "slug"), f"unknown benchmark {slug!r}", "unknown_benchmark")
    t = principal.tenant
    site = await _row_amount(session, "site_evaluation", "")
    target = cap_target("benchmark", t.id, slug)
    own = await _row_amount(session, "benchmark", target)
    before = own if own is not None else site
    return await _set_cap(
        session,
        principal,
        "benchmark",
        target,
        body.amount,
        before,
        site,
        f"tenant {t.slug!r}'s cap for evaluations of {slug!r}",
        tenant_id=t.id,
        benchmark_slug=slug,
    )


@router.put("/v1/caps/evaluations/{evaluation_id}")
async def put_evaluation_cap(
    evaluation_id: uuid.UUID,
    body: CapUpdate,
    session: AsyncSession = Depends(db_session),
    principal: Principal = Depends(current_principal),
) -> dict[str, Any]:
    """The cap of one evaluation of the caller's tenant (overrides the benchmark and site caps); 404 when the
    evaluation is unknown or another tenant's. Raising it after the evaluation ended ``budget_exhausted``
    does not resume it."""
    ev = await owned_evaluation(session, evaluation_id)
    bench = await session.get(Benchmark, ev.benchmark_id)
    assert bench is not None  # evaluations.benchmark_id: a NOT NULL foreign key (no ON DELETE)
    before, _ = await budget.evaluation_cap(session, ev.tenant_id, bench.slug, ev.id)
    fallback, _ = await budget.evaluation_cap(session, ev.tenant_id, bench.slug, None)
    return await _set_cap(
        session,
        principal,
        "evaluation",
        str(ev.id),
        body.amount,
        before,
        fallback,
        f"evaluation {ev.id}'s cap",
        tenant_id=ev.tenant_id,
        evaluation_id=ev.id,
    )


# ---------------------------------------------------------------- prices


class ModelCostUpdate(BaseModel):
    """``PUT /v1/costs/models/{model}``: the model's cost unit, prices (site currency) and expected item size.
    Omitted fields keep their value."""

    model_config = ConfigDict(extra="forbid")

    cost_unit: Literal["none", "tokens", "gpu_second", "call"] | None = None
    price_per_1k_input_tokens: Decimal | None = Field(None, ge=0, max_digits=24, decimal_places=10)
    price_per_1k_output_tokens: Decimal | None = Field(None, ge=0, max_digits=24, decimal_places=10)
    price_per_gpu_second: Decimal | None = Field(None, ge=0, max_digits=24, decimal_places=10)
    price_per_call: Decimal | None = Field(None, ge=0, max_digits=24, decimal_places=10)
    expected_input_tokens: int | None = Field(None, ge=0, le=10_000_000)
    expected_output_tokens: int | None = Field(None, ge=0, le=10_000_000)
    expected_latency_ms: float | None = Field(None, ge=0, le=86_400_000)


COST_FIELDS = tuple(ModelCostUpdate.model_fields)


def _model_cost(m: Model) -> dict[str, Any]:
    out: dict[str, Any] = {"model": m.name, "version": m.version, "currency": currency()}
    for k in COST_FIELDS:
        v = getattr(m, k)
        out[k] = float(v) if isinstance(v, Decimal) else v
    return out


@router.get("/v1/costs/models")
async def list_model_costs(session: AsyncSession = Depends(db_session)) -> dict[str, Any]:
    """The cost model of every registered model (units: ``none``, ``tokens``, ``gpu_second`` — latency as the
    GPU-time proxy — and ``call``; see :mod:`uep_common.contract.costs`)."""
    rows = await session.scalars(select(Model).order_by(Model.name, Model.version))
    return {"currency": currency(), "units": list(COST_UNITS), "models": [_model_cost(m) for m in rows]}


@router.put("/v1/costs/models/{model}")
async def put_model_cost(model: str, body: ModelCostUpdate, session: AsyncSession = Depends(db_session)) -> dict[str, Any]:
    """Set a model's cost unit, prices and expected item size (site administration; every version of the
    name unless the path is a model id). Evaluations already created keep the per-item estimate they were
    created with."""
    try:
        q = select(Model).where(Model.id == uuid.UUID(model))
    except ValueError:
        q = select(Model).where(Model.name == model)
    rows = list(await session.scalars(q))
    if not rows:
        raise FieldError("not_found", ("path", "model"), f"unknown model {model!r}", "unknown_model")
    for m in rows:
        for k, v in body.model_dump(exclude_none=True).items():
            setattr(m, k, v)
    await session.commit()
    return {"models": [_model_cost(m) for m in rows]}


class BenchmarkCostUpdate(BaseModel):
    """``PUT /v1/costs/benchmarks/{slug}``: expected size of one item of the benchmark (null: the model's)."""

    model_config = ConfigDict(extra="forbid")

    expected_input_tokens: int | None = Field(None, ge=0, le=10_000_000)
    expected_output_tokens: int | None = Field(None, ge=0, le=10_000_000)
    expected_latency_ms: float | None = Field(None, ge=0, le=86_400_000)


@router.get("/v1/costs/benchmarks/{slug}")
async def get_benchmark_cost(slug: str, session: AsyncSession = Depends(db_session)) -> dict[str, Any]:
    """A benchmark's expected item size (nulls: the model's expectation applies).

    A slug the caller cannot see (unknown, or another tenant's private upload) is a 404, as on ``PUT``.
    """
    if await session.scalar(select(Benchmark.id).where(Benchmark.slug == slug).limit(1)) is None:
        raise FieldError("not_found", ("path", "slug"), f"unknown benchmark {slug!r}", "unknown_benchmark")
    p = await session.get(BenchmarkCostProfile, slug)
    return {"benchmark": slug, **{k: getattr(p, k) if p else None for k in BenchmarkCostUpdate.model_fields}}


@router.put("/v1/costs/benchmarks/{slug}")
async def put_benchmark_cost(slug: str, body: BenchmarkCostUpdate, session: AsyncSession = Depends(db_session)) -> dict[str, Any]:
    """Set a benchmark's expected item size (site administration)."""
    if await session.scalar(select(Benchmark.id).where(Benchmark.slug == slug).limit(1)) is None:
        raise FieldError("not_found", ("path", "slug"), f"unknown benchmark {slug!r}", "unknown_benchmark")
    p = await session.get(BenchmarkCostProfile, slug)
    if p is None:
        p = BenchmarkCostProfile(benchmark_slug=slug)
        session.add(p)
    for k, v in body.model_dump().items():
        setattr(p, k, v)
    await session.commit()
    return {"benchmark": slug, **body.model_dump()}


# ---------------------------------------------------------------- spend


@router.get("/v1/spend")
async def spend(
    group_by: Literal["tenant", "day", "evaluation", "role"] = Query("tenant"),
    tenant: str | None = Query(
        None, max_length=64, description="Tenant slug: the caller's own (a site admin acting across tenants: any)."
    ),
    evaluation_id: uuid.UUID | None = Query(None),
    role: Literal["inference", "judge"] | None = Query(None),
    since: date | None = Query(None, description="First UTC day included."),
    until: date | None = Query(None, description="Last UTC day included."),
    session: AsyncSession = Depends(db_session),
    principal: Principal = Depends(current_principal),
) -> dict[str, Any]:
    """Spend from the ledger, one row per group: ``reserved`` (reservations made), ``released`` (reservations
    settled), ``open_reserved`` (= reserved − released: items in flight or never scored), ``settled`` (actual
    cost: inference settled + judge charged), ``items_reserved``, ``items_settled``, ``calls`` (settled scores +
    judge charges). ``spent`` = settled + open_reserved is what counts against caps. Only the caller's
    tenant's spend: naming another tenant is 403 naming ``tenant`` unless a site admin acts across tenants
    (who sees every tenant's without ``tenant``)."""
    s = SpendEntry
    tenant_id = principal.tenant.id
    if tenant is not None and tenant != principal.tenant.slug:
        if not principal.site_act:
            raise FieldError(
                "forbidden",
                ("query", "tenant"),
                "only a site admin acting across tenants (X-UEP-Site-Admin: true) may see another tenant's spend",
                "forbidden",
            )
        other_id = await session.scalar(select(Tenant.id).where(Tenant.slug == tenant))
        if other_id is None:
            raise FieldError("not_found", ("query", "tenant"), f"unknown tenant {tenant!r}", "unknown_tenant")
        tenant_id = other_id
    if since and until and since > until:
        raise FieldError("invalid", ("query", "until"), "until is before since", "bad_range")
    key = {"tenant": Tenant.slug, "day": s.day, "evaluation": s.evaluation_id, "role": s.role}[group_by]
    q = select(
        key,
        func.coalesce(func.sum(case((s.kind == "reserve", s.reserved), else_=0)), 0),
        func.coalesce(-func.sum(case((s.kind == "settle", s.reserved), else_=0)), 0),
        func.coalesce(func.sum(s.settled), 0),
        func.coalesce(func.sum(case((s.kind == "reserve", s.items), else_=0)), 0),
        func.coalesce(func.sum(case((s.kind == "settle", s.items), else_=0)), 0),
        # a compacted evaluation's aggregate rows stand for ``entries`` rows each (uep_common.records.ledger_compaction)
        func.coalesce(func.sum(func.coalesce(s.entries, 1)).filter(s.kind != "reserve"), 0),
    ).join(Tenant, Tenant.id == s.tenant_id)
    if not (principal.site_act and tenant is None):
        q = q.where(s.tenant_id == tenant_id)
    if evaluation_id:
        q = q.where(s.evaluation_id == evaluation_id)
    if role:
        q = q.where(s.role == role)
    if since:
        q = q.where(s.day >= since)
    if until:
        q = q.where(s.day <= until)
    rows = (await session.execute(q.group_by(key).order_by(key))).all()
    out: list[dict[str, Any]] = []
    for k, reserved, released, settled, items_r, items_s, calls in rows:
        reserved, released, settled = Decimal(reserved), Decimal(released), Decimal(settled)
        out.append(
            {
                group_by: k.isoformat() if isinstance(k, date) else str(k),
                "reserved": float(reserved),
                "released": float(released),
                "open_reserved": float(reserved - released),
                "settled": float(settled),
                "spent": float(settled + reserved - released),
                "items_reserved": int(items_r),
                "items_settled": int(items_s),
                "calls": int(calls),
            }
        )
    totals = {
        k: sum(r[k] for r in out)
        for k in ("reserved", "released", "open_reserved", "settled", "spent", "items_reserved", "items_settled", "calls")
    }
    return {"currency": currency(), "group_by": group_by, "rows": out, "totals": totals}


@router.get("/v1/evaluations/{evaluation_id}/budget")
async def evaluation_budget(evaluation_id: uuid.UUID, session: AsyncSession = Depends(db_session)) -> dict[str, Any]:
    """One evaluation's budget account: estimate, per-item estimate, reserved (total and open), settled,
    judge charges, its cap in force and where it comes from, and why a cap stopped it (if it did). 404 when
    the evaluation is unknown or another tenant's."""
    ev = await owned_evaluation(session, evaluation_id)
    a = await session.get(BudgetAccount, evaluation_id)
    bench = await session.get(Benchmark, ev.benchmark_id)
    assert bench is not None  # evaluations.benchmark_id: a NOT NULL foreign key (no ON DELETE)
    cap, source = await budget.evaluation_cap(session, ev.tenant_id, bench.slug, ev.id)
    body = {"evaluation_id": str(ev.id), "status": ev.status, "currency": currency(), "cap": _f(cap), "cap_source": source}
    if a is None:
        return body | {"account": None}
    return body | {
        "account": {
            "cost_unit": a.cost_unit,
            "per_item": float(a.per_item),
            "planned_items": a.planned_items,
            "estimate": float(a.estimate),
            "items_reserved": a.items_reserved,
            "items_settled": a.items_settled,
            "reserved_total": float(a.reserved_total),
            "reserved_open": float(a.reserved_open),
            "settled_total": float(a.settled_total),
            "judge_total": float(a.judge_total),
            "exhausted_reason": a.exhausted_reason,
            "exhausted_at": a.exhausted_at,
        }
    }
