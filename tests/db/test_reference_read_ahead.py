"""The scorer's reference read-ahead (uep_scorer.references.ReferenceStore) on a migrated database of its own:
a miss reads the sample's reference and those after it by ordinal in one query; what it returns is each
sample's own stored reference; a sample of another benchmark, or one asked for without its benchmark, is
still found alone."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session

from .migrated import SERVER, migrated_database

pytestmark = pytest.mark.db
DB_NAME = os.environ.get("UEP_TEST_REFERENCES_DB", "uep_reference_read_ahead")


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    with migrated_database(DB_NAME) as eng:
        yield eng


def test_a_miss_reads_ahead_by_ordinal_and_each_sample_gets_its_own_reference(engine: Engine) -> None:
    from uep_common.runtime.session import make_async_engine, make_sessionmaker
    from uep_common.tables.models import Benchmark, Sample
    from uep_scorer.references import READ_AHEAD, ReferenceStore

    n = READ_AHEAD + 44  # two windows: the second miss is the first sample past the first window
    with Session(engine) as s, s.begin():
        a = Benchmark(slug="refs-a", name="a", version="v1", category="nlp")
        b = Benchmark(slug="refs-b", name="b", version="v1", category="nlp")
        s.add_all([a, b])
        s.flush()
        # ordinals inserted in reverse, so the window's order comes from ORDER BY ordinal, not insertion
        samples_a = [
            Sample(benchmark_id=a.id, ordinal=i, input={"q": i}, reference={"answer": f"a{i}"}) for i in reversed(range(n))
        ]
        other = Sample(benchmark_id=b.id, ordinal=0, input={"q": 0}, reference={"answer": "b0"})
        s.add_all([*samples_a, other])
        s.flush()
        ids = {smp.ordinal: smp.id for smp in samples_a}
        a_id, other_id = a.id, other.id

    async def run() -> tuple[list[dict], dict, dict, int]:
        aeng = make_async_engine(f"{SERVER}/{DB_NAME}")
        statements: list[str] = []
        event.listen(aeng.sync_engine, "before_cursor_execute", lambda _c, _cur, stmt, *_a: statements.append(stmt))
        try:
            refs = ReferenceStore(make_sessionmaker(aeng))
            # eight concurrent misses of the first window: one read-ahead, the others wait for it
            got = await asyncio.gather(*(refs.reference(ids[i], a_id) for i in range(8)))
            got += [await refs.reference(ids[i], a_id) for i in range(8, n)]
            reads = len(statements)
            wrong_benchmark = await refs.reference(other_id, a_id)  # not in a's window: read alone
            alone = await refs.reference(other_id)
            return got, wrong_benchmark, alone, reads
        finally:
            await aeng.dispose()

    got, wrong_benchmark, alone, reads = asyncio.run(run())
    assert got == [{"answer": f"a{i}"} for i in range(n)]
    assert reads == 2  # ceil(300 / 256) windows, not one query per sample
    assert wrong_benchmark == alone == {"answer": "b0"}

    async def missing() -> None:
        aeng = make_async_engine(f"{SERVER}/{DB_NAME}")
        try:
            with pytest.raises(LookupError):
                await ReferenceStore(make_sessionmaker(aeng)).reference(uuid.uuid4(), a_id)
        finally:
            await aeng.dispose()

    asyncio.run(missing())
