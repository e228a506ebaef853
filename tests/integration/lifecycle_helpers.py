"""Helpers of the lifecycle and chaos tests: a TCP forwarder that plays a model endpoint going down, hanging
or coming back, and small polling helpers against the running stack."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import httpx
from sqlalchemy import text

from .helpers import db_rows


class Forwarder:
    """A TCP port in front of Triton whose behaviour the test switches:

    * ``down``: nothing listens (connection refused, a transient failure for inference);
    * ``blackhole``: connections are accepted and never answered (calls hang until their timeout);
    * ``pass``: bytes are forwarded to ``target_port`` both ways (the model answers).

    Every switch closes the connections of the previous mode.
    """

    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.mode = "down"
        self._listener: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()

    def set(self, mode: str) -> None:
        """Switch to ``down``, ``blackhole`` or ``pass``."""
        assert mode in ("down", "blackhole", "pass")
        with self._lock:
            for c in self._conns:
                _close(c)
            self._conns.clear()
            self.mode = mode
            if mode == "down" and self._listener is not None:
                _close(self._listener)
                self._listener = None
            elif mode != "down" and self._listener is None:
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind(("127.0.0.1", self.port))
                sock.listen(64)
                self._listener = sock
                threading.Thread(target=self._accept, args=(sock,), daemon=True).start()

    def close(self) -> None:
        """Stop listening and drop every connection."""
        self.set("down")

    def _accept(self, sock: socket.socket) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
                if self.mode != "pass":
                    continue
                try:
                    upstream = socket.create_connection(self.target, timeout=5)
                    upstream.settimeout(None)
                except OSError:
                    _close(conn)
                    continue
                self._conns.append(upstream)
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def _close(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    s.close()


def _pipe(a: socket.socket, b: socket.socket) -> None:
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass
    finally:
        _close(a)
        _close(b)


def wait_for(what: str, check, timeout_s: float, period_s: float = 0.2):
    """Poll ``check()`` until it returns a truthy value (returned); AssertionError naming ``what`` on timeout."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(period_s)
    raise AssertionError(f"{what}: not reached within {timeout_s} s (last: {last!r})")


def status_of(gateway: httpx.Client, evaluation_id: str) -> dict:
    """GET /v1/evaluations/{id} (asserts 200)."""
    r = gateway.get(f"/v1/evaluations/{evaluation_id}")
    assert r.status_code == 200, r.text
    return r.json()


def wait_status(gateway: httpx.Client, evaluation_id: str, statuses: tuple[str, ...], timeout_s: float = 60) -> dict:
    """Poll until the evaluation's status is one of ``statuses``; returns the body."""
    return wait_for(
        f"evaluation {evaluation_id} in {statuses}",
        lambda: (b := status_of(gateway, evaluation_id))["status"] in statuses and b,
        timeout_s,
    )


def counts(db, evaluation_id: str) -> dict:
    """Stored rows of one evaluation: results, distinct items, errors, leases, max lease attempt, retired rows,
    and the evaluation's own counters."""
    with db.connect() as c:
        row = c.execute(
            text(
                "SELECT (SELECT count(*) FROM sample_results WHERE evaluation_id = :e) AS results, "
                "(SELECT count(DISTINCT (sample_id, repeat, arm)) FROM sample_results WHERE evaluation_id = :e) AS items, "
                "(SELECT count(*) FROM sample_results WHERE evaluation_id = :e AND error IS NOT NULL) AS errors, "
                "(SELECT count(*) FROM sample_leases WHERE evaluation_id = :e) AS leases, "
                "(SELECT coalesce(max(attempt), 0) FROM sample_leases WHERE evaluation_id = :e) AS max_attempt, "
                "(SELECT count(*) FROM retired_results WHERE evaluation_id = :e) AS retired, "
                "completed_items, error_items, status FROM evaluations WHERE id = :e"
            ),
            {"e": evaluation_id},
        ).one()
    return dict(row._mapping)


def verdicts(db, evaluation_id: str) -> dict[int, bool | None]:
    """``{sample ordinal: is_correct}`` of the stored results."""
    sql = "SELECT s.ordinal, r.is_correct FROM sample_results r JOIN samples s ON s.id = r.sample_id WHERE r.evaluation_id = :e"
    return dict(db_rows(db, sql, e=evaluation_id))


@contextlib.contextmanager
def scheduler_with_short_leases(stack, max_attempts: int) -> Iterator[None]:
    """The stack's scheduler restarted (gracefully) with 3 s leases and ``max_attempts`` dispatches per item, so
    items lost with a killed process come back in seconds; restarted with the defaults on exit."""
    import uep_stack

    uep_stack.stop(stack, ["scheduler"])
    uep_stack.start_service(stack, "scheduler", {"UEP_LEASE_SECONDS": "3", "UEP_MAX_LEASE_ATTEMPTS": str(max_attempts)})
    try:
        yield
    finally:
        uep_stack.stop(stack, ["scheduler"])
        uep_stack.start_service(stack, "scheduler")
