"""Shared fixtures.

``stack`` starts a complete, fresh test stack once per test session — tansu broker (new, empty),
database ``uep_test`` (dropped and migrated), Redis db 15 (flushed), Triton (``uep-model-server``) and the
six services — on ports 10000 above the dev stack, so it can run beside ``make up``. It is stopped by PID
at the end. Unit tests do not request it and run without any server.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy" / "local"))

# Several test sessions may run side by side (parallel work on one machine): UEP_TEST_PORT_BASE,
# UEP_TEST_DB, UEP_TEST_REDIS_DB, UEP_TEST_RUN_NAME and UEP_TEST_TRITON_MODELS move one to its own ports,
# database, Redis db, run directory and model set.
TEST_DB = os.environ.get("UEP_TEST_DB", "uep_test")
TEST_ENV = {
    "UEP_STACK_PORT_BASE": os.environ.get("UEP_TEST_PORT_BASE", "10000"),
    "UEP_STACK_RUN_DIR": str(ROOT / ".run" / os.environ.get("UEP_TEST_RUN_NAME", "test")),
    "UEP_DATABASE_URL": f"postgresql+psycopg://postgres@127.0.0.1:5432/{TEST_DB}",
    "UEP_REDIS_URL": f"redis://127.0.0.1:6379/{os.environ.get('UEP_TEST_REDIS_DB', '15')}",
    "UEP_TRITON_MODELS": os.environ.get("UEP_TEST_TRITON_MODELS", "smollm2,oracle,bench_echo,judge,judge_first"),
    "UEP_OTEL_EXPORTER": "console",
    # Periodic retention would clean the details of older evaluations of one (benchmark, model) while later
    # tests read them; the retention tests run it through POST /v1/retention/run instead.
    "UEP_RETENTION_ENABLED": "false",
}


@pytest.fixture(scope="session")
def stack():
    """The running test stack's configuration (``uep_stack.StackConfig``)."""
    import redis
    from sqlalchemy import text

    os.environ.update(TEST_ENV)
    import uep_stack
    from uep_common.db.session import make_sync_engine

    cfg = uep_stack.config()
    uep_stack.down(cfg)  # leftovers of an interrupted run
    admin = make_sync_engine("postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
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
    from uep_common.db.session import make_sync_engine

    engine = make_sync_engine(stack.database_url)
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def gateway(stack):
    """httpx client on the test gateway."""
    import httpx

    with httpx.Client(base_url=stack.gateway_url, timeout=30) as client:
        yield client
