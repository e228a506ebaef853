"""Shared fixtures.

Every test that is not a unit test gets the checkout's PostgreSQL and Redis (``servers``: started if they do
not run, and then stopped at the end of the session). ``stack`` starts a complete, fresh test stack once per
test session — an Apache Kafka broker with an empty log, database ``uep_test`` (dropped and migrated), Redis db
15 (flushed), Triton (``uep-model-server``) and the six services — on ports 10000 above the dev stack, so it can
run beside ``make up``. It is stopped by PID at the end. Unit tests run without any server.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy" / "local"))
from servers import PG_SERVER, REDIS_SERVER  # noqa: E402 - deploy/local is on the path from here

# Several test sessions may run side by side (parallel work on one machine): UEP_TEST_PORT_BASE,
# UEP_TEST_DB, UEP_TEST_REDIS_DB, UEP_TEST_RUN_NAME and UEP_TEST_TRITON_MODELS move one to its own ports,
# database, Redis db, run directory and model set.
TEST_DB = os.environ.get("UEP_TEST_DB", "uep_test")
TEST_ENV = {
    "UEP_STACK_PORT_BASE": os.environ.get("UEP_TEST_PORT_BASE", "10000"),
    "UEP_STACK_RUN_DIR": str(ROOT / ".run" / os.environ.get("UEP_TEST_RUN_NAME", "test")),
    "UEP_DATABASE_URL": f"{PG_SERVER}/{TEST_DB}",
    "UEP_REDIS_URL": f"{REDIS_SERVER}/{os.environ.get('UEP_TEST_REDIS_DB', '15')}",
    "UEP_TRITON_MODELS": os.environ.get(
        "UEP_TEST_TRITON_MODELS", "smollm2,oracle,bench_echo,judge,judge_first,breast_cancer,vllm_echo,trtllm_echo"
    ),
    "UEP_OTEL_EXPORTER": "console",
    # The fault tests register models that fail only after creation (a closed port, a hanging server); the
    # creation check is tested by calling it (tests/integration/test_failures.py).
    "UEP_MODEL_READY_CHECK": "false",
    # the deterministic judge stand-ins are test fixtures: registered only for the test stack
    "UEP_SEED_TEST_FIXTURES": "1",
    # Periodic retention would clean the details of older evaluations of one (benchmark, model) while later
    # tests read them; the retention tests run it through POST /v1/retention/run instead.
    "UEP_RETENTION_ENABLED": "false",
    # Periodic compaction would fold the ledger rows and delete the leases of evaluations that ended more than
    # UEP_COMPACTION_GRACE_S ago while later tests count them; tests/db/test_compaction.py runs it directly.
    "UEP_COMPACTION_ENABLED": "false",
    # Tests poll and fuzz far faster than people do; tests/identity/test_rate_limits.py checks the limits
    # with the viewer's read rate, kept low here.
    "UEP_RATE_LIMITS": json.dumps(
        {
            "*.read": "100000/minute",
            "*.write": "100000/minute",
            "*.upload": "10000/minute",
            "*.auth": "10000/minute",
            "viewer.read": "300/minute",
            "site.read": "100000/minute",
            "site.write": "100000/minute",
        }
    ),
    "UEP_TENANT_RATE_LIMITS": json.dumps({"read": "1000000/minute", "write": "1000000/minute", "upload": "100000/minute"}),
    "UEP_FAILED_AUTH_RATE_LIMIT": "100000/minute",
    # tests/identity/test_signin_limits.py checks the sign-in windows on a gateway of its own
    "UEP_FAILED_SIGNIN_ACCOUNT_RATE_LIMIT": "100000/minute",
    "UEP_FAILED_SIGNIN_CLIENT_RATE_LIMIT": "100000/minute",
}


@pytest.fixture(scope="session", autouse=True)
def servers_running(request: pytest.FixtureRequest):
    """The checkout's PostgreSQL and Redis, started for this session where they did not run (and then stopped at
    its end), unless every selected test is a unit test. Session-scoped and autouse, so it runs before any other
    session fixture (one that creates a database, say)."""
    import servers

    if all(item.get_closest_marker("unit") is not None for item in request.session.items):
        yield
        return
    started = servers.ensure(PG_SERVER + "/postgres", REDIS_SERVER + "/0")
    yield
    if started:
        servers.stop_all()


@pytest.fixture(scope="session")
def stack(servers_running):
    """The running test stack's configuration (``uep_stack.StackConfig``)."""
    import redis
    from sqlalchemy import text

    os.environ.update(TEST_ENV)
    import shutil

    import uep_stack
    from uep_common.runtime.session import make_sync_engine

    cfg = uep_stack.config()
    uep_stack.down(cfg)  # leftovers of an interrupted run
    shutil.rmtree(cfg.run_dir / "kafka", ignore_errors=True)  # a fresh broker log, as the database is fresh
    admin = make_sync_engine(f"{PG_SERVER}/postgres")
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(text(f"DROP DATABASE IF EXISTS {TEST_DB} WITH (FORCE)"))
    admin.dispose()
    redis.Redis.from_url(TEST_ENV["UEP_REDIS_URL"]).flushdb()
    uep_stack.up(cfg)
    try:
        yield cfg
    finally:
        uep_stack.down(cfg)


@pytest.fixture(scope="session")
def db(stack):
    """Sync SQLAlchemy engine on the test database."""
    from uep_common.runtime.session import make_sync_engine

    engine = make_sync_engine(stack.database_url)
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def admin_key(stack) -> str:
    """The test stack's bootstrap API key: admin of tenant ``default``, marked site admin (it acts across
    tenants only with ``X-UEP-Site-Admin: true``)."""
    return stack.admin_credentials()["api_key"]


SITE = {"X-UEP-Site-Admin": "true"}
"""Headers of a site admin's cross-tenant call (with the :func:`gateway` client's key)."""


@pytest.fixture(scope="session")
def gateway(stack, admin_key):
    """httpx client on the test gateway, authenticated as the admin of tenant ``default``."""
    import httpx

    with httpx.Client(base_url=stack.gateway_url, timeout=30, headers={"Authorization": f"Bearer {admin_key}"}) as client:
        yield client


# --------------------------------------------------------------------------- test tiers
# Every test gets exactly one tier marker here, at collection, so that ``make test-unit`` / ``test-db`` /
# ``test-stack`` (``pytest -m unit`` ...) can run a part without the servers the rest needs:
#   unit   no server at all (subprocesses such as the scorer's sandbox or CLI are fine)
#   db     PostgreSQL and/or Redis only (no broker, Triton or services)
#   stack  the full local stack (the ``stack``, ``gateway`` and ``db`` fixtures above), or a broker/Triton of
#          the test's own
#   ui     headless Chromium (on the full stack)
# A test is classified by the fixtures it requests — ``item.fixturenames`` is the whole closure, so a module
# fixture that builds on ``gateway`` makes its tests ``stack`` — then by folder and module where a test starts
# servers without such a fixture. A tier marker written on a test (``@pytest.mark.db``) wins over all of this.

TIERS = ("unit", "db", "stack", "ui")
# Fixtures, by the tier they need (tests/conftest.py; tests/scheduler/conftest.py's ``sm``/``world`` build
# on ``alloc_db_url``, a migrated PostgreSQL database of their own).
_STACK_FIXTURES = frozenset({"stack", "gateway", "db"})
_DB_FIXTURES = frozenset({"alloc_db_url"})
# Fixtures that start a server of their own, by (folder under tests/, fixture name).
_SERVER_FIXTURES = {("model_server", "server"): "stack"}  # a tritonserver (uep-model-server) per module
# Folders whose tests all have one tier unless a module below says otherwise.
_FOLDER_TIERS = {
    "ui": "ui",  # headless Chromium on the test stack
    "integration": "stack",  # against the test stack; the safe default for a new module here
}
# Modules that start servers without requesting one of the fixtures above.
_MODULE_TIERS = {
    "integration/test_kafka_broker.py": "stack",  # a private Kafka broker, restarted
    "integration/test_wakeups.py": "db",  # PostgreSQL LISTEN/NOTIFY on the server's own database
}


def _tier_of(item: pytest.Item) -> str:
    explicit = [t for t in TIERS if item.get_closest_marker(t) is not None]
    if len(explicit) > 1:
        raise pytest.UsageError(f"{item.nodeid}: more than one tier marker ({', '.join(explicit)})")
    if explicit:
        return explicit[0]
    path = Path(str(item.path)).resolve()
    rel = path.relative_to(ROOT / "tests").as_posix() if path.is_relative_to(ROOT / "tests") else path.name
    folder = rel.split("/", 1)[0] if "/" in rel else ""
    names = set(getattr(item, "fixturenames", ()))
    if folder == "ui":  # before the fixtures: these tests use ``gateway`` too
        return "ui"
    if names & _STACK_FIXTURES:
        return "stack"
    for (where, name), tier in _SERVER_FIXTURES.items():
        if folder == where and name in names:
            return tier
    if rel in _MODULE_TIERS:
        return _MODULE_TIERS[rel]
    if names & _DB_FIXTURES:
        return "db"
    return _FOLDER_TIERS.get(folder, "unit")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = _tier_of(item)
        if item.get_closest_marker(tier) is None:
            item.add_marker(getattr(pytest.mark, tier))
