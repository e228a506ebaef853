"""A database of a test module's own: dropped, created and migrated to the latest schema."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, text

from servers import PG_SERVER

SERVER = f"{PG_SERVER}"
"""The test PostgreSQL server (trust authentication, user postgres), without a database name."""


@contextmanager
def migrated_database(name: str) -> Iterator[Engine]:
    """A sync engine on database ``name`` of :data:`SERVER`, dropped (with its connections) if it exists,
    created and migrated (``uep_common.admin.migrate``); the engine is disposed on exit, the database kept
    for inspection until the next run."""
    from uep_common.admin import migrate
    from uep_common.runtime.session import make_sync_engine

    admin = make_sync_engine(f"{SERVER}/postgres")
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        c.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    migrate(f"{SERVER}/{name}")
    eng = make_sync_engine(f"{SERVER}/{name}")
    try:
        yield eng
    finally:
        eng.dispose()
