"""``uep-model-server`` as a subprocess of a test: started on free ports with the models the test names, in
its own session/process group, stopped by SIGTERM (then SIGKILL of the group) when the context ends."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

READY_TIMEOUT_S = 120.0
SERVER_BIN = Path(sys.executable).with_name("uep-model-server")


def free_ports(n: int) -> list[int]:
    """``n`` TCP ports free on 127.0.0.1 right now."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


@contextlib.contextmanager
def model_server(models: Sequence[str], env: dict[str, str] | None = None) -> Iterator[dict]:
    """Run ``uep-model-server --models <models>`` until the context ends; yields ``{"http": "host:port",
    "grpc": "host:port", "ready_s": float, "proc": Popen, "log": () -> str}`` once the server and every model are ready.

    Fails the test when the server exits or is not ready within :data:`READY_TIMEOUT_S`; on leaving,
    asserts that SIGTERM stopped it cleanly and that no process of its group survived."""
    http_port, grpc_port, metrics_port = free_ports(3)
    # the server writes to it while it runs; the finally below closes and removes it
    log = tempfile.NamedTemporaryFile(prefix="uep-model-server-", suffix=".log", delete=False)  # noqa: SIM115
    cmd = [
        str(SERVER_BIN),
        "--http-port",
        str(http_port),
        "--grpc-port",
        str(grpc_port),
        "--metrics-port",
        str(metrics_port),
        "--models",
        ",".join(models),
    ]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **(env or {})})

    def log_tail() -> str:
        return Path(log.name).read_text(errors="replace")[-4000:]

    try:
        base = f"http://127.0.0.1:{http_port}"
        urls = [f"{base}/v2/health/ready"] + [f"{base}/v2/models/{m}/ready" for m in models]
        deadline = started + READY_TIMEOUT_S
        while not all(_http_ok(u) for u in urls):
            if proc.poll() is not None:
                pytest.fail(f"uep-model-server exited with {proc.returncode} before ready:\n{log_tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"uep-model-server not ready after {READY_TIMEOUT_S:.0f} s:\n{log_tail()}")
            time.sleep(0.25)
        ready_s = time.monotonic() - started
        print(f"\nuep-model-server ({','.join(models)}) ready in {ready_s:.1f} s", file=sys.stderr)
        yield {
            "http": f"127.0.0.1:{http_port}",
            "grpc": f"127.0.0.1:{grpc_port}",
            "ready_s": ready_s,
            "proc": proc,
            "log": lambda: Path(log.name).read_text(errors="replace"),
        }
    finally:
        exited_cleanly = None
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                exited_cleanly = proc.wait(timeout=30) == 0
            except subprocess.TimeoutExpired:
                exited_cleanly = False
        # tritonserver and its backend stubs must go with the parent; give them a moment, then force.
        deadline = time.monotonic() + 10
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        leftovers = _group_alive(proc.pid)
        if leftovers:
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.wait(timeout=10)
        text = log_tail()
        log.close()
        os.unlink(log.name)
        assert exited_cleanly in (None, True), f"SIGTERM did not stop the server cleanly:\n{text}"
        assert not leftovers, "processes of the server's group survived SIGTERM"
