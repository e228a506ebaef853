"""Fixtures of the scheduler tests that run allocation passes on a real PostgreSQL (no broker, no services).

The database ``<UEP_TEST_DB>_alloc`` (default ``uep_test_alloc``) is dropped, created and migrated once per
session; every test starts from empty scheduling tables (:func:`world`).
"""

from __future__ import annotations

import os
import uuid

import pytest
from sqlalchemy import text

from servers import PG_SERVER

DB_NAME = os.environ.get("UEP_TEST_DB", "uep_test") + "_alloc"
DB_URL = f"{PG_SERVER}/{DB_NAME}"


@pytest.fixture(scope="session")
def alloc_db_url() -> str:
    """URL of a freshly migrated database for allocation tests."""
    from uep_common.admin import migrate
    from uep_common.runtime.session import make_sync_engine

    admin = make_sync_engine(f"{PG_SERVER}/postgres")
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(text(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)"))
        c.execute(text(f"CREATE DATABASE {DB_NAME}"))
    admin.dispose()
    migrate(DB_URL)
    return DB_URL


@pytest.fixture
async def sm(alloc_db_url):
    """Async session factory on the allocation database, emptied of evaluations and scheduler state."""
    from uep_common.runtime.session import make_async_engine, make_sessionmaker

    engine = make_async_engine(alloc_db_url)
    async with engine.begin() as c:
        await c.execute(
            text(
                "TRUNCATE sample_leases, sample_results, outbox, schedule_runs, schedules, sched_flows, sched_tenants, "
                "sched_models, evaluations CASCADE"
            )
        )
        await c.execute(text("UPDATE sched_clock SET vtime = 0"))
    yield make_sessionmaker(engine)
    await engine.dispose()


class World:
    """Builders of tenants, models, a benchmark and running evaluations (direct inserts)."""

    def __init__(self, sm) -> None:
        self.sm = sm

    async def tenant(self, slug: str, **limits: int) -> uuid.UUID:
        """A new tenant; ``limits``: its own work limits (columns of ``tenants``, e.g. ``min_schedule_interval_s``)."""
        from uep_common.tables.models import Tenant

        async with self.sm() as s, s.begin():
            t = Tenant(id=uuid.uuid4(), slug=f"{slug}-{uuid.uuid4().hex[:6]}", name=slug, **limits)
            s.add(t)
        return t.id

    async def model(self, capacity: int | None) -> uuid.UUID:
        from uep_common.tables.models import Model

        async with self.sm() as s, s.begin():
            m = Model(
                id=uuid.uuid4(),
                name=f"m-{uuid.uuid4().hex[:8]}",
                version="1",
                backend="triton",
                endpoint="grpc://127.0.0.1:1",
                triton_model_name="x",
                decoding_defaults={},
                max_in_flight=capacity,
            )
            s.add(m)
        return m.id

    async def benchmark(self, n: int) -> uuid.UUID:
        from sqlalchemy import insert

        from uep_common.tables.models import Benchmark, Sample

        async with self.sm() as s, s.begin():
            b = Benchmark(
                id=uuid.uuid4(),
                slug=f"b-{uuid.uuid4().hex[:8]}",
                name="b",
                version=uuid.uuid4().hex,
                category="custom",
                config={"prompt": {"template": "{{ q }}"}, "metric": {"name": "exact_match", "params": {}}},
                sample_count=n,
            )
            s.add(b)
            await s.flush()
            await s.execute(
                insert(Sample),
                [
                    {"benchmark_id": b.id, "ordinal": i, "input": {"q": str(i)}, "reference": {"answer": "x"}, "meta": {}}
                    for i in range(n)
                ],
            )
        return b.id

    async def evaluation(
        self,
        tenant_id,
        benchmark_id,
        model_id,
        n: int,
        *,
        priority: str = "normal",
        status: str = "running",
        max_parallel: int | None = None,
        experiment_id=None,
        arm: str = "main",
        started_ago_s: float = 0,
    ) -> uuid.UUID:
        from datetime import UTC, datetime, timedelta

        from uep_common.tables.models import Evaluation

        now = datetime.now(UTC)
        async with self.sm() as s, s.begin():
            e = Evaluation(
                id=uuid.uuid4(),
                tenant_id=tenant_id,
                benchmark_id=benchmark_id,
                model_id=model_id,
                status=status,
                priority=priority,
                repeats=1,
                total_items=n,
                config={"max_in_flight": max_parallel} if max_parallel else {},
                trace_context={},
                experiment_id=experiment_id,
                arm=arm,
                started_at=now - timedelta(seconds=started_ago_s) if status == "running" else None,
            )
            s.add(e)
        return e.id


@pytest.fixture
def world(sm) -> World:
    """Builders on the emptied allocation database."""
    return World(sm)
