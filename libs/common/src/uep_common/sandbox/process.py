"""The unsafe process fallback (``UEP_SANDBOX_MODE=unsafe_process``) and the benchmark baseline.

NOT a security boundary: the program runs in one ordinary process of the scorer's own uid. Used only when an
operator explicitly chooses it (logged as a warning at start-up) and by ``bench/scorer_throughput.py`` as the
baseline; the default is the bwrap sandbox (:mod:`uep_common.sandbox.bwrap`).

Process: ``sys.executable -I -c <harness>`` (isolated mode), ``start_new_session=True``, a fresh temporary
directory as cwd/HOME/TMPDIR deleted afterwards, a scrubbed environment (``PATH``, ``LANG``, ``LC_ALL``,
``HOME``, ``TMPDIR``), stdin from ``/dev/null``, stdout discarded, stderr to a file whose tail is returned. On
the wall-clock timeout, and after a normal exit before the leader is reaped (a pidfd tells us it exited), the
whole process group is SIGKILLed. The harness sets rlimits itself (CPU, address space, file size, open files,
no core dumps, ``RLIMIT_NPROC``, which the kernel ignores for root), moves itself into an empty network
namespace, removes process-control functions (``ctypes`` bypasses that) and ``exec``s the whole program
(candidate + test + ``check(entry_point)``) in one namespace.

Verdict: two random tokens READY and PASS reach the harness through a pipe; it writes READY before running
the program and PASS only if ``exec`` returned. Printing "passed", ``sys.exit(0)`` and ``os._exit(0)`` fail,
but code that walks its own interpreter (``sys._getframe``, ``gc``) can find the PASS closure and forge a
pass, and a process running as root can leave its namespace: hence "unsafe".
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from .pool import WarmPool
from .settings import SandboxSettings
from .task import STDERR_TAIL, SandboxLimits, SandboxResult

_HARNESS = r"""
import os, resource, signal, sys

def _isolate_network():
    # A new, empty network namespace (not even loopback is up): no connection can leave or reach the
    # machine. As root this is a plain unshare(CLONE_NEWNET); otherwise try an unprivileged user namespace.
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x40000000) != 0:
        libc.unshare(0x10000000 | 0x40000000)

def _read_request(fd):
    # 64 token bytes, then one line: cpu_s as_b fsize_b nofile nproc path (the harness may have been
    # started ahead of time, so the limits and the program arrive with the request, not in argv)
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 4096)
        if not chunk:
            raise SystemExit("sandbox harness: no request")
        data += chunk
    os.close(fd)
    fields = data[64:-1].decode().split(" ", 5)
    return data[:64], list(map(int, fields[:5])), fields[5]

def _setup():
    _isolate_network()
    token_fd, verdict_fd = map(int, sys.argv[1:3])
    del sys.argv[1:]
    buf, (cpu_s, as_b, fsize_b, nofile, nproc), path = _read_request(token_fd)
    for res, soft, hard in (
        (resource.RLIMIT_CPU, cpu_s, cpu_s + 1), (resource.RLIMIT_AS, as_b, as_b),
        (resource.RLIMIT_FSIZE, fsize_b, fsize_b), (resource.RLIMIT_NOFILE, nofile, nofile),
        (resource.RLIMIT_CORE, 0, 0), (resource.RLIMIT_NPROC, nproc, nproc),
    ):
        cur_hard = resource.getrlimit(res)[1]
        if cur_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, cur_hard), min(hard, cur_hard)
        resource.setrlimit(res, (soft, hard))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    with open(path, encoding="utf-8") as f:
        source = f.read()
    import traceback
    write, exit_ = os.write, os._exit

    def finish(ok, _token=buf[32:]):
        if ok:
            write(verdict_fd, _token)
            exit_(0)
        try:
            etype, exc, tb = sys.exc_info()
            traceback.print_exception(etype, exc, tb.tb_next if tb else None)  # skip harness frame
            sys.stderr.flush()
        except BaseException:
            pass
        exit_(1)

    write(verdict_fd, buf[:32])
    _guard()
    return source, finish

def _guard():
    import posix, shutil, subprocess
    names = ("kill", "killpg", "system", "fork", "forkpty", "putenv", "unsetenv", "remove",
             "removedirs", "rmdir", "unlink", "rename", "renames", "replace", "truncate", "chmod",
             "fchmod", "lchmod", "chown", "fchown", "lchown", "chroot", "setuid", "setgid",
             "setsid", "setpgid", "fchdir", "popen", "posix_spawn", "posix_spawnp", "execv",
             "execve", "execl", "execle", "execlp", "execlpe", "execvp", "execvpe", "spawnl",
             "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe")
    for mod in (os, posix):
        for name in names:
            if hasattr(mod, name):
                setattr(mod, name, None)
    shutil.rmtree = shutil.move = shutil.chown = None
    subprocess.Popen = None
    resource.setrlimit = resource.prlimit = None

def _run():
    source, finish = _setup()
    namespace = {"__name__": "candidate", "__builtins__": __builtins__}
    try:
        exec(compile(source, "candidate.py", "exec"), namespace)
    except BaseException:
        finish(False)
    finish(True)

_run()
"""

_TOKEN_HEX = 32  # characters per token; the harness reads exactly 2 * 32 bytes


def _wait_exited(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Wait until ``proc`` exits, without reaping it; False on timeout."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # pragma: no cover - kernels < 5.3
        try:
            proc.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        return bool(poller.poll(max(0, int(timeout_s * 1000))))
    finally:
        os.close(pidfd)


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4 * STDERR_TAIL))
            return f.read().decode("utf-8", "replace")[-STDERR_TAIL:]
    except OSError:
        return ""


def _read_verdict(fd: int, limit: int) -> bytes:
    os.set_blocking(fd, False)
    try:
        return os.read(fd, limit)
    except BlockingIOError:
        return b""


@dataclass
class _Worker:
    """A harness process started ahead of time, blocked reading its request (it holds no limits yet and
    runs no candidate code until the request arrives)."""

    proc: subprocess.Popen[bytes]
    request_w: int
    verdict_r: int
    workdir: str
    stderr_path: str

    def alive(self) -> bool:
        """True while the harness process is running (blocked on its request)."""
        return self.proc.poll() is None

    def discard(self) -> None:
        """Kill its process group, reap it, close its pipes and delete its directory (idempotent)."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for name in ("request_w", "verdict_r"):
            fd = getattr(self, name)
            setattr(self, name, -1)
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        shutil.rmtree(self.workdir, ignore_errors=True)


def _spawn_worker() -> _Worker:
    """Start one harness in a fresh temporary directory, own session, scrubbed environment.

    Raises:
        OSError: the directory, the pipes or the process could not be created.
    """
    workdir = tempfile.mkdtemp(prefix="uep-sandbox-")
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": workdir, "TMPDIR": workdir}
    request_r, request_w = os.pipe()
    verdict_r, verdict_w = os.pipe()
    stderr_path = os.path.join(workdir, "stderr.log")
    try:
        with open(stderr_path, "wb") as stderr_file:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-c", _HARNESS, str(request_r), str(verdict_w)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr_file,
                cwd=workdir,
                env=env,
                pass_fds=(request_r, verdict_w),
                start_new_session=True,
            )
    except OSError:
        for fd in (request_w, verdict_r):
            os.close(fd)
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    finally:
        os.close(request_r)
        os.close(verdict_w)
    return _Worker(proc, request_w, verdict_r, workdir, stderr_path)


_POOL: WarmPool[_Worker] = WarmPool(_spawn_worker, SandboxSettings().sandbox_pool, "process-harness-spawner")
atexit.register(_POOL.close)


def run_program(source: str, limits: SandboxLimits = SandboxLimits()) -> SandboxResult:
    """Run the whole Python program ``source`` in one harness process and report how it ended.

    Blocking (up to ``limits.timeout_s`` plus start-up). Never raises for anything the program does; a local
    failure (temporary directory, pipes, spawning) is ``status="error"``.
    """
    try:
        return _run(source, limits)
    except OSError as exc:
        return SandboxResult("error", 0.0, None, "", f"sandbox_setup_failed: {exc}")


def _run(source: str, limits: SandboxLimits) -> SandboxResult:
    ready = secrets.token_hex(_TOKEN_HEX // 2).encode()
    passed = secrets.token_hex(_TOKEN_HEX // 2).encode()
    worker = _POOL.take()
    try:
        program = os.path.join(worker.workdir, "candidate.py")
        with open(program, "w", encoding="utf-8") as f:
            f.write(source)
        cpu_s, as_b, fsize_b, nofile, nproc = limits.rlimits()
        request = b"%s%s%d %d %d %d %d %s\n" % (ready, passed, cpu_s, as_b, fsize_b, nofile, nproc, program.encode())
        started = time.monotonic()
        try:
            os.write(worker.request_w, request)  # < 4 KiB: one atomic write into an empty pipe
        except OSError as exc:  # the idle harness died (e.g. killed from outside)
            return SandboxResult("error", 0.0, worker.proc.poll(), "", f"harness_unavailable: {exc}")
        os.close(worker.request_w)
        worker.request_w = -1
        exited = _wait_exited(worker.proc, limits.timeout_s)
        # the leader is not reaped yet, so its process group id cannot have been reused
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(worker.proc.pid, signal.SIGKILL)
        returncode = worker.proc.wait()
        duration = time.monotonic() - started
        verdict = _read_verdict(worker.verdict_r, 2 * _TOKEN_HEX + 1)
        return _classify(verdict, ready, passed, exited, returncode, duration, _tail(worker.stderr_path))
    finally:
        worker.discard()


def _classify(
    verdict: bytes, ready: bytes, passed: bytes, exited: bool, returncode: int, duration: float, stderr_tail: str
) -> SandboxResult:
    if not verdict.startswith(ready):
        reason = "harness_did_not_start" + ("" if exited else " (wall_clock)")
        return SandboxResult("error", duration, returncode, stderr_tail, reason)
    if not exited:
        return SandboxResult("timed_out", duration, returncode, stderr_tail, "wall_clock")
    if verdict == ready + passed:
        return SandboxResult("passed", duration, returncode, stderr_tail)
    if returncode == -signal.SIGXCPU:
        return SandboxResult("timed_out", duration, returncode, stderr_tail, "cpu_limit")
    if returncode < 0:
        try:
            reason = f"killed_by_{signal.Signals(-returncode).name}"
        except ValueError:
            reason = f"killed_by_signal_{-returncode}"
    elif len(verdict) > len(ready):
        reason = "verdict_pipe_tampered"
    else:
        reason = "exception_or_early_exit"
    return SandboxResult("failed", duration, returncode, stderr_tail, reason)
