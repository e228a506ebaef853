"""Alembic environment: migrates the database named by ``UEP_DATABASE_URL`` (or the config's url)."""

from __future__ import annotations

from alembic import context

from uep_common.runtime.session import make_sync_engine
from uep_common.runtime.settings import CommonSettings
from uep_common.tables.tables import metadata

config = context.config
target_metadata = metadata


def _url() -> str:
    return config.get_main_option("sqlalchemy.url") or CommonSettings().database_url


def run_migrations_offline() -> None:
    """Write the migrations' SQL to Alembic's output (``alembic upgrade --sql``) instead of running it."""
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run the migrations on the database, in one transaction, through a synchronous engine."""
    engine = make_sync_engine(_url())
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata, compare_type=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
