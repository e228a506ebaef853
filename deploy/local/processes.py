"""Background processes of the local stack: start one with a PID file and a log, poll it for readiness, stop it
by PID.

Every function takes a ``place``: anything with a ``run_dir`` (a :class:`pathlib.Path`), such as
``uep_stack.StackConfig`` or ``servers.ServersConfig``. A process ``name`` has ``<run_dir>/pids/<name>.pid`` and
``<run_dir>/logs/<name>.log``; it runs in a session (process group) of its own, so that stopping it also stops
what it started (tritonserver under uep-model-server, the JVM's helpers).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol


class Place(Protocol):
    """Where a group of processes keeps its PID files and logs."""

    run_dir: Path


def pid_file(place: Place, name: str) -> Path:
    """``<run_dir>/pids/<name>.pid``."""
    return place.run_dir / "pids" / f"{name}.pid"


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie child of this process counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return True


def read_pid(place: Place, name: str) -> int | None:
    """PID of process ``name`` if its PID file exists and the process is alive."""
    try:
        pid = int(pid_file(place, name).read_text())
    except (FileNotFoundError, ValueError):
        return None
    return pid if alive(pid) else None


def spawn(place: Place, name: str, argv: list[str], env: dict[str, str], cwd: Path | None = None, user: str | None = None) -> int:
    """Start ``argv`` in its own session, append its output to ``logs/<name>.log``, write its PID file.

    ``user``: run it as this system user (PostgreSQL refuses to run as root). Returns the PID."""
    (place.run_dir / "logs").mkdir(parents=True, exist_ok=True)
    (place.run_dir / "pids").mkdir(parents=True, exist_ok=True)
    log = open(place.run_dir / "logs" / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child
    extra: dict[str, Any] = {"user": user} if user else {}
    proc = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=cwd, start_new_session=True, **extra
    )
    pid_file(place, name).write_text(str(proc.pid))
    return proc.pid


def stop(place: Place, names: list[str], grace_s: float = 15.0) -> list[str]:
    """SIGTERM the process groups of ``names`` together, wait up to ``grace_s`` for all of them, then SIGKILL what
    is left (and any child left in a group, e.g. tritonserver). Returns the names that ran."""
    pids: dict[str, int] = {}
    for name in names:
        try:
            pids[name] = int(pid_file(place, name).read_text())
        except (FileNotFoundError, ValueError):
            continue
    ran = [name for name, pid in pids.items() if alive(pid)]
    for name in ran:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pids[name], signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(alive(pids[n]) for n in ran) and time.monotonic() < deadline:
        time.sleep(0.1)
    for name, pid in pids.items():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        pid_file(place, name).unlink(missing_ok=True)
    return ran


def kill(place: Place, name: str) -> int | None:
    """``kill -9`` the process group of ``name`` (a crash: no clean shutdown) and wait until it is gone.
    Returns the PID killed, or None if it was not running."""
    pid = read_pid(place, name)
    if pid is None:
        return None
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    pid_file(place, name).unlink(missing_ok=True)
    return pid


def log_tail(place: Place, name: str, lines: int = 30) -> str:
    """The last ``lines`` lines of ``logs/<name>.log``."""
    try:
        return "\n".join((place.run_dir / "logs" / f"{name}.log").read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def wait_until(what: str, check: Callable[[], object], timeout_s: float, place: Place, name: str) -> None:
    """Poll ``check()`` every 0.2 s until it is truthy.

    Raises:
        RuntimeError: ``name`` exited, or ``timeout_s`` passed; the message holds the log's tail."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if read_pid(place, name) is None:
            raise RuntimeError(f"{name} exited while waiting for {what}:\n{log_tail(place, name)}")
        try:
            if check():
                return
        except Exception:  # noqa: BLE001 - not ready yet
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{name}: {what} not reached within {timeout_s:.0f} s:\n{log_tail(place, name)}")


def http_ok(url: str) -> bool:
    """Whether a GET of ``url`` answers 2xx within 2 s."""
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            status: int = r.status
            return 200 <= status < 300
    except (urllib.error.URLError, OSError):
        return False
