"""Which pairs of evaluations ``GET /v1/evaluations/{id}/compare?baseline=`` and ``POST …/reports`` accept, on a
migrated database of its own: two versions of one benchmark (one slug) are compared on the items they share;
evaluations of two different benchmarks are refused with 422 ``other_benchmark`` naming the baseline field."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from .migrated import migrated_database

pytestmark = pytest.mark.db
DB_NAME = os.environ.get("UEP_TEST_DB", "uep_test") + "_compare"


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    with migrated_database(DB_NAME) as eng:
        yield eng


def _world(engine: Engine) -> dict[str, uuid.UUID]:
    """One tenant and model; benchmark ``qa`` in two versions and benchmark ``other``, each with samples
    ``s0``–``s3``; one completed evaluation of each with results: on qa v1 items 0–3 correct; on qa v2 items
    0,1 correct and 2,3 wrong; on other all correct."""
    from uep_common.tables.models import Benchmark, Evaluation, Model, Sample, SampleResult, Tenant

    ids: dict[str, uuid.UUID] = {}
    with Session(engine) as s, s.begin():
        tenant = Tenant(slug=f"cmp-{uuid.uuid4().hex[:6]}", name="T")
        model = Model(name=f"cmp-model-{uuid.uuid4().hex[:6]}", backend="triton", endpoint="127.0.0.1:1")
        tag = uuid.uuid4().hex[:6]
        benches = {
            "v1": Benchmark(
                slug=f"qa-{tag}", name="qa", version="v1", category="nlp", config={"metric": {"name": "exact_match"}}
            ),
            "v2": Benchmark(
                slug=f"qa-{tag}", name="qa", version="v2", category="nlp", config={"metric": {"name": "exact_match"}}
            ),
            "other": Benchmark(
                slug=f"other-{tag}", name="o", version="v1", category="nlp", config={"metric": {"name": "exact_match"}}
            ),
        }
        s.add_all([tenant, model, *benches.values()])
        s.flush()
        ids["tenant"] = tenant.id
        for key, bench in benches.items():
            samples = [
                Sample(benchmark_id=bench.id, ordinal=i, external_id=f"s{i}", input={"q": i}, reference={"a": i})
                for i in range(4)
            ]
            ev = Evaluation(tenant_id=tenant.id, benchmark_id=bench.id, model_id=model.id, total_items=4, status="completed")
            s.add_all([*samples, ev])
            s.flush()
            for i, sample in enumerate(samples):
                ok = key != "v2" or i < 2
                s.add(
                    SampleResult(
                        evaluation_id=ev.id,
                        sample_id=sample.id,
                        is_correct=ok,
                        score=1.0 if ok else 0.0,
                        metric_name="exact_match",
                        metric_version="1",
                        score_event_id=uuid.uuid4(),
                    )
                )
            ids[key] = ev.id
    return ids


async def _call(engine: Engine, tenant_id: uuid.UUID, route, *args, **kwargs):
    from uep_common.runtime.session import make_async_engine, make_sessionmaker
    from uep_common.tables.models import Tenant
    from uep_gateway.auth import Principal
    from uep_gateway.tenancy import scoped_session

    eng = make_async_engine(str(engine.url.render_as_string(hide_password=False)))
    try:
        async with make_sessionmaker(eng)() as session:
            tenant = await session.get(Tenant, tenant_id)
            assert tenant is not None
            session.expunge(tenant)
            await session.commit()
            scoped = scoped_session(session, Principal(tenant=tenant, role="admin", kind="key", name="key:test"))
            return await route(*args, session=scoped, **kwargs)
    finally:
        await eng.dispose()


def test_a_baseline_of_another_benchmark_is_refused_naming_the_baseline(engine: Engine) -> None:
    from uep_gateway.api.reports import compare_with_baseline
    from uep_gateway.error_responses import status_of
    from uep_gateway.errors import FieldError

    ids = _world(engine)
    with pytest.raises(FieldError) as info:
        asyncio.run(_call(engine, ids["tenant"], compare_with_baseline, ids["v1"], baseline=ids["other"], limit=10))
    assert status_of(info.value) == 422
    [problem] = info.value.detail
    assert problem["loc"] == ["query", "baseline"] and problem["type"] == "other_benchmark"
    assert "other-" in problem["msg"] and "qa-" in problem["msg"]


def test_two_versions_of_one_benchmark_are_compared_on_their_shared_items(engine: Engine) -> None:
    from uep_gateway.api.reports import compare_with_baseline

    ids = _world(engine)
    result = asyncio.run(
        _call(engine, ids["tenant"], compare_with_baseline, ids["v2"], baseline=ids["v1"], limit=10, include_unchanged=False)
    )
    # paired by external id s0..s3 (different sample rows): 2 still passing, 2 regressions (v1 right, v2 wrong)
    assert result.paired_by == "external_id"
    assert result.transition_counts["regression"] == 2 and result.transition_counts["still_passing"] == 2
    assert result.mcnemar.b == 2 and result.mcnemar.c == 0


def test_a_report_with_a_baseline_of_another_benchmark_is_refused(engine: Engine) -> None:
    from starlette.requests import Request
    from starlette.responses import Response

    from uep_gateway.api.reports import ReportRequest, request_report
    from uep_gateway.error_responses import status_of
    from uep_gateway.errors import FieldError

    ids = _world(engine)
    request = Request({"type": "http", "method": "POST", "path": "/", "headers": []})
    with pytest.raises(FieldError) as info:
        asyncio.run(
            _call(
                engine,
                ids["tenant"],
                request_report,
                ids["v1"],
                request,
                Response(),
                body=ReportRequest(baseline=ids["other"]),
            )
        )
    assert status_of(info.value) == 422
    assert info.value.detail[0]["loc"] == ["body", "baseline"] and info.value.detail[0]["type"] == "other_benchmark"


def test_compare_itself_refuses_other_benchmarks(engine: Engine) -> None:
    # the library function every caller (gateway, reporter, experiment views) goes through
    from uep_common.analytics.comparison import NotComparableError, compare
    from uep_common.runtime.session import make_async_engine, make_sessionmaker

    ids = _world(engine)

    async def run() -> None:
        eng = make_async_engine(engine.url.render_as_string(hide_password=False))
        try:
            async with make_sessionmaker(eng)() as session:
                with pytest.raises(NotComparableError) as info:
                    await compare(session, ids["v1"], ids["other"])
                assert info.value.reason == "other_benchmark"
        finally:
            await eng.dispose()

    asyncio.run(run())
