"""The servers under the local stack, brought by the project itself: PostgreSQL and Redis (one of each per
checkout, shared by the dev stack, the test stack and the benches, each with databases of its own) and Apache
Kafka (one broker per stack).

- **PostgreSQL**: Debian's server binaries (``make install`` installs the ``postgresql`` package); a cluster made
  by ``initdb`` in ``<servers run dir>/postgres`` (trust authentication, loopback only), run as the system user
  ``postgres`` when started by root (PostgreSQL refuses root), on ``UEP_STACK_PG_PORT`` (default 25432).
- **Redis**: Debian's ``redis-server``, no persistence, on ``UEP_STACK_REDIS_PORT`` (default 26379).
- **Kafka**: Apache Kafka 4.x in KRaft mode, one combined broker + controller, run with ``java -cp`` from the
  classpath that ``make install`` collects from Maven Central (``deploy/local/kafka/pom.xml`` →
  ``.run/kafka-libs``). Its log lives in ``<stack run dir>/kafka`` and survives a restart of the broker.

A server is started only when the URL the stack uses points at it (``UEP_DATABASE_URL`` / ``UEP_REDIS_URL`` on
another host or port are taken as existing servers) and it is not already running.
"""

from __future__ import annotations

import asyncio
import glob
import os
import pwd
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import processes

ROOT = Path(__file__).resolve().parents[2]
KAFKA_LIBS = ROOT / ".run" / "kafka-libs"
"""Where ``make install`` copies the broker's jars (``mvn dependency:copy-dependencies``)."""
KAFKA_HEAP = os.environ.get("UEP_KAFKA_HEAP", "512m")
"""Largest heap of the broker JVM (``-Xmx``; it starts at a quarter of it)."""
KAFKA_READY_TIMEOUT_S = 90.0
"""Seconds the broker may take until a metadata round trip succeeds (two JVM starts on a busy 2-core machine)."""


@dataclass
class ServersConfig:
    """Ports and run directory of the checkout's PostgreSQL and Redis (see :func:`config`)."""

    run_dir: Path
    pg_port: int
    redis_port: int

    @property
    def server_url(self) -> str:
        """SQLAlchemy URL of this PostgreSQL without a database (user ``postgres``, trust on loopback)."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.pg_port}"

    def database_url(self, database: str) -> str:
        """SQLAlchemy URL of ``database`` on this PostgreSQL."""
        return f"{self.server_url}/{database}"

    def redis_url(self, db: int) -> str:
        """URL of Redis database ``db`` (0-15) on this Redis."""
        return f"redis://127.0.0.1:{self.redis_port}/{db}"


def config() -> ServersConfig:
    """The checkout's servers: ``UEP_STACK_SERVERS_DIR`` (default ``.run/servers``), ``UEP_STACK_PG_PORT`` (25432)
    and ``UEP_STACK_REDIS_PORT`` (26379)."""
    return ServersConfig(
        run_dir=Path(os.environ.get("UEP_STACK_SERVERS_DIR", ROOT / ".run" / "servers")).resolve(),
        pg_port=int(os.environ.get("UEP_STACK_PG_PORT", "25432")),
        redis_port=int(os.environ.get("UEP_STACK_REDIS_PORT", "26379")),
    )


def _is_local(url: str, port: int) -> bool:
    parts = urlsplit(url)
    return parts.hostname in ("127.0.0.1", "localhost") and parts.port == port


# ------------------------------------------------------------------------------------------------ PostgreSQL
def postgres_bindir() -> Path:
    """The newest installed PostgreSQL server's ``bin`` (Debian: ``/usr/lib/postgresql/<major>/bin``).

    Raises:
        RuntimeError: no PostgreSQL server is installed (``make install`` installs Debian's)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    which = shutil.which("postgres")
    if which:
        return Path(which).parent
    raise RuntimeError("no PostgreSQL server found: run `make install` (it installs Debian's postgresql)")


def _postgres_user() -> str | None:
    """The user PostgreSQL runs as: ``postgres`` when this process is root, else this user (None)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise RuntimeError("running as root, and there is no system user 'postgres' to run PostgreSQL as") from None
    return "postgres"


def _data_dir(cfg: ServersConfig) -> Path:
    """The cluster's directory: ``<run_dir>/postgres``, or, when PostgreSQL runs as ``postgres`` and cannot reach
    the run directory (a parent without o+x), ``/var/tmp/uep-postgres-<port>``."""
    inside = cfg.run_dir / "postgres"
    if _postgres_user() is None or all(os.stat(p).st_mode & 0o001 for p in inside.parents if p.exists()):
        return inside
    return Path(f"/var/tmp/uep-postgres-{cfg.pg_port}")


def _pg_ready(cfg: ServersConfig) -> bool:
    import psycopg

    with psycopg.connect(host="127.0.0.1", port=cfg.pg_port, user="postgres", dbname="postgres", connect_timeout=2) as c:
        c.execute("SELECT 1")
    return True


def start_postgres(cfg: ServersConfig) -> bool:
    """Start the checkout's PostgreSQL (``initdb`` first when the cluster does not exist) unless it runs.
    Returns whether it was started now.

    Raises:
        RuntimeError: initdb failed, or the server did not accept a connection within 60 s (with its log)."""
    if processes.read_pid(cfg, "postgres") is not None:
        return False
    bindir, user, data = postgres_bindir(), _postgres_user(), _data_dir(cfg)
    if not (data / "PG_VERSION").exists():
        shutil.rmtree(data, ignore_errors=True)
        data.mkdir(parents=True)
        if user:
            shutil.chown(data, user, user)
        r = subprocess.run(
            [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale"],
            capture_output=True,
            text=True,
            user=user,
            cwd=data,  # a directory the server's user can enter (the caller's may be a 0700 home)
        )
        if r.returncode != 0:
            raise RuntimeError(f"initdb failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    (data / "postmaster.pid").unlink(missing_ok=True)  # left by a killed server; its PID is not running
    processes.spawn(
        cfg,
        "postgres",
        [
            str(bindir / "postgres"),
            "-D",
            str(data),
            "-p",
            str(cfg.pg_port),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "unix_socket_directories=",
            "-c",
            "max_connections=200",
        ],
        dict(os.environ),
        cwd=data,
        user=user,
    )
    processes.wait_until("a connection", lambda: _pg_ready(cfg), 60, cfg, "postgres")
    return True


# --------------------------------------------------------------------------------------------------- Redis
def start_redis(cfg: ServersConfig) -> bool:
    """Start the checkout's Redis (no snapshots, no append-only file) unless it runs. Returns whether it was
    started now.

    Raises:
        RuntimeError: no ``redis-server`` (``make install`` installs it), or no PING answer within 30 s."""
    if processes.read_pid(cfg, "redis") is not None:
        return False
    exe = shutil.which("redis-server")
    if exe is None:
        raise RuntimeError("redis-server not found: run `make install` (it installs Debian's redis-server)")
    data = cfg.run_dir / "redis"
    data.mkdir(parents=True, exist_ok=True)
    processes.spawn(
        cfg,
        "redis",
        [exe, "--port", str(cfg.redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(data)],
        dict(os.environ),
        cwd=data,
    )

    def ping() -> bool:
        import redis

        return bool(redis.Redis(port=cfg.redis_port, socket_timeout=2).ping())

    processes.wait_until("PING", ping, 30, cfg, "redis")
    return True


def ensure(database_url: str, redis_url: str, cfg: ServersConfig | None = None) -> list[str]:
    """Start PostgreSQL and Redis where ``database_url`` / ``redis_url`` point at the checkout's own servers and
    they do not run. Returns the names started now (``postgres``, ``redis``)."""
    cfg = cfg or config()
    started = []
    if _is_local(database_url, cfg.pg_port) and start_postgres(cfg):
        started.append("postgres")
    if _is_local(redis_url, cfg.redis_port) and start_redis(cfg):
        started.append("redis")
    return started


def stop_all(cfg: ServersConfig | None = None) -> list[str]:
    """Stop Redis and PostgreSQL: SIGTERM to each one's process group (PostgreSQL's backends end with their
    postmaster), SIGKILL of what is left after 15 s. Returns the names that ran."""
    return processes.stop(cfg or config(), ["redis", "postgres"])


# --------------------------------------------------------------------------------------------------- Kafka
SERVER_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{broker_port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={log_dir}
num.partitions=6
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=6
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=2
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=1
num.io.threads=2
background.threads=2
group.coordinator.threads=1
share.coordinator.threads=1
metadata.max.idle.interval.ms=5000
num.recovery.threads.per.data.dir=1
num.replica.fetchers=1
log.cleaner.threads=1
log.cleaner.dedupe.buffer.size=16777216
log.retention.hours=24
log.retention.bytes=1073741824
log.segment.bytes=67108864
log.retention.check.interval.ms=30000
"""
"""A single node, broker and controller in one JVM, sized for a 2-core machine. Topics uep creates carry their
own retention (``uep_common.runtime.messaging.topic_spec``); these are the broker's defaults for any other topic."""

LOG4J2_PROPERTIES = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = OUT
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = INFO
"""


def kafka_classpath() -> str:
    """``.run/kafka-libs/*``.

    Raises:
        RuntimeError: the jars are not there (``make install`` collects them with Maven)."""
    if not any(KAFKA_LIBS.glob("kafka_2.13-*.jar")):
        raise RuntimeError(f"no Kafka jars in {KAFKA_LIBS}: run `make install` (mvn collects them from Maven Central)")
    return f"{KAFKA_LIBS}/*"


def kafka_java_options(log4j2: Path) -> list[str]:
    """JVM options of the broker: a heap of 128 MiB growing to :data:`KAFKA_HEAP`, the serial collector (one
    thread: the cheapest idle on two cores), no perf-data sampling, exit on out-of-memory, the log4j2 file."""
    xmx = KAFKA_HEAP
    return [
        f"-Xmx{xmx}",
        "-Xms128m",
        "-XX:+UseSerialGC",
        "-XX:-UsePerfData",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile=file:{log4j2}",
    ]


def _metadata_round_trip(bootstrap: str) -> bool:
    """Whether the broker answers a metadata request (an admin client's ``list_topics``) within 5 s; False at
    once while its port refuses connections (no client, so no reconnect warnings meanwhile)."""
    import socket

    from aiokafka.admin import AIOKafkaAdminClient

    host, port = bootstrap.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return False

    async def go() -> bool:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=3000)
        await asyncio.wait_for(admin.start(), 5)
        try:
            await asyncio.wait_for(admin.list_topics(), 5)
        finally:
            await admin.close()
        return True

    return asyncio.run(go())


def start_kafka(
    place: processes.Place,
    broker_port: int,
    controller_port: int,
    name: str = "broker",
    overrides: dict[str, str] | None = None,
) -> None:
    """Start the stack's Kafka broker (process ``name``) and wait for a metadata round trip: :func:`spawn_kafka`,
    then :func:`wait_kafka`."""
    spawn_kafka(place, broker_port, controller_port, name, overrides)
    wait_kafka(place, broker_port, name)


def spawn_kafka(
    place: processes.Place,
    broker_port: int,
    controller_port: int,
    name: str = "broker",
    overrides: dict[str, str] | None = None,
) -> int:
    """Start the broker without waiting for it; ``overrides`` are broker properties appended to
    :data:`SERVER_PROPERTIES` (the later line wins). Returns its PID.

    The first start formats ``<run_dir>/kafka/data`` (``StorageTool format --standalone`` with a new cluster id);
    later starts find the log there and recover it (a restart keeps every topic, record and committed offset).

    Raises:
        RuntimeError: no jars, or the format failed."""
    cp = kafka_classpath()
    home = place.run_dir / "kafka"
    data = home / "data"
    home.mkdir(parents=True, exist_ok=True)
    props = home / "server.properties"
    extra = "".join(f"{k}={v}\n" for k, v in (overrides or {}).items())
    props.write_text(SERVER_PROPERTIES.format(broker_port=broker_port, controller_port=controller_port, log_dir=data) + extra)
    log4j2 = home / "log4j2.properties"
    log4j2.write_text(LOG4J2_PROPERTIES)
    java = [shutil.which("java") or "java", *kafka_java_options(log4j2), "-cp", cp]
    if not (data / "meta.properties").exists():
        shutil.rmtree(data, ignore_errors=True)
        r = subprocess.run(
            [*java, "kafka.tools.StorageTool", "format", "--standalone", "-t", _cluster_id(), "-c", str(props)],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            raise RuntimeError(f"Kafka storage format failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return processes.spawn(place, name, [*java, "kafka.Kafka", str(props)], dict(os.environ), cwd=home)


def wait_kafka(place: processes.Place, broker_port: int, name: str = "broker") -> None:
    """Wait until the broker ``name`` answers a metadata request.

    Raises:
        RuntimeError: it exited, or did not answer within :data:`KAFKA_READY_TIMEOUT_S` (with its log's tail)."""
    processes.wait_until(
        "a metadata round trip",
        lambda: _metadata_round_trip(f"127.0.0.1:{broker_port}"),
        KAFKA_READY_TIMEOUT_S,
        place,
        name,
    )


def _cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding (what ``StorageTool random-uuid``
    prints, without a JVM start)."""
    import base64

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


PG_SERVER = config().server_url
"""SQLAlchemy URL of the checkout's PostgreSQL without a database (append ``/<database>``)."""
REDIS_SERVER = f"redis://127.0.0.1:{config().redis_port}"
"""URL of the checkout's Redis without a database number (append ``/<db>``)."""
