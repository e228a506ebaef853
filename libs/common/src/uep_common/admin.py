"""``uep-admin``: database migrations, topic creation and the built-in catalogue.

Commands::

    uep-admin create-db        # CREATE DATABASE if missing (local stack)
    uep-admin migrate          # alembic upgrade head
    uep-admin create-topics    # create every uep topic with UEP_KAFKA_PARTITIONS partitions
    uep-admin seed             # register the default tenant, built-in benchmarks and local models
    uep-admin create-tenant --tenant SLUG [--name NAME]
    uep-admin create-api-key --tenant SLUG --role admin|builder|viewer|annotator [--name LABEL]
                             [--expires-days N] [--site-admin]
                               # prints the key once; only its SHA-256 digest is stored
    uep-admin revoke-api-key --prefix PREFIX
    uep-admin create-user --username NAME [--site-admin]   # password from UEP_NEW_PASSWORD or a prompt
    uep-admin add-member --username NAME --tenant SLUG --role ROLE
    uep-admin bootstrap --credentials FILE
                               # local stack: user 'admin' (site admin, admin of 'default') and an admin
                               # API key, written to FILE (mode 600); kept when FILE still holds valid ones
    uep-admin models add --name N --endpoint URL [--kind K] [--backend B] [--contract C] [--triton-name T]
                         [--class-names a,b,…] [--n-features N] [--dimension D] [--capacity N]
                         [--tenant SLUG [--shared]] [--no-probe]
                               # register a model (a site model unless --tenant); the rules and the probe
                               # are the API's (uep_common.registry.model_registry; docs/models.md)
    uep-admin models list [--tenant SLUG]
    uep-admin models disable|enable NAME@VERSION [--tenant SLUG]
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import logging
import os
import secrets
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy import select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from uep_common.registry.model_registry import (
    EgressSettings,
    ModelCreate,
    RegistryError,
    check_registration,
    probe,
    registration_values,
    site_name_taken,
    split_ref,
)
from uep_common.runtime.session import make_sync_engine
from uep_common.runtime.settings import CommonSettings
from uep_common.tables.identity import ROLES, ApiKey, Membership, User, hash_api_key, new_api_key
from uep_common.tables.models import Model, Tenant

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "tables" / "migrations"


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
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["models"]:
        return models_command(CommonSettings().database_url, argv[1:])
    parser = argparse.ArgumentParser(prog="uep-admin", description=__doc__.split("\n")[0])
    parser.add_argument(
        "command",
        choices=[
            "create-db",
            "migrate",
            "create-topics",
            "seed",
            "create-tenant",
            "create-api-key",
            "revoke-api-key",
            "create-user",
            "add-member",
            "bootstrap",
            "models",
        ],
    )
    parser.add_argument("--tenant", help="tenant slug (create-tenant, create-api-key, add-member)")
    parser.add_argument("--role", choices=list(ROLES), help="role of the key or member")
    parser.add_argument("--name", default="", help="tenant name / key label")
    parser.add_argument("--username", help="user name (create-user, add-member)")
    parser.add_argument("--site-admin", action="store_true", help="the user or key may act across tenants")
    parser.add_argument("--expires-days", type=int, help="the key expires after this many days")
    parser.add_argument("--prefix", help="the key's visible prefix (revoke-api-key)")
    parser.add_argument("--credentials", help="file the bootstrap credentials are written to")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = CommonSettings()
    if args.command == "create-db":
        created = create_database(settings.database_url)
        print(f"database {make_url(settings.database_url).database}: {'created' if created else 'exists'}")
    elif args.command == "migrate":
        migrate(settings.database_url)
    elif args.command == "create-topics":
        from uep_common.runtime.messaging import ensure_topics

        topics = asyncio.run(ensure_topics(settings))
        print(f"topics created: {topics or 'none (all exist)'}")
    elif args.command == "seed":
        from uep_common.builtin.seed import seed

        print(seed(settings))
    elif args.command in ("revoke-api-key", "create-user", "add-member", "bootstrap"):
        try:
            print(_identity_command(settings.database_url, args, parser))
        except (LookupError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    elif args.command in ("create-tenant", "create-api-key"):
        if not args.tenant or (args.command == "create-api-key" and not args.role):
            parser.error(f"{args.command} needs --tenant" + (" and --role" if args.command == "create-api-key" else ""))
        try:
            print(
                create_tenant(settings.database_url, args.tenant, args.name)
                if args.command == "create-tenant"
                else create_api_key(settings.database_url, args.tenant, args.role, args.name, args.expires_days, args.site_admin)
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


def create_api_key(
    database_url: str,
    tenant_slug: str,
    role: str,
    name: str = "",
    expires_days: int | None = None,
    site_admin: bool = False,
    created_by: str = "uep-admin",
) -> str:
    """Create an API key for ``tenant_slug`` with ``role`` (:data:`uep_common.tables.identity.ROLES`) and return it —
    the only time it is shown: ``api_keys`` keeps its SHA-256 digest. ``expires_days``: days until it stops
    working (None = never). Raises LookupError for an unknown tenant."""
    engine = make_sync_engine(database_url)
    try:
        with Session(engine) as s, s.begin():
            tenant_id = s.scalar(select(Tenant.id).where(Tenant.slug == tenant_slug))
            if tenant_id is None:
                raise LookupError(f"unknown tenant {tenant_slug!r} (uep-admin create-tenant --tenant {tenant_slug})")
            key = new_api_key()
            expires = datetime.now(UTC) + timedelta(days=expires_days) if expires_days else None
            s.add(
                ApiKey(
                    key_hash=hash_api_key(key),
                    key_prefix=key[:12],
                    tenant_id=tenant_id,
                    role=role,
                    name=name,
                    expires_at=expires,
                    site_admin=site_admin,
                    created_by=created_by,
                )
            )
        return key
    finally:
        engine.dispose()


class NewUserSettings(BaseSettings):
    """``create-user``'s password from the environment (``UEP_NEW_PASSWORD``), for scripts; unset: a prompt."""

    model_config = SettingsConfigDict(env_prefix="UEP_", extra="ignore")

    new_password: SecretStr | None = None


def _new_password() -> str:
    given = NewUserSettings().new_password
    if given is not None and given.get_secret_value():
        return given.get_secret_value()
    first = getpass.getpass("password: ")
    if first != getpass.getpass("again: "):
        raise ValueError("the two passwords differ")
    return first


def _identity_command(database_url: str, args: argparse.Namespace, parser: argparse.ArgumentParser) -> str:
    """revoke-api-key, create-user, add-member and bootstrap (see the module docstring)."""
    from uep_common.runtime.passwords import hash_password

    need = {
        "revoke-api-key": ("prefix",),
        "create-user": ("username",),
        "add-member": ("username", "tenant", "role"),
        "bootstrap": ("credentials",),
    }[args.command]
    missing = [n for n in need if not getattr(args, n)]
    if missing:
        parser.error(f"{args.command} needs " + " and ".join(f"--{n}" for n in missing))
    if args.command == "bootstrap":
        return bootstrap(database_url, Path(args.credentials))
    engine = make_sync_engine(database_url)
    try:
        with Session(engine) as s, s.begin():
            if args.command == "revoke-api-key":
                key = s.scalar(select(ApiKey).where(ApiKey.key_prefix == args.prefix))
                if key is None:
                    raise LookupError(f"no API key with prefix {args.prefix!r}")
                key.revoked_at = key.revoked_at or datetime.now(UTC)
                return f"api key {args.prefix}: revoked"
            user = s.scalar(select(User).where(User.username == args.username))
            if args.command == "create-user":
                if user is not None:
                    raise ValueError(f"user {args.username!r} exists")
                s.add(User(username=args.username, password_hash=hash_password(_new_password()), site_admin=args.site_admin))
                return f"user {args.username}: created"
            if user is None:
                raise LookupError(f"unknown user {args.username!r}")
            tenant_id = s.scalar(select(Tenant.id).where(Tenant.slug == args.tenant))
            if tenant_id is None:
                raise LookupError(f"unknown tenant {args.tenant!r}")
            member = s.scalar(select(Membership).where(Membership.user_id == user.id, Membership.tenant_id == tenant_id))
            if member is None:
                s.add(Membership(user_id=user.id, tenant_id=tenant_id, role=args.role))
            else:
                member.role = args.role
            return f"user {args.username}: {args.role} of {args.tenant}"
    finally:
        engine.dispose()


def bootstrap(database_url: str, credentials: Path, tenant_slug: str = "default") -> str:
    """Make sure the local stack has a way in: user ``admin`` (site admin, admin of ``tenant_slug``) with a
    random password, and an admin API key of that tenant marked site admin, both written to ``credentials``
    as JSON ``{"username", "password", "api_key", "tenant"}`` with mode 600. When the file already holds a
    key that still works and the user exists, nothing changes. Returns a one-line report."""
    from uep_common.runtime.passwords import hash_password, verify_password

    engine = make_sync_engine(database_url)
    try:
        with Session(engine) as s, s.begin():
            tenant_id = s.scalar(select(Tenant.id).where(Tenant.slug == tenant_slug))
            if tenant_id is None:
                s.add(Tenant(slug=tenant_slug, name=tenant_slug))
                s.flush()
                tenant_id = s.scalar(select(Tenant.id).where(Tenant.slug == tenant_slug))
            old: dict[str, str] = {}
            if credentials.exists():
                try:
                    old = json.loads(credentials.read_text())
                except ValueError:
                    old = {}
            user = s.scalar(select(User).where(User.username == "admin"))
            key = s.scalar(select(ApiKey).where(ApiKey.key_hash == hash_api_key(old.get("api_key", ""))))
            if (
                user is not None
                and key is not None
                and key.revoked_at is None
                and verify_password(user.password_hash, old.get("password", ""))
            ):
                return f"bootstrap: credentials in {credentials} still valid"
            password = secrets.token_urlsafe(18)
            if user is None:
                user = User(username="admin", display_name="Site administrator", site_admin=True)
                s.add(user)
            user.password_hash = hash_password(password)
            user.site_admin = True
            s.flush()
            if s.scalar(select(Membership).where(Membership.user_id == user.id, Membership.tenant_id == tenant_id)) is None:
                s.add(Membership(user_id=user.id, tenant_id=tenant_id, role="admin"))
            api_key = new_api_key()
            s.add(
                ApiKey(
                    key_hash=hash_api_key(api_key),
                    key_prefix=api_key[:12],
                    tenant_id=tenant_id,
                    role="admin",
                    name="bootstrap (local stack)",
                    site_admin=True,
                    created_by="uep-admin bootstrap",
                )
            )
        credentials.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(credentials, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"username": "admin", "password": password, "api_key": api_key, "tenant": tenant_slug}, f, indent=1)
        os.chmod(credentials, 0o600)
        return f"bootstrap: user admin and an admin API key written to {credentials}"
    finally:
        engine.dispose()


def _models_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="uep-admin models", description="The model registry (docs/models.md).")
    sub = parser.add_subparsers(dest="action", required=True)
    add = sub.add_parser("add", help="register a model (a site model unless --tenant)")
    add.add_argument("--name", required=True)
    add.add_argument("--version", default="1")
    add.add_argument("--endpoint", required=True, help="Triton http(s)://host:port (or gRPC host:port with --no-probe)")
    add.add_argument("--kind", default="generation", help="generation | classification | ranking | embedding")
    add.add_argument("--backend", default="triton", help="triton | openai_compatible")
    add.add_argument("--contract", help="default: by kind and backend")
    add.add_argument("--triton-name", help="the served model's name (default: --name)")
    add.add_argument("--triton-version")
    add.add_argument("--class-names", help="classification: the class names, comma-separated, in output order")
    add.add_argument("--n-features", type=int, help="classification/features: the input vector's length")
    add.add_argument("--dimension", type=int, help="embedding: the vector's length")
    add.add_argument("--capacity", type=int, help="max_in_flight: calls in flight per inference replica")
    add.add_argument("--description", default="")
    add.add_argument("--api-key-ref", help="openai_compatible: the inference service's UEP_MODEL_KEY_… variable")
    add.add_argument("--shared", action="store_true", help="with --tenant: every tenant may see and evaluate it")
    add.add_argument("--no-probe", action="store_true", help="register without checking the endpoint")
    for name in ("add", "list"):
        (add if name == "add" else sub.add_parser("list", help="every model, or a tenant's own")).add_argument(
            "--tenant", help="the owner tenant's slug (add: default a site model)"
        )
    for name in ("disable", "enable"):
        cmd = sub.add_parser(name, help=f"{name} NAME@VERSION (a site model unless --tenant)")
        cmd.add_argument("ref")
        cmd.add_argument("--tenant")
    return parser


def _add_model(s: Session, args: argparse.Namespace, owner: uuid.UUID | None) -> str:
    """``models add``: check (the API's rules, as a site admin), probe unless ``--no-probe``, insert."""
    spec: dict[str, Any] = {k: v for k, v in (("n_features", args.n_features), ("dimension", args.dimension)) if v}
    if args.class_names:
        spec["class_names"] = [c.strip() for c in args.class_names.split(",")]
    reg = ModelCreate(
        name=args.name, version=args.version, description=args.description, kind=args.kind, backend=args.backend,
        endpoint=args.endpoint, contract=args.contract, triton_model_name=args.triton_name,
        triton_model_version=args.triton_version, spec=spec, max_in_flight=args.capacity,
        visibility="shared" if args.shared else "private", owner="tenant" if owner else "site",
        api_key_ref=args.api_key_ref,
    )  # fmt: skip
    contract, stored = check_registration(reg, site_act=True)
    if owner is not None and s.scalar(site_name_taken(reg.name)) is not None:
        raise RegistryError(409, ("body", "name"), f"{reg.name!r} is a site model's name", "name_taken")
    if not args.no_probe:
        key = os.environ.get(args.api_key_ref) if args.api_key_ref else None
        probe_call = probe(
            backend=reg.backend, endpoint=reg.endpoint, served_name=reg.triton_model_name or reg.name,
            served_version=reg.triton_model_version, kind=reg.kind, contract=contract, spec=stored, api_key=key,
            egress=EgressSettings().egress_policy(),
        )  # fmt: skip
        asyncio.run(probe_call)
    values = registration_values(reg, contract, stored, owner_tenant_id=owner, created_by="uep-admin", secret_key=None)
    s.add(Model(**values))
    s.flush()
    return f"{reg.name}@{reg.version} ({reg.kind.value}/{contract}, {args.tenant or 'site'}): registered"


def models_command(database_url: str, argv: list[str]) -> int:
    """``uep-admin models add|list|disable|enable`` (module docstring) on ``database_url``, as a site admin;
    the registration rules and the probe are :mod:`uep_common.registry.model_registry`'s. Prints one line per model;
    returns the exit status (2 when refused: the line names the field and the reason)."""
    args = _models_parser().parse_args(argv)
    engine = make_sync_engine(database_url)
    try:
        with Session(engine) as s, s.begin():
            owner = s.scalar(select(Tenant.id).where(Tenant.slug == args.tenant)) if args.tenant else None
            if args.tenant and owner is None:
                raise LookupError(f"unknown tenant {args.tenant!r}")
            mine = Model.owner_tenant_id == owner if owner else Model.owner_tenant_id.is_(None)
            if args.action == "add":
                print(_add_model(s, args, owner))
            elif args.action == "list":
                q = select(Model).order_by(Model.name, Model.created_at.desc())
                for m in s.scalars(q.where(mine) if owner else q):
                    state = "active" if m.active else "disabled"
                    print(f"{m.name}@{m.version}\t{m.kind}/{m.contract}\t{m.backend}\t{m.endpoint}\t{state}")
            else:
                name, version = split_ref(args.ref)
                found = s.scalar(select(Model).where(Model.name == name, Model.version == (version or "1"), mine))
                if found is None:
                    raise LookupError(f"unknown model {args.ref!r} of {args.tenant or 'the site'}")
                found.active = args.action == "enable"
                print(f"{found.name}@{found.version}: {'active' if found.active else 'disabled'}")
        return 0
    except ValidationError as exc:
        first = exc.errors()[0]
        print(f"error: {'.'.join(str(x) for x in first['loc'])}: {first['msg']}", file=sys.stderr)
    except RegistryError as exc:
        print(f"error: {'.'.join(str(x) for x in exc.loc[1:])}: {'; '.join(exc.problems)}", file=sys.stderr)
    except LookupError as exc:
        print(f"error: {exc}", file=sys.stderr)
    except IntegrityError:
        print(f"error: {args.name}@{args.version} is registered already", file=sys.stderr)
    finally:
        engine.dispose()
    return 2


if __name__ == "__main__":
    sys.exit(main())
