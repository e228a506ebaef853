"""``GET /v1/benchmarks`` and ``GET /v1/models``."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.configs import parse_benchmark_config
from uep_common.db.models import BENCHMARK_STATUSES, Benchmark, Model
from uep_gateway.deps import db_session
from uep_gateway.schemas import BenchmarkView, ModelView
from uep_gateway.validation import NUL_CHECK

router = APIRouter(prefix="/v1", tags=["catalogue"], dependencies=NUL_CHECK)


def benchmark_view(b: Benchmark) -> BenchmarkView:
    """The catalogue view of a benchmark row."""
    return BenchmarkView(
        **{k: getattr(b, k) for k in BenchmarkView.model_fields if k != "metric"},
        metric=parse_benchmark_config(b.config).metric_name,
    )


@router.get("/benchmarks", response_model=list[BenchmarkView])
async def list_benchmarks(
    status: str | None = Query(None, pattern="^(" + "|".join(BENCHMARK_STATUSES) + ")$"),
    session: AsyncSession = Depends(db_session),
) -> list[BenchmarkView]:
    """Every benchmark version, newest first within a slug; ``status`` filters."""
    q = select(Benchmark).order_by(Benchmark.slug, Benchmark.created_at.desc())
    if status:
        q = q.where(Benchmark.status == status)
    return [benchmark_view(b) for b in await session.scalars(q)]


@router.get("/models", response_model=list[ModelView])
async def list_models(session: AsyncSession = Depends(db_session)) -> list[ModelView]:
    """Every registered model."""
    rows = await session.scalars(select(Model).order_by(Model.name, Model.created_at.desc()))
    return [ModelView.model_validate(m, from_attributes=True) for m in rows]
