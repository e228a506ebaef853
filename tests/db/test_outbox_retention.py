"""Outbox retention (uep_common.runtime.outbox_retention) on a migrated database of its own: which published rows are
deleted, which are kept (unpublished rows, recent ones, the dispatch row of an item whose lease is open)."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from .migrated import SERVER, migrated_database

pytestmark = pytest.mark.db
DB_NAME = os.environ.get("UEP_TEST_OUTBOX_DB", "uep_outbox_retention")


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    with migrated_database(DB_NAME) as eng:
        yield eng


def _dispatched(ev: uuid.UUID, tenant: uuid.UUID, sample: uuid.UUID, repeat: int = 0) -> dict[str, object]:
    return {"evaluation_id": str(ev), "tenant_id": str(tenant), "sample_id": str(sample), "repeat": repeat, "arm": "main"}


def test_prune_deletes_old_published_rows_and_keeps_what_is_needed(engine: Engine) -> None:
    from uep_common.contract.events import Topics
    from uep_common.runtime.outbox_retention import prune_published
    from uep_common.runtime.session import make_async_engine, make_sessionmaker
    from uep_common.tables.models import Benchmark, Evaluation, Model, OutboxMessage, Sample, SampleLease, Tenant

    now = datetime.now(UTC)
    hour_ago, just_now = now - timedelta(hours=1), now - timedelta(seconds=5)
    with Session(engine) as s, s.begin():
        tenant = Tenant(slug="outbox-t", name="T")
        model = Model(name="outbox-model", backend="triton", endpoint="127.0.0.1:1")
        bench = Benchmark(slug="outbox-b", name="b", version="v1", category="nlp")
        s.add_all([tenant, model, bench])
        s.flush()
        samples = [Sample(benchmark_id=bench.id, ordinal=i, input={"q": i}, reference={"a": i}) for i in range(2)]
        ev = Evaluation(tenant_id=tenant.id, benchmark_id=bench.id, model_id=model.id, total_items=2)
        s.add_all([*samples, ev])
        s.flush()
        open_lease, released = samples
        for sample, state in ((open_lease, "leased"), (released, "released")):
            s.add(SampleLease(evaluation_id=ev.id, sample_id=sample.id, state=state, leased_at=hour_ago, lease_expires_at=now))
        rows = {
            "old_score": (Topics.SCORE_COMPUTED, {"evaluation_id": str(ev.id)}, hour_ago),
            "recent_score": (Topics.SCORE_COMPUTED, {"evaluation_id": str(ev.id)}, just_now),
            "unpublished": (Topics.EVALUATION_REQUESTED, {"evaluation_id": str(ev.id)}, None),
            "dispatch_open_lease": (Topics.SAMPLE_DISPATCHED, _dispatched(ev.id, tenant.id, open_lease.id), hour_ago),
            "dispatch_released": (Topics.SAMPLE_DISPATCHED, _dispatched(ev.id, tenant.id, released.id), hour_ago),
            # same item, another repeat: no lease of that repeat is open, so the row may go
            "dispatch_other_repeat": (Topics.SAMPLE_DISPATCHED, _dispatched(ev.id, tenant.id, open_lease.id, 1), hour_ago),
        }
        for name, (topic, payload, published_at) in rows.items():
            s.add(
                OutboxMessage(
                    event_id=uuid.uuid4(),
                    event_type=name,
                    topic=topic,
                    key=name.encode(),
                    payload=payload,
                    published_at=published_at,
                )
            )

    async def prune() -> list[int]:
        aengine = make_async_engine(f"{SERVER}/{DB_NAME}")
        try:
            async with make_sessionmaker(aengine)() as session, session.begin():
                first = await prune_published(session, retain_s=300)
            async with make_sessionmaker(aengine)() as session, session.begin():
                second = await prune_published(session, retain_s=300)
            return [first, second]
        finally:
            await aengine.dispose()

    assert asyncio.run(prune()) == [3, 0]  # old_score, dispatch_released, dispatch_other_repeat; then nothing
    with Session(engine) as s:
        left = set(s.scalars(select(OutboxMessage.event_type)))
    assert left == {"recent_score", "unpublished", "dispatch_open_lease"}


def test_prune_rejects_bad_bounds() -> None:
    from uep_common.runtime.outbox_retention import prune_published

    with pytest.raises(ValueError, match="retain_s"):
        asyncio.run(prune_published(None, retain_s=-1))  # type: ignore[arg-type]
