"""The local stack's configuration: its ports (``UEP_STACK_PORT_BASE`` + an offset each), run directory,
database and Redis URLs, Triton's models and replicas, all from the environment (:func:`config`), and the
environment each of its processes gets (:meth:`StackConfig.service_env`). :mod:`uep_stack` starts and stops
the processes."""

from __future__ import annotations

import base64
import json
import os
import secrets
import sys
from dataclasses import dataclass, field
from pathlib import Path

import servers

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SERVICES = ["gateway", "scheduler", "inference", "scorer", "judge", "reporter"]
CONSUMER_SERVICES = [s for s in SERVICES if s != "gateway"]
"""The services that consume Kafka topics: the ones ``UEP_STACK_REPLICAS`` runs several instances of."""
REPLICA_PORT_STEP = 100
"""Health port of replica ``r`` (2, 3, …) of a service = the service's health port + (r - 1) × this."""
READY_TIMEOUT_S = float(os.environ.get("UEP_STACK_READY_TIMEOUT_S", "180"))
"""Seconds a service may take to answer /readyz (imports alone take a minute on a busy 2-core machine)."""


PORT_OFFSETS = {
    "triton_http": 8000,
    "triton_grpc": 8001,
    "triton_metrics": 8002,
    "gateway": 8080,
    **{name: 8090 + i for i, name in enumerate(SERVICES) if name != "gateway"},  # health ports
    "broker": 9092,
    "controller": 9093,
}
"""Port of each stack process = ``UEP_STACK_PORT_BASE`` + its offset."""
MAX_PORT = 65535
MAX_PORT_BASE = MAX_PORT - max(PORT_OFFSETS.values())
"""The highest usable ``UEP_STACK_PORT_BASE``: with it the highest port of the stack (the broker's controller
port) is 65535."""


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
            f"base (the stack's highest port, the broker's controller port, is the base + {max(PORT_OFFSETS.values())} and a port is at "
            f"most {MAX_PORT})"
        )
    return base


@dataclass
class StackConfig:
    """Ports, paths and names of one stack (see :func:`config`)."""

    run_dir: Path
    broker_port: int
    controller_port: int
    triton_http: int
    triton_grpc: int
    triton_metrics: int
    gateway_port: int
    service_ports: dict[str, int]
    database_url: str
    redis_url: str
    triton_models: str
    replicas: int = 1
    extra_env: dict[str, str] = field(default_factory=dict)

    def ports(self) -> list[int]:
        """Every port of the stack's first instances: broker, controller, Triton's three, gateway, the services'
        health ports (a replica's is :meth:`health_port`)."""
        return [
            self.broker_port,
            self.controller_port,
            self.triton_http,
            self.triton_grpc,
            self.triton_metrics,
            self.gateway_port,
            *self.service_ports.values(),
        ]

    def instances(self) -> list[str]:
        """Process names of every service instance: the six services, then ``<service>-<r>`` for each further
        replica of a consumer service."""
        return [*SERVICES, *(f"{s}-{r}" for r in range(2, self.replicas + 1) for s in CONSUMER_SERVICES)]

    def health_port(self, instance: str) -> int:
        """Port of ``/readyz`` of a service instance (the gateway's is its API port)."""
        service, _, replica = instance.partition("-")
        if service == "gateway":
            return self.gateway_port
        return self.service_ports[service] + (int(replica or 1) - 1) * REPLICA_PORT_STEP

    @property
    def gateway_url(self) -> str:
        """The base URL of this stack's gateway API, e.g. ``http://127.0.0.1:8080``."""
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
                # model endpoints on this machine (the embedded Triton, a local vLLM) may be registered here
                "UEP_MODEL_EGRESS_ALLOW": os.environ.get("UEP_MODEL_EGRESS_ALLOW", "127.0.0.0/8,::1"),
                # logs/<name>.log: one JSON object per line (uep_common.runtime.logs), also when `up` runs in a terminal
                "UEP_LOG_FORMAT": os.environ.get("UEP_LOG_FORMAT", "json"),
                "PYTHONUNBUFFERED": "1",
            }
        )
        if name.partition("-")[0] in self.service_ports:
            env["UEP_HEALTH_PORT"] = str(self.health_port(name))
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
        controller_port=port["controller"],
        triton_http=port["triton_http"],
        triton_grpc=port["triton_grpc"],
        triton_metrics=port["triton_metrics"],
        gateway_port=port["gateway"],
        service_ports={name: port[name] for name in SERVICES if name != "gateway"},
        database_url=os.environ.get("UEP_DATABASE_URL") or servers.config().database_url("uep"),
        redis_url=os.environ.get("UEP_REDIS_URL") or servers.config().redis_url(0),
        triton_models=os.environ.get(
            "UEP_TRITON_MODELS",
            "smollm2,oracle,bench_echo,judge,judge_first,mmlu_topic,breast_cancer,e5_rank,e5_embed,vllm_echo,trtllm_echo",
        ),
        replicas=replicas(),
    )


def replicas() -> int:
    """``UEP_STACK_REPLICAS`` (default 1): instances of each consumer service.

    Raises:
        StackConfigError: not an integer from 1 to 9."""
    raw = os.environ.get("UEP_STACK_REPLICAS", "1").strip() or "1"
    if not raw.isdigit() or not 1 <= int(raw) <= 9:
        raise StackConfigError(f"UEP_STACK_REPLICAS={raw!r} must be an integer from 1 to 9")
    return int(raw)
