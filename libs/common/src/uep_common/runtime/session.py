"""Engines and sessions. Services use the async engine (psycopg 3 async); Alembic uses a sync one."""

from __future__ import annotations

from sqlalchemy import create_engine
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from uep_common.runtime.telemetry import instrument_engine

# Every table on the metadata before any session flushes: a core table's foreign key may point at an area's
# table (evaluations.schedule_id -> schedules), which SQLAlchemy resolves only if that table is registered.
from uep_common.tables import tables as _tables  # noqa: F401


def make_async_engine(database_url: str, pool_size: int = 10) -> AsyncEngine:
    """Async engine for ``postgresql+psycopg://…`` URLs (psycopg 3 supports both modes); its statements are
    traced when the process exports spans (:func:`uep_common.runtime.telemetry.instrument_engine`)."""
    engine = create_async_engine(database_url, pool_size=pool_size, max_overflow=pool_size, pool_pre_ping=True)
    instrument_engine(engine)
    return engine


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Session factory; ``expire_on_commit=False`` so rows stay readable after commit."""
    return async_sessionmaker(engine, expire_on_commit=False)


def make_sync_engine(database_url: str) -> Engine:
    """Sync engine (migrations, admin commands, tests)."""
    return create_engine(database_url, pool_pre_ping=True)
