"""The reporter's vacuum worker (uep_reporter.vacuuming): autovacuum's rules decide which tables are due, and a
round on a migrated database of its own frees the dead rows an outbox churn leaves and refreshes the planner's
statistics."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, text

from uep_reporter.vacuuming import Due, Rules, TableStats, due, vacuum_round

from .migrated import SERVER, migrated_database

DB_NAME = os.environ.get("UEP_TEST_VACUUM_DB", "uep_vacuuming")


def test_dead_rows_past_autovacuums_threshold_call_for_a_vacuum() -> None:
    # autovacuum's defaults (PostgreSQL docs §25.1.6): threshold 50 + scale 0.2 × live. 1,000 live rows: 250.
    rules = Rules()
    assert due(TableStats("outbox", 1000, 250, 0, 0), rules) is None
    assert due(TableStats("outbox", 1000, 251, 0, 0), rules) == Due("outbox", True, False, 1.0)


def test_inserts_and_modifications_call_for_vacuum_and_analyze() -> None:
    rules = Rules()
    # insert rule: 1000 + 0.2 × 10,000 = 3,000; analyze rule: 50 + 0.1 × 10,000 = 1,050
    got = due(TableStats("sample_results", 10_000, 0, 3_500, 1_000), rules)
    assert got == Due("sample_results", True, False, 500.0)
    got = due(TableStats("sample_results", 10_000, 0, 100, 1_100), rules)
    assert got == Due("sample_results", False, True, 50.0)
    # an insert threshold of -1 turns the insert rule off, as autovacuum_vacuum_insert_threshold = -1 does
    assert due(TableStats("t", 10_000, 0, 1_000_000, 0), Rules(insert_threshold=-1)) is None


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    with migrated_database(DB_NAME) as eng:
        yield eng


@pytest.mark.db
class TestOnPostgres:
    @staticmethod
    def _dead_rows(engine: Engine, table: str) -> int:
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_stat_clear_snapshot()"))
            return int(conn.scalar(text("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = :t"), {"t": table}))

    @staticmethod
    def _round(mode: str) -> list[Due]:
        from uep_common.runtime.session import make_async_engine

        async def main() -> list[Due]:
            aengine = make_async_engine(f"{SERVER}/{DB_NAME}")
            try:
                return await vacuum_round(aengine, mode)  # type: ignore[arg-type]
            finally:
                await aengine.dispose()

        return asyncio.run(main())

    def _churn_outbox(self, engine: Engine, n: int) -> None:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO outbox (event_id, event_type, topic, key, headers, payload, attempts) "
                    "SELECT gen_random_uuid(), 'Test', 'uep.test.v1', 'k'::bytea, '{}'::jsonb, "
                    "jsonb_build_object('i', i), 0 FROM generate_series(1, :n) i"
                ),
                {"n": n},
            )
        with engine.begin() as conn:
            conn.execute(text("UPDATE outbox SET published_at = now()"))
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM outbox"))
            conn.execute(text("SELECT pg_stat_force_next_flush()"))

    def test_a_round_vacuums_the_churned_outbox(self, engine: Engine) -> None:
        self._churn_outbox(engine, 2000)
        assert self._dead_rows(engine, "outbox") >= 2000  # the update's and the delete's versions
        done: dict[str, Any] = {d.table: d for d in self._round("on")}
        assert done["outbox"].vacuum is True
        assert self._dead_rows(engine, "outbox") == 0
        assert "outbox" not in {d.table for d in self._round("on")}  # nothing dead left to free

    def test_off_does_nothing_and_auto_follows_the_servers_autovacuum(self, engine: Engine) -> None:
        self._churn_outbox(engine, 500)
        assert self._round("off") == []
        with engine.connect() as conn:
            server_autovacuum = conn.scalar(text("SELECT current_setting('autovacuum')"))
        done = {d.table for d in self._round("auto")}
        if server_autovacuum == "on":
            assert done == set()  # autovacuum's job; the worker only read the setting
        else:
            assert "outbox" in done
            assert self._dead_rows(engine, "outbox") == 0
