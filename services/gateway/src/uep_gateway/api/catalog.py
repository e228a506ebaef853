"""``GET /v1/benchmarks`` (the model registry is :mod:`uep_gateway.api.models`).

A tenant sees the site catalogue (built-ins and benchmarks without an owner), benchmarks other tenants
share, and its own private ones — row-level security enforces it and :func:`visible_benchmark` says the
same in the query.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.tables.models import BENCHMARK_STATUSES, Benchmark
from uep_gateway.deps import db_session
from uep_gateway.schemas import CatalogBenchmarkView
from uep_gateway.usecases.catalog import benchmark_view, visible_benchmark
from uep_gateway.validation import NUL_CHECK

router = APIRouter(prefix="/v1", tags=["catalogue"], dependencies=NUL_CHECK)


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
