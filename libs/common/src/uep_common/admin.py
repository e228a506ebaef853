"""``uep-admin``: database migrations, topic creation and the built-in catalogue.

Commands::

    uep-admin create-db        # CREATE DATABASE if missing (local stack)
    uep-admin migrate          # alembic upgrade head
    uep-admin create-topics    # create every uep topic with UEP_KAFKA_PARTITIONS partitions
    uep-admin seed             # register the default tenant, built-in benchmarks and local models
    uep-admin create-tenant --tenant SLUG [--name NAME]
    uep-admin create-api-key --tenant SLUG --role admin|builder|viewer [--name LABEL]
                               # prints the key once; only its SHA-256 digest is stored
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import select, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from uep_common.db.budgets import ApiKey, hash_api_key, new_api_key
from uep_common.db.models import Tenant
from uep_common.db.session import make_sync_engine
from uep_common.settings import CommonSettings

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "db" / "migrations"


def alembic_config(database_url: str) -> Config:
    """Alembic ``Config`` pointing at the packaged migrations and ``database_url``."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return cfg


def create_database(database_url: str) -> bool:
    """Create the database of ``database_url`` if it does not exist. Returns True if it was created."""
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
    parser.add_argument("command", choices=["create-db", "migrate", "create-topics", "seed", "create-tenant", "create-api-key"])
    parser.add_argument("--tenant", help="tenant slug (create-tenant, create-api-key)")
    parser.add_argument("--role", choices=["admin", "builder", "viewer"], help="role of the key (create-api-key)")
    parser.add_argument("--name", default="", help="tenant name / key label")
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

        topics = asyncio.run(ensure_topics(settings))
        print(f"topics created: {topics or 'none (all exist)'}")
    elif args.command == "seed":
        from uep_common.builtin.seed import seed

        print(seed(settings))
    elif args.command in ("create-tenant", "create-api-key"):
        if not args.tenant or (args.command == "create-api-key" and not args.role):
            parser.error(f"{args.command} needs --tenant" + (" and --role" if args.command == "create-api-key" else ""))
        try:
            print(
                create_tenant(settings.database_url, args.tenant, args.name)
                if args.command == "create-tenant"
                else create_api_key(settings.database_url, args.tenant, args.role, args.name)
            )
        except LookupError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return 0


def create_tenant(database_url: str, slug: str, name: str = "") -> str:
    """Register tenant ``slug`` if missing; returns a one-line report."""
    engine = make_sync_engine(database_url)
    try:
        with Session(engine) as s, s.begin():
            if s.scalar(select(Tenant.id).where(Tenant.slug == slug)):
                return f"tenant {slug}: exists"
            s.add(Tenant(slug=slug, name=name or slug))
            return f"tenant {slug}: created"
    finally:
        engine.dispose()


def create_api_key(database_url: str, tenant_slug: str, role: str, name: str = "") -> str:
    """Create an API key for ``tenant_slug`` with ``role`` (admin, builder, viewer) and return it — the only
    time it is shown: ``api_keys`` keeps its SHA-256 digest. Raises LookupError for an unknown tenant."""
    engine = make_sync_engine(database_url)
    try:
        with Session(engine) as s, s.begin():
            tenant_id = s.scalar(select(Tenant.id).where(Tenant.slug == tenant_slug))
            if tenant_id is None:
                raise LookupError(f"unknown tenant {tenant_slug!r} (uep-admin create-tenant --tenant {tenant_slug})")
            key = new_api_key()
            s.add(ApiKey(key_hash=hash_api_key(key), key_prefix=key[:12], tenant_id=tenant_id, role=role, name=name))
        return key
    finally:
        engine.dispose()


if __name__ == "__main__":
    sys.exit(main())
