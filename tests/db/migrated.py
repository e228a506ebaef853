"""A database of a test module's own: dropped, created and migrated to the latest schema."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import Engine, text

from servers import PG_SERVER

SERVER = f"{PG_SERVER}"
"""The test PostgreSQL server (trust authentication, user postgres), without a database name."""


def fresh_database_url(name: str) -> str:
    """URL of database ``name`` of :data:`SERVER`, dropped (with its connections) if it exists, created and
    migrated (``uep_common.admin.migrate``); the database is kept for inspection until the next run."""
    from uep_common.admin import migrate
    from uep_common.runtime.session import make_sync_engine

    admin = make_sync_engine(f"{SERVER}/postgres")
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        c.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    url = f"{SERVER}/{name}"
    migrate(url)
    return url


@contextmanager
def migrated_database(name: str) -> Iterator[Engine]:
    """A sync engine on the :func:`fresh_database_url` ``name``, disposed on exit."""
    from uep_common.runtime.session import make_sync_engine

    eng = make_sync_engine(fresh_database_url(name))
    try:
        yield eng
    finally:
        eng.dispose()


def engine_fixture(name: str):
    """A module-scoped pytest fixture ``engine``: the engine of :func:`migrated_database` ``name``."""

    def engine() -> Iterator[Engine]:
        with migrated_database(name) as eng:
            yield eng

    return pytest.fixture(scope="module", name="engine")(engine)


def evaluation_of(s, prefix: str, n: int, **columns):
    """Add to session ``s`` (and flush) a tenant, a Triton model and a benchmark named ``prefix-…`` and an
    evaluation (``columns`` its further columns, e.g. ``status``) of that model on the benchmark's ``n`` samples
    (input ``{"q": i}``, reference ``{"a": i}``); returns ``(tenant, model, benchmark, samples, evaluation)``."""
    from uep_common.tables.models import Benchmark, Evaluation, Model, Sample, Tenant

    tenant = Tenant(slug=f"{prefix}-t", name="T")
    model = Model(name=f"{prefix}-model", backend="triton", endpoint="127.0.0.1:1")
    bench = Benchmark(slug=f"{prefix}-b", name="b", version="v1", category="nlp")
    s.add_all([tenant, model, bench])
    s.flush()
    samples = [Sample(benchmark_id=bench.id, ordinal=i, input={"q": i}, reference={"a": i}) for i in range(n)]
    ev = Evaluation(tenant_id=tenant.id, benchmark_id=bench.id, model_id=model.id, total_items=n, **columns)
    s.add_all([*samples, ev])
    s.flush()
    return tenant, model, bench, samples, ev
