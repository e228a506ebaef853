"""``uep-admin``: database migrations, topic creation and the built-in catalogue.

Commands::

    uep-admin create-db        # CREATE DATABASE if missing (local stack)
    uep-admin migrate          # alembic upgrade head
    uep-admin create-topics    # create every uep topic with UEP_KAFKA_PARTITIONS partitions
    uep-admin seed             # register the default tenant, built-in benchmarks and local models
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url

from uep_common.settings import CommonSettings

MIGRATIONS_DIR = Path(__file__).parent / "db" / "migrations"


def alembic_config(database_url: str):
    """Alembic ``Config`` pointing at the packaged migrations and ``database_url``."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return cfg


def create_database(database_url: str) -> bool:
    """Create the database of ``database_url`` if it does not exist. Returns True if it was created."""
    from uep_common.db.session import make_sync_engine

    url = make_url(database_url)
    engine = make_sync_engine(url.set(database="postgres").render_as_string(hide_password=False))
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        exists = conn.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": url.database}).scalar()
        if not exists:
            conn.execute(text(f'CREATE DATABASE "{url.database}"'))
    engine.dispose()
    return not exists


def migrate(database_url: str) -> None:
    """Apply every Alembic migration (``upgrade head``)."""
    from alembic import command

    command.upgrade(alembic_config(database_url), "head")


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the process exit status."""
    parser = argparse.ArgumentParser(prog="uep-admin", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["create-db", "migrate", "create-topics", "seed"])
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = CommonSettings()
    if args.command == "create-db":
        created = create_database(settings.database_url)
        print(f"database {make_url(settings.database_url).database}: {'created' if created else 'exists'}")
    elif args.command == "migrate":
        migrate(settings.database_url)
    elif args.command == "create-topics":
        from uep_common.messaging import ensure_topics

        created = asyncio.run(ensure_topics(settings))
        print(f"topics created: {created or 'none (all exist)'}")
    elif args.command == "seed":
        from uep_common.builtin.seed import seed

        print(seed(settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
