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
