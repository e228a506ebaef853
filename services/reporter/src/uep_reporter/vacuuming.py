"""Vacuum and analyze of uep's tables on a PostgreSQL server that runs without autovacuum.

The pipeline churns a few tables per item: an outbox row is inserted, stamped published and deleted by its
retention; a lease is inserted and released; an evaluation's progress, a budget account's spend and a flow's
fairness tag are updated per batch. Each change leaves a dead row version behind. PostgreSQL's autovacuum
marks that space free and keeps the planner's statistics current; a server started with ``autovacuum = off``
does neither, so the dead versions pile up, every scan of the outbox and of the leases wades through more of
them, and the cost per item grows with the evaluation (``bench/scale.py`` measured it).

This worker applies autovacuum's own rules, with the server's own parameters (``pg_settings``: the thresholds
and scale factors; PostgreSQL documentation, "The Autovacuum Daemon", §25.1.6), to every table of the current
schema in ``pg_stat_user_tables``:

* **vacuum** when ``n_dead_tup > autovacuum_vacuum_threshold + autovacuum_vacuum_scale_factor × n_live_tup``,
  or, for tables that only grow, ``n_ins_since_vacuum > autovacuum_vacuum_insert_threshold +
  autovacuum_vacuum_insert_scale_factor × n_live_tup`` (PostgreSQL 13+; keeps the visibility map set);
* **analyze** when ``n_mod_since_analyze > autovacuum_analyze_threshold + autovacuum_analyze_scale_factor ×
  n_live_tup``.

``UEP_VACUUM_MODE``: ``auto`` (the default) runs only while the server's ``autovacuum`` setting is off, so on a
server with autovacuum (every production one) it only reads one setting per round; ``on`` always runs (an
outbox so busy that autovacuum falls behind); ``off`` never. Each statement is a plain ``VACUUM (SKIP_LOCKED)``
or ``ANALYZE (SKIP_LOCKED)``, outside any transaction: it takes no lock that blocks reads or writes, skips a
table another session holds exclusively, and a table the service's role does not own is skipped by PostgreSQL
with a warning. At most ``UEP_VACUUM_MAX_TABLES`` tables per round, the most overdue first.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from uep_common.runtime.background import BackgroundLoop
from uep_reporter.settings import ReporterSettings, VacuumMode

log = logging.getLogger(__name__)

_FIELD_OF = {
    "autovacuum_vacuum_threshold": "vacuum_threshold",
    "autovacuum_vacuum_scale_factor": "vacuum_scale_factor",
    "autovacuum_vacuum_insert_threshold": "insert_threshold",
    "autovacuum_vacuum_insert_scale_factor": "insert_scale_factor",
    "autovacuum_analyze_threshold": "analyze_threshold",
    "autovacuum_analyze_scale_factor": "analyze_scale_factor",
}
"""The :class:`Rules` field of each autovacuum parameter in ``pg_settings``."""
_SETTINGS = text("SELECT name, setting FROM pg_settings WHERE name = ANY(:names)")
_TABLES = text(
    """
    SELECT relname, n_live_tup, n_dead_tup, n_ins_since_vacuum, n_mod_since_analyze
      FROM pg_stat_user_tables
     WHERE schemaname = current_schema()
    """
)


@dataclass(frozen=True)
class Rules:
    """autovacuum's parameters (``pg_settings``); an insert threshold of -1 turns the insert rule off."""

    vacuum_threshold: float = 50
    vacuum_scale_factor: float = 0.2
    insert_threshold: float = 1000
    insert_scale_factor: float = 0.2
    analyze_threshold: float = 50
    analyze_scale_factor: float = 0.1


@dataclass(frozen=True)
class TableStats:
    """One row of ``pg_stat_user_tables`` (counts of row versions)."""

    name: str
    live: int
    dead: int
    inserted_since_vacuum: int
    modified_since_analyze: int


@dataclass(frozen=True)
class Due:
    """What a table needs now: ``vacuum`` and/or ``analyze``, and by how many rows it is past the threshold
    (``overdue``; the largest goes first)."""

    table: str
    vacuum: bool
    analyze: bool
    overdue: float


def due(stats: TableStats, rules: Rules) -> Due | None:
    """Whether ``stats`` calls for a vacuum or an analyze under autovacuum's rules (module docstring); None when
    neither."""
    dead_over = stats.dead - (rules.vacuum_threshold + rules.vacuum_scale_factor * stats.live)
    insert_over = (
        stats.inserted_since_vacuum - (rules.insert_threshold + rules.insert_scale_factor * stats.live)
        if rules.insert_threshold >= 0
        else -1.0
    )
    analyze_over = stats.modified_since_analyze - (rules.analyze_threshold + rules.analyze_scale_factor * stats.live)
    vacuum = dead_over > 0 or insert_over > 0
    analyze = analyze_over > 0
    if not (vacuum or analyze):
        return None
    return Due(stats.name, vacuum, analyze, max(dead_over, insert_over, analyze_over))


async def read_rules(conn: AsyncConnection) -> Rules:
    """The server's autovacuum parameters (defaults of :class:`Rules` for any it does not report)."""
    rows = await conn.execute(_SETTINGS, {"names": list(_FIELD_OF)})
    return Rules(**{_FIELD_OF[name]: float(setting) for name, setting in rows})


async def vacuum_round(engine: AsyncEngine, mode: VacuumMode = "auto", max_tables: int = 8) -> list[Due]:
    """One round: the tables due (module docstring), vacuumed and/or analyzed, at most ``max_tables`` of them.

    Returns what was done, most overdue first; an empty list when ``mode`` is ``off``, or ``auto`` on a server
    whose autovacuum is on. Database errors propagate (the worker's loop logs them and tries next round)."""
    if mode == "off":
        return []
    async with engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="AUTOCOMMIT")  # VACUUM runs outside a transaction
        if mode == "auto" and (await conn.scalar(text("SELECT current_setting('autovacuum')"))) == "on":
            return []
        rules = await read_rules(conn)
        stats = [TableStats(*row) for row in await conn.execute(_TABLES)]
        todo = sorted((d for s in stats if (d := due(s, rules)) is not None), key=lambda d: -d.overdue)[:max_tables]
        for d in todo:
            options = "SKIP_LOCKED, ANALYZE" if d.vacuum and d.analyze else "SKIP_LOCKED"
            verb = "VACUUM" if d.vacuum else "ANALYZE"
            table = conn.dialect.identifier_preparer.quote_identifier(d.table)
            await conn.execute(text(f"{verb} ({options}) {table}"))
    if todo:
        log.debug("vacuum round: %s", [(d.table, d.vacuum, d.analyze) for d in todo])
    return todo


class VacuumWorker:
    """The reporter's vacuum round every ``vacuum_interval_s`` (settings of
    :class:`uep_reporter.settings.ReporterSettings`: ``vacuum_mode``, ``vacuum_max_tables``)."""

    def __init__(self, engine: AsyncEngine, settings: ReporterSettings) -> None:
        self._engine = engine
        self._settings = settings
        self._loop = BackgroundLoop("vacuum", self.round_once, settings.vacuum_interval_s)

    def start(self) -> None:
        """Start on the running event loop (nothing when the mode is ``off``)."""
        if self._settings.vacuum_mode != "off":
            self._loop.start()

    async def stop(self) -> None:
        """Cancel the loop (a VACUUM in progress is cancelled by PostgreSQL; nothing is lost)."""
        await self._loop.stop()

    async def round_once(self) -> list[Due]:
        """One round with the settings' mode and bound (:func:`vacuum_round`)."""
        return await vacuum_round(self._engine, self._settings.vacuum_mode, self._settings.vacuum_max_tables)
