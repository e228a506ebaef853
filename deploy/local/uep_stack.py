"""Local stack for development, the demo and the tests: ``up``, ``down``, ``status``; for chaos runs
``kill <process>`` (SIGKILL), ``start <service>`` and ``restart-broker``.

Starts, in order, each as a background process with a PID file and a log in the run directory
(``logs/<name>.log``, begun afresh by each ``up``; the services write one JSON object per line):

0. the checkout's PostgreSQL and Redis, where the stack's URLs point at them and they do not run yet
   (:mod:`servers`: Debian's servers, run from ``.run/servers``);
1. Apache Kafka 4.x (KRaft, one combined broker + controller, ``java -cp`` on the jars ``make install`` collects
   from Maven Central), its log in ``<run_dir>/kafka`` (kept across ``up`` and broker restarts), checked by a
   metadata round trip (an open port is not enough);
2. the database (create + Alembic migrations), the topics (explicit partition counts) and the seed;
3. Triton (``uep-model-server``: nvidia-pytriton on CPU), checked through ``/v2/health/ready`` and each
   model's ``/ready``;
4. the six services, each checked through its ``/readyz``; with ``UEP_STACK_REPLICAS=N`` (``make up REPLICAS=N``)
   N instances of each consumer service (``<service>``, ``<service>-2``, …), which share the partitions of their
   topics through the service's consumer groups.

Readiness is polled, never slept on. ``down`` stops everything by PID (SIGTERM, then SIGKILL of the
process group after a grace period), one process at a time.

Configuration comes from the environment (defaults in :func:`config`), so a test stack can run beside a
dev stack on other ports, with another run directory and database.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from functools import partial

import processes
import servers
from stack_config import (
    BIN,
    CONSUMER_SERVICES,
    MAX_PORT,
    MAX_PORT_BASE,
    PORT_OFFSETS,
    READY_TIMEOUT_S,
    REPLICA_PORT_STEP,
    ROOT,
    SERVICES,
    StackConfig,
    StackConfigError,
    config,
    port_base,
    replicas,
)

# the stack's configuration, used as uep_stack.<name> by benches and tests
__all__ = [
    "BIN",
    "CONSUMER_SERVICES",
    "MAX_PORT",
    "MAX_PORT_BASE",
    "PORT_OFFSETS",
    "READY_TIMEOUT_S",
    "REPLICA_PORT_STEP",
    "ROOT",
    "SERVICES",
    "StackConfig",
    "StackConfigError",
    "config",
    "port_base",
    "replicas",
]

# --------------------------------------------------------------------------------------------- processes
read_pid = processes.read_pid
spawn = processes.spawn
stop = processes.stop
wait_until = processes.wait_until
_http_ok = processes.http_ok


# ------------------------------------------------------------------------------------------- components
def start_broker(cfg: StackConfig) -> None:
    """Start the stack's Apache Kafka broker (KRaft, single node; its log in ``<run_dir>/kafka``) and wait for a
    metadata round trip (:func:`servers.start_kafka`)."""
    servers.start_kafka(cfg, cfg.broker_port, cfg.controller_port)


ADMIN_STEPS = """
import sys
from uep_common.admin import main
for argv in sys.argv[1:]:
    status = main(argv.split("\\x1f"))
    if status:
        sys.exit(f"uep-admin {argv.replace(chr(31), ' ')} exited with {status}")
"""
"""Runs several ``uep-admin`` commands in one interpreter (each argument: one command, its words joined by
the unit separator), so the library is imported once, not once per command."""


def _admin(cfg: StackConfig, *commands: list[str]) -> None:
    """Run the ``uep-admin`` ``commands`` in order, in one process with the stack's environment; print the last
    line each printed.

    Raises:
        RuntimeError: one failed (with the output's tail)."""
    argv = ["\x1f".join(c) for c in commands]
    r = subprocess.run([sys.executable, "-c", ADMIN_STEPS, *argv], env=cfg.service_env("admin"), capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"uep-admin failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    for line in r.stdout.splitlines():
        if line.strip():
            print(f"  uep-admin: {line.strip()[:300]}")


def prepare_database(cfg: StackConfig) -> None:
    """``uep-admin create-db`` and ``migrate`` (no broker needed)."""
    _admin(cfg, ["create-db"], ["migrate"])


def prepare_topics_and_seed(cfg: StackConfig) -> None:
    """``uep-admin create-topics``, ``seed`` and ``bootstrap`` (the admin's credentials file)."""
    _admin(cfg, ["create-topics"], ["seed"], ["bootstrap", "--credentials", str(cfg.credentials_path)])


def _triton_models(cfg: StackConfig) -> list[str]:
    return [m.strip() for m in cfg.triton_models.split(",") if m.strip()]


def spawn_triton(cfg: StackConfig) -> int:
    """Start ``uep-model-server`` (Triton on CPU) with the stack's models, without waiting. Returns its PID."""
    models = _triton_models(cfg)
    return spawn(
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


def wait_triton(cfg: StackConfig) -> None:
    """Wait for Triton's ``/v2/health/ready`` and each model's ``/ready``.

    Raises:
        RuntimeError: it exited, or a check timed out (with its log's tail)."""
    models = _triton_models(cfg)
    base = f"http://127.0.0.1:{cfg.triton_http}"
    wait_until("Triton /v2/health/ready", lambda: _http_ok(f"{base}/v2/health/ready"), 240, cfg, "triton")
    from uep_model_server.main import MODEL_ALIASES  # short name -> Triton name (the module imports the standard library only)

    for m in models:
        name = MODEL_ALIASES.get(m, m)
        wait_until(f"model {m} ready", partial(_http_ok, f"{base}/v2/models/{name}/ready"), 120, cfg, "triton")


def _service_argv(name: str) -> list[str]:
    """The command of a service instance (``scorer-2`` runs ``uep-scorer``)."""
    return [str(BIN / f"uep-{name.partition('-')[0]}")]


def start_services(cfg: StackConfig) -> None:
    """Start every service instance (:meth:`StackConfig.instances`), then wait for each one's /readyz."""
    spawn_services(cfg)
    wait_services(cfg)


def spawn_services(cfg: StackConfig) -> None:
    """Start every service instance (:meth:`StackConfig.instances`) without waiting."""
    for name in cfg.instances():
        spawn(cfg, name, _service_argv(name), cfg.service_env(name))


def wait_services(cfg: StackConfig) -> None:
    """Wait for the /readyz of every service instance.

    Raises:
        RuntimeError: one exited or was not ready within :data:`READY_TIMEOUT_S` (with its log's tail)."""
    for name in cfg.instances():
        port = cfg.health_port(name)
        wait_until("/readyz", partial(_http_ok, f"http://127.0.0.1:{port}/readyz"), READY_TIMEOUT_S, cfg, name)


# ------------------------------------------------------------------------------------ chaos: kill, restart
def kill(cfg: StackConfig, name: str) -> int | None:
    """``kill -9`` the process group of one stack process (no grace, no clean shutdown: a crash). Returns the
    PID killed, or None if it was not running."""
    return processes.kill(cfg, name)


def start_service(cfg: StackConfig, name: str, extra_env: dict[str, str] | None = None, timeout_s: float | None = None) -> int:
    """Start one service instance (after a kill) and wait for its /readyz; ``extra_env`` overrides its
    environment (e.g. ``UEP_LEASE_SECONDS``). Returns its PID."""
    if read_pid(cfg, name) is not None:
        raise RuntimeError(f"{name} is already running")
    pid = spawn(cfg, name, _service_argv(name), {**cfg.service_env(name), **(extra_env or {})})
    port = cfg.health_port(name)
    wait_until("/readyz", lambda: _http_ok(f"http://127.0.0.1:{port}/readyz"), timeout_s or READY_TIMEOUT_S, cfg, name)
    return pid


def restart_broker(cfg: StackConfig) -> float:
    """``kill -9`` the broker and start it again on the same log (topics, records and committed offsets survive on
    disk); the services reconnect and rejoin their groups by themselves. Returns the seconds until the broker
    answered metadata again."""
    t0 = time.monotonic()
    kill(cfg, "broker")
    start_broker(cfg)
    return time.monotonic() - t0


def up(cfg: StackConfig, with_triton: bool = True) -> list[str]:
    """Start the whole stack; on any failure stop what was started and re-raise. Returns the checkout's servers it
    started (``postgres``, ``redis``: :func:`servers.stop_all` stops them), empty when they ran already."""
    if any(read_pid(cfg, n) for n in ["broker", "triton", *cfg.instances()]):
        raise RuntimeError(f"a stack is already running from {cfg.run_dir}; run `make down` first")
    cfg.run_dir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(cfg.run_dir / "traces", ignore_errors=True)
    (cfg.run_dir / "traces").mkdir()
    if (cfg.run_dir / "logs").exists():  # each `up` starts its logs afresh; the previous run's stay in logs.previous
        shutil.rmtree(cfg.run_dir / "logs.previous", ignore_errors=True)
        (cfg.run_dir / "logs").rename(cfg.run_dir / "logs.previous")
    t0 = time.monotonic()

    def step(what: str) -> None:
        print(f"  {time.monotonic() - t0:5.1f} s  {what}", flush=True)

    try:
        started = servers.ensure(cfg.database_url, cfg.redis_url)
        step(f"{' and '.join(started)} started from {servers.config().run_dir}" if started else "PostgreSQL and Redis running")
        # Triton loads its models (the longest step) while the broker starts and the database is prepared
        if with_triton:
            spawn_triton(cfg)
            step(f"Triton starting (models: {cfg.triton_models}) on 127.0.0.1:{cfg.triton_grpc} (gRPC)")
        servers.spawn_kafka(cfg, cfg.broker_port, cfg.controller_port)
        step(f"broker (Apache Kafka, KRaft) starting on 127.0.0.1:{cfg.broker_port}")
        prepare_database(cfg)
        servers.wait_kafka(cfg, cfg.broker_port)
        step("broker ready")
        prepare_topics_and_seed(cfg)
        step("topics and seed ready")
        spawn_services(cfg)  # their imports take as long as Triton's models: both load at once
        if with_triton:
            wait_triton(cfg)
            step("Triton ready")
        wait_services(cfg)
        step("services ready")
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
    return started


def down(cfg: StackConfig) -> None:
    """Stop the services (together, every replica found), then Triton, then the broker (SIGTERM: a controlled
    shutdown that writes its log's end)."""
    found = [p.stem for p in (cfg.run_dir / "pids").glob("*.pid") if p.stem.partition("-")[0] in SERVICES]
    for group, grace in ((sorted({*cfg.instances(), *found}), 15.0), (["triton"], 15.0), (["broker"], 30.0)):
        for name in stop(cfg, group, grace):
            print(f"stopped {name}")


def status(cfg: StackConfig) -> int:
    """Print each process with its PID and health.

    Returns 0 when the stack is fully up and ready, or fully stopped; 1 when it is partly up or unhealthy.
    """
    ok, running = True, 0
    for name in ["broker", "triton", *cfg.instances()]:
        pid = read_pid(cfg, name)
        health = "-"
        if pid and name not in ("broker", "triton"):
            port = cfg.health_port(name)
            health = "ready" if _http_ok(f"http://127.0.0.1:{port}/readyz") else "not ready"
        elif pid and name == "triton":
            health = "ready" if _http_ok(f"http://127.0.0.1:{cfg.triton_http}/v2/health/ready") else "not ready"
        ok &= pid is not None and health != "not ready"
        running += pid is not None
        print(f"{name:<10} {'running' if pid else 'stopped':<8} pid={pid or '-':<8} {health}")
    return 0 if ok or running == 0 else 1


def main(argv: list[str] | None = None) -> int:
    """CLI: ``python deploy/local/uep_stack.py up|down|status|servers|kill|start|restart-broker``.

    ``down`` stops the stack and then the checkout's PostgreSQL and Redis (``down --keep-servers`` leaves them);
    ``servers`` starts only PostgreSQL and Redis."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("command", choices=["up", "down", "status", "servers", "kill", "start", "restart-broker"])
    p.add_argument("service", nargs="?", help="kill/start: the process (a service instance, triton or broker)")
    p.add_argument("--keep-servers", action="store_true", help="down: leave PostgreSQL and Redis running")
    args = p.parse_args(argv)
    try:
        cfg = config()
    except StackConfigError as exc:
        p.error(str(exc))
    if args.command in ("kill", "start"):
        instances = cfg.instances()
        allowed = instances if args.command == "start" else [*instances, "triton", "broker"]
        if args.service not in allowed:
            p.error(f"{args.command} needs one of {', '.join(allowed)}")
        if args.command == "kill":
            print(f"killed {args.service} (pid {kill(cfg, args.service)})")
        else:
            print(f"started {args.service} (pid {start_service(cfg, args.service)})")
        return 0
    if args.command == "restart-broker":
        print(f"broker restarted, metadata answered after {restart_broker(cfg):.2f} s")
        return 0
    if args.command == "servers":
        started = servers.ensure(cfg.database_url, cfg.redis_url)
        print(f"started {', '.join(started)}" if started else "PostgreSQL and Redis already running (or external)")
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
        if not args.keep_servers:
            for name in servers.stop_all():
                print(f"stopped {name}")
        return 0
    return status(cfg)


if __name__ == "__main__":
    sys.exit(main())
