"""Row-level security, the second wall between tenants, checked in PostgreSQL itself (no gateway).

A freshly migrated database gets two tenants, each with an evaluation, a result and an annotation task, a
private benchmark of tenant A and a shared one of tenant B. Then, as the gateway's request role
(``uep_tenant_scoped`` with ``uep.tenant_id`` set by :func:`uep_common.tables.rls.scope_statement`), tenant A
must see none of B's rows in any tenant-owned table, must not be able to write a row that points at B's
evaluation, and sees exactly the catalogue it is entitled to.
"""

from __future__ import annotations

import os
import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from servers import PG_SERVER
from uep_common.tables import rls
from uep_common.tables.annotation import AnnotationTask
from uep_common.tables.models import Benchmark, Evaluation, Model, Sample, SampleResult, Tenant

pytestmark = pytest.mark.db
DB_NAME = os.environ.get("UEP_TEST_RLS_DB", "uep_rls_test")
DB_URL = f"{PG_SERVER}/{DB_NAME}"
# Tables with a tenant_id that the gateway never reads: the scheduler's own fair-share state.
SCHEDULER_INTERNAL = {"sched_tenants", "sched_flows"}


@pytest.fixture(scope="module")
def engine():
    from uep_common.admin import migrate
    from uep_common.runtime.session import make_sync_engine

    admin = make_sync_engine(f"{PG_SERVER}/postgres")
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(text(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)"))
        c.execute(text(f"CREATE DATABASE {DB_NAME}"))
    admin.dispose()
    migrate(DB_URL)
    eng = make_sync_engine(DB_URL)
    yield eng
    eng.dispose()


@pytest.fixture(scope="module")
def world(engine):
    """Two tenants' rows, written as the owner (as the services write them)."""
    ids: dict[str, uuid.UUID] = {}
    with Session(engine) as s, s.begin():
        a, b = Tenant(slug="rls-a", name="A"), Tenant(slug="rls-b", name="B")
        model = Model(name="rls-model", backend="triton", endpoint="127.0.0.1:1")
        s.add_all([a, b, model])
        s.flush()
        benches = {
            "builtin": Benchmark(slug="rls-builtin", name="x", version="v1", category="nlp", is_builtin=True),
            "a_private": Benchmark(slug="rls-a-private", name="x", version="v1", category="nlp", owner_tenant_id=a.id),
            "b_private": Benchmark(slug="rls-b-private", name="x", version="v1", category="nlp", owner_tenant_id=b.id),
            "b_shared": Benchmark(
                slug="rls-b-shared", name="x", version="v1", category="nlp", owner_tenant_id=b.id, visibility="shared"
            ),
        }
        s.add_all(benches.values())
        s.flush()
        for key, bench in benches.items():
            sample = Sample(benchmark_id=bench.id, ordinal=0, input={"q": key}, reference={"a": key})
            s.add(sample)
            s.flush()
            ids[f"sample_{key}"] = sample.id
            ids[f"bench_{key}"] = bench.id
        for name, tenant in (("a", a), ("b", b)):
            ev = Evaluation(tenant_id=tenant.id, benchmark_id=benches["builtin"].id, model_id=model.id, total_items=1)
            s.add(ev)
            s.flush()
            s.add(SampleResult(evaluation_id=ev.id, sample_id=ids["sample_builtin"], score_event_id=uuid.uuid4()))
            s.add(
                AnnotationTask(
                    tenant_id=tenant.id,
                    source_evaluation_id=ev.id,
                    name=f"task {name}",
                    source="evaluation",
                    questions=[],
                    annotations_per_item=1,
                    assignment_ttl_seconds=60,
                    quality_threshold=0.5,
                    min_gold_answers=1,
                    total_items=0,
                )
            )
            ids[f"eval_{name}"], ids[f"tenant_{name}"] = ev.id, tenant.id
        ids["model"] = model.id
    return ids


def scoped(engine, tenant_id, cross: bool = False):
    """A connection in a transaction scoped as the gateway scopes a request's transactions."""
    conn = engine.connect()
    conn.begin()
    conn.exec_driver_sql(rls.scope_statement(tenant_id, cross_tenant=cross))
    return conn


def test_triggers_copy_the_owner_tenant_into_child_rows(engine, world):
    with engine.connect() as c:
        rows = c.execute(text("SELECT evaluation_id, tenant_id FROM sample_results")).all()
    assert {(r.evaluation_id, r.tenant_id) for r in rows} == {
        (world["eval_a"], world["tenant_a"]),
        (world["eval_b"], world["tenant_b"]),
    }


def test_every_table_with_a_tenant_column_is_under_row_level_security(engine):
    with engine.connect() as c:
        with_column = set(
            c.execute(
                text(
                    "SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' AND column_name = 'tenant_id'"
                )
            ).scalars()
        )
        protected = set(c.execute(text("SELECT relname FROM pg_class WHERE relrowsecurity AND relkind = 'r'")).scalars())
    assert with_column - SCHEDULER_INTERNAL <= set(rls.TENANT_OWNED), with_column - SCHEDULER_INTERNAL - set(rls.TENANT_OWNED)
    assert set(rls.TENANT_OWNED) <= protected, set(rls.TENANT_OWNED) - protected


@pytest.mark.parametrize("table", [t for t in rls.TENANT_OWNED if t not in ("benchmarks", "samples", "budget_caps", "models")])
def test_a_tenant_sees_none_of_another_tenants_rows(engine, world, table):
    conn = scoped(engine, world["tenant_a"])
    try:
        foreign = conn.execute(
            text(f"SELECT count(*) FROM {table} WHERE tenant_id IS DISTINCT FROM :a"), {"a": world["tenant_a"]}
        )
        assert foreign.scalar() == 0
    finally:
        conn.close()


def test_the_populated_tables_show_each_tenant_exactly_its_own_rows(engine, world):
    for me, other in (("a", "b"), ("b", "a")):
        conn = scoped(engine, world[f"tenant_{me}"])
        try:
            for table in ("evaluations", "sample_results", "annotation_tasks"):
                tenants = set(conn.execute(text(f"SELECT tenant_id FROM {table}")).scalars())
                assert tenants == {world[f"tenant_{me}"]}, table
            assert (
                conn.execute(text("SELECT count(*) FROM evaluations WHERE id = :e"), {"e": world[f"eval_{other}"]}).scalar() == 0
            )
        finally:
            conn.close()


def test_no_tenant_setting_means_no_rows(engine, world):
    conn = scoped(engine, None)
    try:
        assert conn.execute(text("SELECT count(*) FROM evaluations")).scalar() == 0
        assert conn.execute(text("SELECT count(*) FROM sample_results")).scalar() == 0
    finally:
        conn.close()


def test_writes_cannot_reach_another_tenants_rows(engine, world):
    conn = scoped(engine, world["tenant_a"])
    try:
        updated = conn.execute(text("UPDATE evaluations SET status = 'cancelled' WHERE id = :e"), {"e": world["eval_b"]})
        assert updated.rowcount == 0
        deleted = conn.execute(text("DELETE FROM sample_results WHERE evaluation_id = :e"), {"e": world["eval_b"]})
        assert deleted.rowcount == 0
    finally:
        conn.close()
    # A child row pointing at B's evaluation: the trigger cannot see B's evaluation, so the row has no
    # tenant and is refused.
    conn = scoped(engine, world["tenant_a"])
    try:
        with pytest.raises(DBAPIError):
            conn.execute(
                text(
                    "INSERT INTO sample_results (evaluation_id, sample_id, repeat, arm, metrics, attempt, score_event_id) "
                    "VALUES (:e, :s, 0, 'main', '{}', 1, :x)"
                ),
                {"e": world["eval_b"], "s": world["sample_builtin"], "x": uuid.uuid4()},
            )
    finally:
        conn.close()
    # Naming B as the tenant explicitly is refused by the policy's WITH CHECK.
    conn = scoped(engine, world["tenant_a"])
    try:
        with pytest.raises(DBAPIError):
            conn.execute(
                text(
                    "INSERT INTO evaluations (id, tenant_id, benchmark_id, model_id, total_items, status, priority) "
                    "VALUES (:i, :t, :b, :m, 1, 'pending', 'normal')"
                ),
                {"i": uuid.uuid4(), "t": world["tenant_b"], "b": world["bench_builtin"], "m": world["model"]},
            )
    finally:
        conn.close()
    with engine.connect() as c:
        assert c.execute(text("SELECT status FROM evaluations WHERE id = :e"), {"e": world["eval_b"]}).scalar() != "cancelled"
        assert (
            c.execute(text("SELECT count(*) FROM sample_results WHERE evaluation_id = :e"), {"e": world["eval_b"]}).scalar() == 1
        )


def test_the_catalogue_is_the_site_s_plus_own_plus_shared(engine, world):
    conn = scoped(engine, world["tenant_a"])
    try:
        slugs = set(conn.execute(text("SELECT slug FROM benchmarks WHERE slug LIKE 'rls-%'")).scalars())
        assert slugs == {"rls-builtin", "rls-a-private", "rls-b-shared"}
        refs = {r["a"] for r in conn.execute(text("SELECT reference FROM samples")).scalars()}
        assert refs == {"builtin", "a_private", "b_shared"}
        # B's shared benchmark is readable, not writable, by A
        assert (
            conn.execute(text("UPDATE benchmarks SET name = 'taken' WHERE id = :b"), {"b": world["bench_b_shared"]}).rowcount == 0
        )
    finally:
        conn.close()


def test_the_cross_tenant_role_sees_every_tenant(engine, world):
    conn = scoped(engine, None, cross=True)
    try:
        assert conn.execute(text("SELECT current_user")).scalar() == rls.CROSS_TENANT_ROLE
        ids = set(conn.execute(text("SELECT id FROM evaluations")).scalars())
        assert {world["eval_a"], world["eval_b"]} <= ids
    finally:
        conn.close()
