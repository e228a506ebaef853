"""Choosing the sandbox at start-up, probing that its isolation really holds, and dispatching runs to it.

Modes (``UEP_SANDBOX_MODE``, the scorer setting ``sandbox_mode``):

* ``bwrap`` (default): :mod:`uep_common.sandbox.bwrap` with the split runner. At configuration a probe
  starts a real sandbox, checks from the host that its processes' uids are not host root, and checks from
  inside that the uid is not 0, that no
  capability is left, ``no_new_privs`` and the seccomp filter are on, ``/proc`` shows only the sandbox's PIDs and
  a ``fork`` is refused (``RLIMIT_NPROC`` binds). If bwrap is missing, user namespaces are off, libseccomp is
  missing or the probe fails for every interpreter, the mode becomes ``unavailable``: an ERROR is logged
  naming why and every run returns ``status="sandbox_unavailable"`` without running anything. Never a
  silent fallback.
* ``unsafe_process``: the old single-process harness (:mod:`uep_common.sandbox.process`), only when an
  operator sets it explicitly; logged as a WARNING at configuration.

Interpreter inside the sandbox: ``UEP_SANDBOX_PYTHON`` if set, else the scorer's base interpreter, else the
system's ``/usr/bin/python3.X`` of the same minor version - the first that passes the probe (the sandbox uid
cannot read a pyenv build under ``/root``).

Pool size: ``UEP_SANDBOX_POOL`` sandboxes started ahead of time (default 2).
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import sys
import threading
from dataclasses import dataclass

from . import bwrap, process, seccomp
from .pool import WarmPool
from .settings import SandboxSettings
from .task import CodeTask, SandboxLimits, SandboxResult

log = logging.getLogger(__name__)

MODES = ("bwrap", "unsafe_process")
"""Values an operator may give ``UEP_SANDBOX_MODE``."""

_PROBE = r"""
import ctypes, os
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
assert os.getuid() != 0 and os.geteuid() != 0, "uid 0 inside"
assert int(status["CapEff"].strip(), 16) == 0 and int(status["CapPrm"].strip(), 16) == 0, "capabilities left"
assert status["NoNewPrivs"].strip() == "1", "no_new_privs is off"
assert status["Seccomp"].strip() == "2", "no seccomp filter"
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
assert max(pids) <= 8, "host PIDs visible: %s" % pids[:10]
pid = ctypes.CDLL(None).fork()
if pid == 0:
    os._exit(0)
assert pid == -1, "fork was not refused (RLIMIT_NPROC does not bind)"
"""


@dataclass(frozen=True)
class SandboxStatus:
    """The configured sandbox.

    Attributes:
        mode: ``"bwrap"``, ``"unsafe_process"`` or ``"unavailable"``.
        detail: for ``bwrap`` the interpreter used inside; for ``unavailable`` why (shown in the ERROR log and
            in every ``sandbox_unavailable`` result's ``stderr_tail``).
    """

    mode: str
    detail: str = ""


class SandboxBackend:
    """A configured sandbox: its :class:`SandboxStatus` and, for bwrap, its pool of started sandboxes."""

    def __init__(self, status: SandboxStatus, pool: WarmPool[bwrap.BwrapSandbox] | None = None) -> None:
        self.status, self.pool = status, pool

    def run(self, task: CodeTask, limits: SandboxLimits) -> SandboxResult:
        """Run ``task`` here (see :func:`run_task`)."""
        if self.status.mode == "unsafe_process":
            return process.run_program(task.full_program(), limits)
        if self.status.mode != "bwrap" or self.pool is None:
            return SandboxResult("sandbox_unavailable", 0.0, None, self.status.detail, "sandbox_unavailable")
        try:
            sandbox = self.pool.take()
        except OSError as exc:
            return SandboxResult("error", 0.0, None, "", f"sandbox_setup_failed: {exc}")
        return bwrap.run_in_sandbox(sandbox, task, limits)

    def close(self) -> None:
        """Destroy its idle sandboxes."""
        if self.pool is not None:
            self.pool.close()


_lock = threading.Lock()
_configuring = threading.RLock()
_backend: SandboxBackend | None = None


def _interpreters() -> list[str]:
    configured = SandboxSettings().sandbox_python
    if configured:
        return [configured]
    found: list[str] = []
    base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    system = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    for path in (base, system):
        if os.path.isfile(path) and path not in found:
            found.append(path)
    return found


def _host_uid() -> int | None:
    return bwrap.SANDBOX_UID if os.geteuid() == 0 else None


def _probe_bwrap() -> tuple[SandboxStatus, bwrap.BwrapConfig | None]:
    exe = shutil.which("bwrap") or ("/usr/bin/bwrap" if os.path.exists("/usr/bin/bwrap") else None)
    if exe is None:
        return SandboxStatus("unavailable", "bubblewrap (bwrap) is not installed: run `make install`"), None
    try:
        with open("/proc/sys/user/max_user_namespaces") as f:
            if int(f.read()) == 0:
                return SandboxStatus("unavailable", "user namespaces are disabled (user.max_user_namespaces = 0)"), None
    except (OSError, ValueError):
        pass
    try:
        seccomp.compiled_filter()
    except OSError as exc:
        return SandboxStatus("unavailable", f"seccomp filter unavailable: {exc}"), None
    problems = []
    for python in _interpreters():
        config = bwrap.BwrapConfig(python=python, bwrap=exe, host_uid=_host_uid(), setpriv=shutil.which("setpriv"))
        try:
            sandbox = bwrap.spawn(config)
        except OSError as exc:
            problems.append(f"{python}: {exc}")
            continue
        host_uids = sandbox.host_uids()
        if not host_uids or 0 in host_uids:
            sandbox.discard()
            problems.append(f"{python}: sandbox runs as host uid {host_uids or '?'} (must not be root)")
            continue
        result = bwrap.run_in_sandbox(sandbox, CodeTask(_PROBE), SandboxLimits(timeout_s=10.0))
        if result.status == "passed":
            return SandboxStatus("bwrap", python), config
        last = result.stderr_tail.strip().splitlines()[-1:] or [result.reason or result.status]
        problems.append(f"{python}: isolation probe {result.status}: {last[0]}")
    return SandboxStatus("unavailable", "; ".join(problems) or "no Python interpreter found for the sandbox"), None


def configure(mode: str | None = None) -> SandboxStatus:
    """Choose the sandbox (``mode`` or ``UEP_SANDBOX_MODE``, default ``bwrap``), probe it and log the outcome.

    Logs ERROR naming the cause when isolation is unavailable (code benchmarks then score
    ``sandbox_unavailable``), WARNING for ``unsafe_process``, INFO for a working bwrap sandbox. Replaces any
    earlier configuration. Takes ~0.1 s (one probe sandbox per interpreter tried).
    """
    global _backend
    with _configuring:
        backend = open_backend(mode)
        with _lock:
            old, _backend = _backend, backend
    if old is not None:
        old.close()
    return backend.status


def open_backend(mode: str | None = None) -> SandboxBackend:
    """Probe and start a sandbox backend for ``mode`` (as :func:`configure`, logging the same way) without
    making it the one :func:`run_task` uses; the caller closes it. For comparing modes in one process."""
    mode = (mode or SandboxSettings().sandbox_mode).strip()
    pool = None
    if mode == "unsafe_process":
        status = SandboxStatus("unsafe_process", "UNSAFE: untrusted code runs in a plain process of the scorer's uid")
        log.warning(
            "code sandbox: UEP_SANDBOX_MODE=unsafe_process - untrusted benchmark and model code runs "
            "WITHOUT isolation (no namespaces, no seccomp; a pass can be forged). Use only on a "
            "throw-away machine."
        )
    elif mode == "bwrap":
        status, config = _probe_bwrap()
        if config is not None:
            size = SandboxSettings().sandbox_pool
            pool = WarmPool(lambda: bwrap.spawn(config), size, "bwrap-sandbox-spawner")
            log.info(
                "code sandbox: bwrap (%s, host uid %s, pool %d)",
                status.detail,
                config.host_uid if config.host_uid is not None else os.geteuid(),
                size,
            )
        else:
            log.error(
                "code sandbox UNAVAILABLE: %s. Code benchmarks (humaneval_pass_at_1) will not be run; their "
                "items are scored 'sandbox_unavailable'. Fix the cause, or set UEP_SANDBOX_MODE=unsafe_process "
                "to accept running untrusted code without isolation.",
                status.detail,
            )
    else:
        status = SandboxStatus("unavailable", f"unknown UEP_SANDBOX_MODE {mode!r} (expected one of {', '.join(MODES)})")
        log.error("code sandbox UNAVAILABLE: %s", status.detail)
    return SandboxBackend(status, pool)


def _current() -> SandboxBackend:
    with _lock:
        backend = _backend
    if backend is None:
        with _configuring:
            with _lock:
                backend = _backend
            if backend is None:
                configure()
                with _lock:
                    backend = _backend
    assert backend is not None
    return backend


def status() -> SandboxStatus:
    """The configured sandbox (configured from the environment on first use)."""
    return _current().status


def run_task(task: CodeTask, limits: SandboxLimits = SandboxLimits()) -> SandboxResult:
    """Run ``task`` in the configured sandbox; blocking up to ``limits.timeout_s`` (call via ``asyncio.to_thread``).

    Never raises for anything the programs do: infrastructure failures are ``status="error"``, a machine without
    isolation ``status="sandbox_unavailable"`` (``stderr_tail`` says why).
    """
    return _current().run(task, limits)


def run_python(source: str, limits: SandboxLimits = SandboxLimits()) -> SandboxResult:
    """Run the test-less program ``source`` as the candidate: ``"passed"`` iff it runs to the end without raising."""
    return run_task(CodeTask(source), limits)


@atexit.register
def _close() -> None:
    with _lock:
        backend = _backend
    if backend is not None:
        backend.close()
