"""The benchmark catalogue as a caller sees it: which benchmarks it may read and how each looks to it."""

from __future__ import annotations

from sqlalchemy import ColumnElement, or_, true
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.configs import parse_benchmark_config
from uep_common.tables.models import Benchmark
from uep_gateway.schemas import BenchmarkView, CatalogBenchmarkView
from uep_gateway.tenancy import principal_of_session


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
