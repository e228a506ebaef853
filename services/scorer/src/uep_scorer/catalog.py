"""Publish the scorer's metric registry to PostgreSQL (table ``metric_catalog``) at start-up, so the gateway
can validate benchmark configs and list metrics without importing the scorer."""

from __future__ import annotations

from typing import Any

from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from uep_common.tables.models import MetricCatalogEntry
from uep_scorer.metrics import available_metrics, get_metric


def catalogue_rows() -> list[dict[str, Any]]:
    """One row per registered metric: name, version, params (name → description), source, param types, required
    params and the JSON Schema of the reference it reads."""
    rows = []
    for name in available_metrics():
        m = get_metric(name)
        rows.append(
            {
                "name": name,
                "version": m.version,
                "params": dict(m.params),
                "source": m.source,
                "param_types": dict(m.param_types),
                "required_params": list(m.required_params),
                "reference_schema": dict(m.reference_schema),
            }
        )
    return rows


async def register_catalogue(sessionmaker: async_sessionmaker[AsyncSession]) -> int:
    """Upsert every metric of this scorer build into ``metric_catalog``; returns how many."""
    rows = catalogue_rows()
    stmt = pg_insert(MetricCatalogEntry).values(rows)
    stmt = stmt.on_conflict_do_update(
        index_elements=["name"],
        set_={
            k: getattr(stmt.excluded, k)
            for k in ("version", "params", "source", "param_types", "required_params", "reference_schema")
        },
    )
    async with sessionmaker() as s, s.begin():
        await s.execute(stmt)
    return len(rows)
