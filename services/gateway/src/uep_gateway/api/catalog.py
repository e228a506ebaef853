"""``GET /v1/benchmarks`` (the model registry is :mod:`uep_gateway.api.models`).

A tenant sees the site catalogue (built-ins and benchmarks without an owner), benchmarks other tenants
share, and its own private ones — row-level security enforces it and :func:`visible_benchmark` says the
same in the query.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Query
from pydantic import Field
from sqlalchemy import ColumnElement, or_, select, true
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.configs import parse_benchmark_config
from uep_common.tables.models import BENCHMARK_STATUSES, Benchmark
from uep_gateway.deps import db_session
from uep_gateway.schemas import BenchmarkView
from uep_gateway.tenancy import principal_of_session
from uep_gateway.validation import NUL_CHECK

router = APIRouter(prefix="/v1", tags=["catalogue"], dependencies=NUL_CHECK)


class CatalogBenchmarkView(BenchmarkView):
    """A benchmark version in the catalogue, with who may read it."""

    visibility: Literal["private", "shared", "site"] = Field(
        description="private: its owner tenant only; shared: every tenant may read it; site: the site catalogue "
        "(built-ins and benchmarks without an owner), readable by every tenant."
    )
    owned: bool = Field(description="True when the caller's tenant owns it (may upload new versions of its slug).")


def visible_benchmark(session: AsyncSession) -> ColumnElement[bool]:
    """The benchmarks the caller of the tenant-scoped ``session`` may read: the site catalogue, shared ones and
    its tenant's own (true for a site admin acting across tenants)."""
    principal = principal_of_session(session)
    if principal.site_act:
        return true()
    return or_(
        Benchmark.owner_tenant_id.is_(None),
        Benchmark.visibility == "shared",
        Benchmark.owner_tenant_id == principal.tenant.id,
    )


def benchmark_view(session: AsyncSession, b: Benchmark) -> CatalogBenchmarkView:
    """The catalogue view of a benchmark row, as the caller of the tenant-scoped ``session`` sees it."""
    principal = principal_of_session(session)
    return CatalogBenchmarkView(
        **{k: getattr(b, k) for k in BenchmarkView.model_fields if k != "metric"},
        metric=parse_benchmark_config(b.config).metric_name,
        visibility="site" if b.owner_tenant_id is None else b.visibility,
        owned=b.owner_tenant_id is not None and b.owner_tenant_id == principal.tenant.id,
    )


@router.get("/benchmarks", response_model=list[CatalogBenchmarkView])
async def list_benchmarks(
    status: str | None = Query(None, pattern="^(" + "|".join(BENCHMARK_STATUSES) + ")$"),
    session: AsyncSession = Depends(db_session),
) -> list[CatalogBenchmarkView]:
    """Every benchmark version the caller may read, newest first within a slug; ``status`` filters."""
    q = select(Benchmark).where(visible_benchmark(session)).order_by(Benchmark.slug, Benchmark.created_at.desc())
    if status:
        q = q.where(Benchmark.status == status)
    return [benchmark_view(session, b) for b in await session.scalars(q)]
