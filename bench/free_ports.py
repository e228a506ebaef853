"""Wait until a private stack's ports can be bound again (for the benches that stop and start stacks).

A stack stopped a moment ago leaves its server sockets in TIME_WAIT for up to a minute; Triton binds
without ``SO_REUSEADDR`` and exits at once ("Address in use") when started on such a port.
"""

from __future__ import annotations

import socket
import time


def busy(port: int, host: str = "127.0.0.1") -> bool:
    """Whether ``host:port`` cannot be bound now (without ``SO_REUSEADDR``, as Triton binds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def wait_until_free(ports: list[int], timeout_s: float = 120.0) -> None:
    """Block until every port of ``ports`` can be bound, at most ``timeout_s`` seconds.

    Raises:
        TimeoutError: some are still taken (another process listens there).
    """
    deadline = time.monotonic() + timeout_s
    while taken := [p for p in ports if busy(p)]:
        if time.monotonic() > deadline:
            raise TimeoutError(f"ports still in use after {timeout_s:.0f} s: {taken}")
        time.sleep(1.0)


def stack_ports(cfg) -> list[int]:
    """Every port of a ``uep_stack.StackConfig`` (:meth:`uep_stack.StackConfig.ports`)."""
    return cfg.ports()


def echo_stack_env(port_base: int, run_dir: str, database: str, redis_db: int) -> dict[str, str]:
    """The environment of a bench's private stack serving the echo model only: its own ports
    (``UEP_STACK_PORT_BASE``), run directory, database and Redis db on the checkout's servers, no span export and
    warnings-only logs. Set it in ``os.environ`` before importing ``uep_stack``."""
    from servers import PG_SERVER, REDIS_SERVER

    return {
        "UEP_STACK_PORT_BASE": str(port_base),
        "UEP_STACK_RUN_DIR": run_dir,
        "UEP_DATABASE_URL": f"{PG_SERVER}/{database}",
        "UEP_REDIS_URL": f"{REDIS_SERVER}/{redis_db}",
        "UEP_TRITON_MODELS": "bench_echo",
        "UEP_OTEL_EXPORTER": "none",
        "UEP_LOG_LEVEL": "WARNING",
    }


def start_fresh(cfg) -> None:
    """Stop whatever runs as the stack ``cfg`` (a ``uep_stack.StackConfig``), wait until its ports are free (a
    stack stopped just before leaves TIME_WAIT sockets), then start it."""
    import uep_stack

    uep_stack.down(cfg)
    wait_until_free(stack_ports(cfg))
    uep_stack.up(cfg)
