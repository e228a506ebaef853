"""Launching one bubblewrap sandbox around the runner (:mod:`uep_common.sandbox.runner`), and one run in it.

Command (Debian's ``bwrap``; options checked against bubblewrap 0.8.0)::

    bwrap --unshare-user --unshare-pid --unshare-net --unshare-ipc --unshare-uts --unshare-cgroup-try
          --disable-userns --uid 65534 --gid 65534 --hostname sandbox
          --die-with-parent --new-session --cap-drop ALL --clearenv --setenv PATH/LANG/LC_ALL/HOME/TMPDIR ...
          --ro-bind /usr /usr  (/bin, /lib, /lib64, /sbin: the same symlinks as the host, or read-only binds)
          [--ro-bind PREFIX PREFIX]  (the interpreter's installation prefix when it is not under /usr)
          --proc /proc --dev /dev --remount-ro /dev --size 16MiB --tmpfs /tmp --dir /tmp/uep-sandbox-work
          --chdir /tmp/uep-sandbox-work --remount-ro / --seccomp FD --info-fd FD
          -- PYTHON -I -S -c <runner> REQUEST_FD VERDICT_FD

so the runner and the candidate run as an unprivileged uid with no capabilities and ``no_new_privs`` in their
own user, PID, mount, network (only a down loopback: nothing to connect to), IPC, UTS and cgroup namespaces,
on a read-only root with a private 16 MiB tmpfs as the only writable place, seeing only their own PIDs in
``/proc``, with an empty environment apart from the five fixed variables above, stdin and stdout on
``/dev/null``, stderr on an anonymous memfd of the supervisor (its tail becomes ``stderr_tail``) and no other
inherited fd but the request and verdict pipes (bwrap's own PID 1 closes all of them; the runner closes
everything else).

Host uid. Started as root, bwrap maps the sandbox uid onto host uid 0: measured here, ``/proc/self/uid_map``
inside reads ``65534 0 1``, and the kernel then exempts the processes from ``RLIMIT_NPROC`` (it never applies
to host root), which is how a ``ctypes`` fork got through before. So a root scorer starts bwrap as host uid/gid
65534 with no supplementary groups (through ``setpriv --reuid --regid --clear-groups``, else
``subprocess.Popen(user=, group=, extra_groups=[])``): the map becomes
``65534 65534 1``, ``RLIMIT_NPROC`` binds and nothing inside is root anywhere. A scorer that is not root
(the container image) starts it as itself. That uid must be able to read the interpreter: a pyenv build under
``/root`` (mode 0700) is not, so :mod:`uep_common.sandbox.isolation` then picks the system's interpreter of the
same minor version (Debian's ``/usr/bin/python3.X``; only the standard library is available to sandboxed code).

Teardown. bwrap's ``--info-fd`` gives the host PID of the namespace's PID 1; at the verdict or the time limit
the supervisor SIGKILLs it and the outer bwrap and waits on a pidfd of that PID 1 until it has exited - the
kernel kills every other process of a PID namespace when its PID 1 exits and only then lets PID 1 finish, so
``setsid``/double-forked children are gone when :func:`run_in_sandbox` returns.

Limits. Set as rlimits by the runner in each process (CPU, address space, file size, open files, core,
``RLIMIT_NPROC`` 0 - binding here because the uid is unprivileged); the tmpfs size caps disk use. No cgroup:
on this machine ``/sys/fs/cgroup`` is cgroup v1 plus a v2 hierarchy at ``/sys/fs/cgroup/unified`` whose only
controller is ``hugetlb`` (no ``pids``, no ``memory``), and a container normally gets no writable cgroup.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import secrets
import select
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import codec, runner, seccomp
from .task import STDERR_TAIL, CodeTask, SandboxLimits, SandboxResult

SANDBOX_UID = 65534
"""Host uid/gid a root scorer starts bwrap as (``nobody``/``nogroup`` on Debian), and the uid inside."""

WORKDIR = "/tmp/uep-sandbox-work"
ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": WORKDIR, "TMPDIR": WORKDIR}
"""The whole environment inside the sandbox: constants, nothing of the scorer's."""

_TOKEN_HEX = 32
_VERDICT_MAX = 4096
_FAIL_LINE = re.compile(rb"F ([a-z_]{1,64}) (-?\d{1,4})\n")


@dataclass(frozen=True)
class BwrapConfig:
    """How sandboxes are started.

    Attributes:
        python: interpreter run inside, by the same absolute path as on the host.
        bwrap: path of the ``bwrap`` executable.
        host_uid: host uid and gid to start bwrap as (``None``: the scorer's own; :data:`SANDBOX_UID` when the
            scorer is root).
        tmpfs_bytes: size of the private ``/tmp``, bytes.
        setpriv: util-linux ``setpriv`` used to drop to ``host_uid`` before bwrap starts (``None``: drop in
            ``subprocess.Popen(user=...)``, which must ``fork`` the whole scorer process instead of ``vfork`` -
            measured ~19 ms against ~2 ms per start here).
    """

    python: str
    bwrap: str = "/usr/bin/bwrap"
    host_uid: int | None = None
    tmpfs_bytes: int = 16 << 20
    setpriv: str | None = None


@functools.lru_cache(maxsize=1)
def runner_source() -> str:
    """The program given to ``python -c`` inside the sandbox: the codec's source, then the runner's."""
    return Path(codec.__file__).read_text(encoding="utf-8") + "\n" + Path(runner.__file__).read_text(encoding="utf-8")


def _root_links() -> list[str]:
    args: list[str] = []
    for top in ("/bin", "/lib", "/lib64", "/sbin"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    return args


def _prefix(python: str) -> str:
    """The installation prefix of ``python`` (the directory above its ``bin``)."""
    return os.path.dirname(os.path.dirname(os.path.realpath(python)))


def sandbox_argv(config: BwrapConfig, *, seccomp_fd: int, info_fd: int, request_fd: int, verdict_fd: int) -> list[str]:
    """The full bwrap command line for one sandbox (options as in the module docstring)."""
    argv = [
        config.bwrap,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--disable-userns",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--hostname",
        "sandbox",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--clearenv",
    ]
    for key, value in ENV.items():
        argv += ["--setenv", key, value]
    argv += ["--ro-bind", "/usr", "/usr", *_root_links()]
    prefix = _prefix(config.python)
    if prefix != "/usr" and not prefix.startswith("/usr/"):
        argv += ["--ro-bind", prefix, prefix]
    argv += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--remount-ro",
        "/dev",
        "--size",
        str(config.tmpfs_bytes),
        "--tmpfs",
        "/tmp",
        "--dir",
        WORKDIR,
        "--chdir",
        WORKDIR,
        "--remount-ro",
        "/",
        "--seccomp",
        str(seccomp_fd),
        "--info-fd",
        str(info_fd),
        "--",
        config.python,
        "-I",
        "-S",
        "-c",
        runner_source(),
        str(request_fd),
        str(verdict_fd),
    ]
    return argv


def _close(fd: int) -> None:
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.close(fd)


class BwrapSandbox:
    """One started sandbox: the runner inside is blocked on its request pipe, the candidate process forked.

    Use once (:func:`run_in_sandbox`), then :meth:`discard`.
    """

    def __init__(self, proc: subprocess.Popen[bytes], request_w: int, verdict_r: int, stderr_fd: int, init_pidfd: int):
        self.proc, self.request_w, self.verdict_r = proc, request_w, verdict_r
        self.stderr_fd, self.init_pidfd = stderr_fd, init_pidfd
        self.init_pid: int | None = None

    def host_uids(self) -> set[int]:
        """Host uids (real, effective, saved, fs) of the namespace's PID 1, read from the host's ``/proc``;
        empty if it is gone."""
        if self.init_pid is None:
            return set()
        try:
            with open(f"/proc/{self.init_pid}/status") as f:
                line = next(line for line in f if line.startswith("Uid:"))
        except (OSError, StopIteration):
            return set()
        return {int(v) for v in line.split()[1:]}

    def alive(self) -> bool:
        """True while bwrap (and so the runner it waits for) is running."""
        return self.proc.poll() is None

    def kill(self) -> int:
        """SIGKILL the namespace's PID 1 and the outer bwrap; return once every process inside is gone.

        Returns the outer bwrap's exit status (negative = signal).
        """
        if self.init_pidfd >= 0:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.init_pidfd, signal.SIGKILL)
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        if self.init_pidfd >= 0:
            poller = select.poll()
            poller.register(self.init_pidfd, select.POLLIN)
            poller.poll(5000)  # readable once PID 1 - and so every process of its namespace - has exited
            _close(self.init_pidfd)
            self.init_pidfd = -1
        return self.proc.wait()

    def stderr_tail(self) -> str:
        """The last :data:`STDERR_TAIL` characters the sandbox wrote to stderr."""
        try:
            size = os.fstat(self.stderr_fd).st_size
            data = os.pread(self.stderr_fd, 4 * STDERR_TAIL, max(0, size - 4 * STDERR_TAIL))
        except OSError:
            return ""
        return data.decode("utf-8", "replace")[-STDERR_TAIL:]

    def discard(self) -> None:
        """Kill everything inside and close the supervisor's fds (idempotent)."""
        self.kill()
        for name in ("request_w", "verdict_r", "stderr_fd"):
            _close(getattr(self, name))
            setattr(self, name, -1)


def spawn(config: BwrapConfig) -> BwrapSandbox:
    """Start one sandbox and wait until bwrap has set up its namespaces (a few ms; the runner's interpreter
    start-up goes on in the background).

    Raises:
        OSError: bwrap is missing, could not set up the sandbox (its message is in the error), or the seccomp
            filter, pipes or memfd could not be made.
    """
    fds: list[int] = []
    try:
        seccomp_fd = seccomp.filter_fd()
        fds.append(seccomp_fd)
        request_r, request_w = os.pipe()
        verdict_r, verdict_w = os.pipe()
        info_r, info_w = os.pipe()
        fds += [request_r, request_w, verdict_r, verdict_w, info_r, info_w]
        stderr_fd = os.memfd_create("uep-sandbox-stderr", os.MFD_CLOEXEC)
        fds.append(stderr_fd)
        argv = sandbox_argv(config, seccomp_fd=seccomp_fd, info_fd=info_w, request_fd=request_r, verdict_fd=verdict_w)
        user: dict[str, Any] = {}
        if config.host_uid is not None and config.setpriv:
            uid = str(config.host_uid)
            argv = [config.setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
        elif config.host_uid is not None:
            user = {"user": config.host_uid, "group": config.host_uid, "extra_groups": []}
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr_fd,
            env={"PATH": "/usr/bin:/bin"},
            pass_fds=(seccomp_fd, info_w, request_r, verdict_w),
            cwd="/",
            **user,
        )
    except OSError:
        for fd in fds:
            _close(fd)
        raise
    for fd in (seccomp_fd, info_w, request_r, verdict_w):
        _close(fd)
    info = b""
    while True:
        chunk = os.read(info_r, 4096)
        if not chunk:
            break
        info += chunk
    _close(info_r)
    sandbox = BwrapSandbox(proc, request_w, verdict_r, stderr_fd, -1)
    try:
        child = int(json.loads(info)["child-pid"])
        sandbox.init_pidfd = os.pidfd_open(child)
        sandbox.init_pid = child
    except (ValueError, KeyError, TypeError, OSError) as exc:
        tail = sandbox.stderr_tail().strip()
        sandbox.discard()
        raise OSError(f"bwrap could not start a sandbox: {tail or exc}") from None
    return sandbox


def _write_all(fd: int, data: bytes, deadline: float) -> None:
    os.set_blocking(fd, False)
    view = memoryview(data)
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    while view:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not poller.poll(int(remaining * 1000) + 1):
            raise TimeoutError("request not taken in time")
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            continue


def _read_verdict(fd: int, deadline: float) -> tuple[bytes, bool]:
    """Bytes on the verdict pipe up to EOF (True) or the deadline (False); at most 4 KiB are kept."""
    os.set_blocking(fd, False)
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    data = b""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not poller.poll(int(remaining * 1000) + 1):
            return data, False
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            continue
        if not chunk:
            return data, True
        data = (data + chunk)[:_VERDICT_MAX]


def run_in_sandbox(sandbox: BwrapSandbox, task: CodeTask, limits: SandboxLimits) -> SandboxResult:
    """Send ``task`` to the started ``sandbox``, wait for its verdict up to ``limits.timeout_s``, kill the
    sandbox and classify the run:

    * no READY token first -> ``"error"`` (the runner never took the request: infrastructure);
    * no end of the verdict pipe within the wall-clock limit -> ``"timed_out"`` (``"wall_clock"``);
    * exactly READY + PASS -> ``"passed"`` (returncode 0);
    * READY + ``F <reason> <returncode>`` -> ``"failed"``, or ``"timed_out"`` for ``cpu_limit``;
    * anything else (the runner died without a verdict) -> ``"failed"`` (``"runner_died"``).

    The sandbox is always discarded. Raises nothing for anything the programs do.
    """
    ready = secrets.token_hex(_TOKEN_HEX // 2)
    passed = secrets.token_hex(_TOKEN_HEX // 2)
    request = json.dumps(
        {
            "ready": ready,
            "pass": passed,
            "limits": limits.rlimits(),
            "candidate": task.candidate,
            "entry_point": task.entry_point,
            "prompt": task.prompt,
            "test": task.test,
        }
    ).encode()
    started = time.monotonic()
    deadline = started + limits.timeout_s
    try:
        try:
            _write_all(sandbox.request_w, request, deadline)
        except OSError as exc:  # the idle runner died (killed from outside) or never read
            sandbox.kill()
            return SandboxResult(
                "error", time.monotonic() - started, sandbox.proc.returncode, sandbox.stderr_tail(), f"harness_unavailable: {exc}"
            )
        _close(sandbox.request_w)
        sandbox.request_w = -1
        verdict, exited = _read_verdict(sandbox.verdict_r, deadline)
        duration = time.monotonic() - started
        returncode = sandbox.proc.poll()  # bwrap's own exit status if it already ended with the runner
        killed = sandbox.kill()  # at the verdict: nothing of the run survives it
        if returncode is None:
            returncode = killed
        return _classify(verdict, ready.encode(), passed.encode(), exited, returncode, duration, sandbox.stderr_tail())
    finally:
        sandbox.discard()


def _classify(
    verdict: bytes, ready: bytes, passed: bytes, exited: bool, returncode: int, duration: float, stderr_tail: str
) -> SandboxResult:
    if not verdict.startswith(ready):
        reason = "harness_did_not_start" + ("" if exited else " (wall_clock)")
        return SandboxResult("error", duration, returncode, stderr_tail, reason)
    if not exited:
        return SandboxResult("timed_out", duration, returncode, stderr_tail, "wall_clock")
    rest = verdict[len(ready) :]
    if rest == passed:
        return SandboxResult("passed", duration, 0, stderr_tail)
    line = _FAIL_LINE.fullmatch(rest)
    if line:
        reason, code = line.group(1).decode(), int(line.group(2))
        return SandboxResult("timed_out" if reason == "cpu_limit" else "failed", duration, code, stderr_tail, reason)
    return SandboxResult("failed", duration, returncode, stderr_tail, "runner_died")
