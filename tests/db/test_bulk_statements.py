"""Column-array statements (uep_common.tables.bulk) on a migrated database of their own: the reporter's result insert
stores what the row-per-row insert stored (SQL NULL for a missing error, JSON objects, the trigger's tenant),
skips duplicates, and is one statement that psycopg prepares whatever the batch size; the outbox staging returns
each event's own row id."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from .migrated import SERVER, migrated_database

pytestmark = pytest.mark.db
DB_NAME = os.environ.get("UEP_TEST_BULK_DB", "uep_bulk_statements")


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    with migrated_database(DB_NAME) as eng:
        yield eng


@pytest.fixture(scope="module")
def evaluation(engine: Engine) -> tuple[uuid.UUID, uuid.UUID, uuid.UUID, uuid.UUID, list[uuid.UUID]]:
    """``(evaluation, tenant, model, benchmark, sample ids)`` of a running 200-item evaluation."""
    from uep_common.tables.models import Benchmark, Evaluation, Model, Sample, Tenant

    with Session(engine) as s, s.begin():
        tenant = Tenant(slug="bulk-t", name="T")
        model = Model(name="bulk-model", backend="triton", endpoint="127.0.0.1:1")
        bench = Benchmark(slug="bulk-b", name="b", version="v1", category="nlp")
        s.add_all([tenant, model, bench])
        s.flush()
        samples = [Sample(benchmark_id=bench.id, ordinal=i, input={"q": i}, reference={"a": i}) for i in range(200)]
        ev = Evaluation(tenant_id=tenant.id, benchmark_id=bench.id, model_id=model.id, total_items=200, status="running")
        s.add_all([*samples, ev])
        s.flush()
        return ev.id, tenant.id, model.id, bench.id, [x.id for x in samples]


def _score(ids, ordinal: int, **fields):
    from uep_common.contract.events import ScoreComputed

    ev, tenant, model, bench, samples = ids
    values = {"metric_name": "exact_match", "metric_version": "1", "is_correct": True, "score": 1.0, "output": "A"}
    return ScoreComputed(
        evaluation_id=ev, tenant_id=tenant, sample_id=samples[ordinal], benchmark_id=bench, model_id=model, **{**values, **fields}
    )


def test_result_insert_stores_each_row_once_with_nulls_and_json(engine: Engine, evaluation) -> None:
    from uep_common.contract.events import ErrorInfo, Prediction
    from uep_common.runtime.session import make_async_engine, make_sessionmaker
    from uep_reporter.results import store_scores

    ok = _score(evaluation, 0, metrics={"extracted_letter": "A"})
    failed = _score(
        evaluation,
        1,
        is_correct=None,
        score=None,
        output=None,
        error=ErrorInfo(stage="inference", type="timeout", message="no answer in 30 s"),
        prediction=Prediction(label="spam", probabilities={"spam": 0.75, "ham": 0.25}),
    )

    async def store() -> list:
        eng = make_async_engine(f"{SERVER}/{DB_NAME}")
        try:
            async with make_sessionmaker(eng)() as s, s.begin():
                return await store_scores(s, [ok, failed, ok])  # ok twice: the second is a duplicate
        finally:
            await eng.dispose()

    progress = asyncio.run(store())
    assert [(p.completed, p.errors) for p in progress] == [(2, 1)]
    with engine.connect() as c:
        rows = c.execute(
            text(
                "SELECT sample_id, output, is_correct, error IS NULL, error, prediction IS NULL, prediction, metrics, "
                "tenant_id, score_event_id FROM sample_results WHERE evaluation_id = :e ORDER BY id"
            ),
            {"e": evaluation[0]},
        ).all()
    assert [tuple(r) for r in rows] == [
        (evaluation[4][0], "A", True, True, None, True, None, {"extracted_letter": "A"}, evaluation[1], ok.event_id),
        (
            evaluation[4][1],
            None,
            None,
            False,
            {"stage": "inference", "type": "timeout", "message": "no answer in 30 s"},
            False,
            {"label": "spam", "probabilities": {"spam": 0.75, "ham": 0.25}},
            {},
            evaluation[1],
            failed.event_id,
        ),
    ]
    # a second delivery of both changes nothing
    assert asyncio.run(store()) == []


def test_one_prepared_statement_for_every_batch_size(engine: Engine, evaluation) -> None:
    from uep_common.runtime.session import make_async_engine, make_sessionmaker
    from uep_reporter.results import store_scores

    sizes = [1, 7, 30, 2, 50, 11, 3]  # psycopg prepares a statement on its 6th run (prepare_threshold 5)

    async def run() -> list[str]:
        eng = make_async_engine(f"{SERVER}/{DB_NAME}", pool_size=1)
        try:
            first = 2
            async with make_sessionmaker(eng)() as s:
                for n in sizes:
                    async with s.begin():
                        await store_scores(s, [_score(evaluation, first + i) for i in range(n)])
                    first += n
                async with s.begin():
                    names = await s.execute(text("SELECT statement FROM pg_prepared_statements"))
                    return [str(x) for x in names.scalars()]
        finally:
            await eng.dispose()

    prepared = [q for q in asyncio.run(run()) if q.startswith("INSERT INTO sample_results")]
    assert len(prepared) == 1, prepared
    assert "unnest(" in prepared[0]
    with engine.connect() as c:
        assert c.execute(
            text("SELECT count(*) FROM sample_results WHERE evaluation_id = :e"), {"e": evaluation[0]}
        ).scalar() == 2 + sum(sizes)


def test_outbox_staging_returns_each_events_own_row(engine: Engine, evaluation) -> None:
    from uep_common.runtime.outbox import stage_in_outbox
    from uep_common.runtime.session import make_async_engine, make_sessionmaker

    events = [_score(evaluation, i, metric_name=f"m{i}") for i in range(40)]

    async def stage():
        eng = make_async_engine(f"{SERVER}/{DB_NAME}")
        try:
            async with make_sessionmaker(eng)() as s, s.begin():
                return await stage_in_outbox(s, [(e, {"traceparent": f"00-{e.event_id.hex}-{'0' * 15}1-01"}) for e in events])
        finally:
            await eng.dispose()

    staged = asyncio.run(stage())
    with engine.connect() as c:
        stored = {
            row_id: (str(event_id), payload["metric_name"], headers["traceparent"])
            for row_id, event_id, payload, headers in c.execute(text("SELECT id, event_id, payload, headers FROM outbox"))
        }
    assert [stored[m.id] for m in staged] == [
        (str(e.event_id), e.metric_name, f"00-{e.event_id.hex}-{'0' * 15}1-01") for e in events
    ]
    assert [m.payload["metric_name"] for m in staged] == [f"m{i}" for i in range(40)]
