"""The automatic baseline (``GET /v1/evaluations/{id}/compare`` without ``?baseline=``) on a migrated database of
its own: among earlier completed runs of the same model and benchmark it picks the one on the same item set
(same benchmark version, same sampled items) before a more recent one that shares few items, and when no
earlier run exists its 409 says that later ones do, naming the latest, instead of "no other completed
evaluation"."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from .migrated import migrated_database
from .test_compare_benchmarks import _call

pytestmark = pytest.mark.db
DB_NAME = os.environ.get("UEP_TEST_DB", "uep_test") + "_baseline"
T = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
STRATIFIED = list(range(0, 40, 2))  # the 20 even ordinals of 40: a stratified choice of 20
FIRST = list(range(20))  # the first 20: shares 10 of them (0, 2, …, 18)


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    with migrated_database(DB_NAME) as eng:
        yield eng


def _world(engine: Engine) -> dict[str, uuid.UUID]:
    """A 40-sample benchmark and completed evaluations of one model on it, every item correct: ``current``
    (stratified 20, created at T), ``same`` (the same 20, created T − 3 h), ``recent`` (the first 20, created
    T − 1 h, the most recent earlier run) and ``first`` (stratified 20, created T − 5 h)."""
    from uep_common.tables.models import Benchmark, Evaluation, Model, Sample, SampleResult, Tenant

    ids: dict[str, uuid.UUID] = {}
    tag = uuid.uuid4().hex[:6]
    with Session(engine) as s, s.begin():
        tenant = Tenant(slug=f"bl-{tag}", name="T")
        model = Model(name=f"bl-model-{tag}", backend="triton", endpoint="127.0.0.1:1")
        bench = Benchmark(
            slug=f"mmlu-{tag}", name="mmlu", version="v1", category="nlp", config={"metric": {"name": "exact_match"}}
        )
        s.add_all([tenant, model, bench])
        s.flush()
        samples = [
            Sample(benchmark_id=bench.id, ordinal=i, external_id=f"s{i}", input={"q": i}, reference={"a": i}) for i in range(40)
        ]
        s.add_all(samples)
        s.flush()
        ids["tenant"] = tenant.id
        runs = {"first": (STRATIFIED, 5), "same": (STRATIFIED, 3), "recent": (FIRST, 1), "current": (STRATIFIED, 0)}
        for key, (ordinals, hours) in runs.items():
            created = T - timedelta(hours=hours)
            config = {"sampling": "stratified", "sampling_seed": 7, "sample_ordinals": ordinals} if ordinals is STRATIFIED else {}
            ev = Evaluation(
                tenant_id=tenant.id,
                benchmark_id=bench.id,
                model_id=model.id,
                total_items=20,
                sample_limit=20,
                status="completed",
                config=config,
                created_at=created,
                completed_at=created + timedelta(minutes=10),
            )
            s.add(ev)
            s.flush()
            for i in ordinals:
                s.add(
                    SampleResult(
                        evaluation_id=ev.id,
                        sample_id=samples[i].id,
                        is_correct=True,
                        score=1.0,
                        metric_name="exact_match",
                        metric_version="1",
                        score_event_id=uuid.uuid4(),
                    )
                )
            ids[key] = ev.id
    return ids


def test_the_automatic_baseline_is_the_run_on_the_same_items(engine: Engine) -> None:
    from uep_gateway.api.reports import compare_with_baseline

    ids = _world(engine)
    result = asyncio.run(_call(engine, ids["tenant"], compare_with_baseline, ids["current"], baseline=None, limit=10))
    # "recent" is the latest earlier run but shares 10 of the 20 items; "same" ran the same 20
    assert result.baseline_evaluation_id == ids["same"] and result.baseline_reason == "previous_same_items"
    assert (result.n_paired, result.n_current, result.n_baseline) == (20, 20, 20)
    assert result.transition_counts.get("only_in_current", 0) == 0


def test_without_an_earlier_run_the_message_names_the_later_ones(engine: Engine) -> None:
    from uep_gateway.api.reports import compare_with_baseline
    from uep_gateway.error_responses import status_of
    from uep_gateway.errors import FieldError

    ids = _world(engine)
    with pytest.raises(FieldError) as info:
        asyncio.run(_call(engine, ids["tenant"], compare_with_baseline, ids["first"], baseline=None, limit=10))
    assert status_of(info.value) == 409
    [problem] = info.value.detail
    assert problem["type"] == "no_baseline" and "no other completed evaluation" not in problem["msg"]
    assert "was created before this one" in problem["msg"]
    assert "3 completed evaluations of it were created later, the latest " + str(ids["current"]) in problem["msg"]
