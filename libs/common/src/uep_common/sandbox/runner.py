"""The two processes inside one sandbox: the trusted runner T and the candidate process C.

This file runs *inside* the sandbox as ``python -I -c <codec source + this source> REQUEST_FD VERDICT_FD``
(the ``uep_common`` package is not mounted there, so it uses the standard library only and gets the codec's
functions by having :mod:`uep_common.sandbox.codec`'s source prepended).

T, started ahead of time (pooled):

1. marks itself non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``: a process of the same uid can then neither
   ptrace it nor open ``/proc/T/mem``, ``/proc/T/fd`` or ``/proc/T/environ``), closes every fd but stdio and
   its two protocol pipes, ignores every catchable signal (so C can stop or kill T, which only fails the run,
   but cannot interrupt it into a different path);
2. forks C *before* any request exists, so C's memory never holds the verdict tokens; C closes every fd
   but stdio and its two call pipes (the request and verdict pipes first of all) and blocks;
3. reads the request (tokens, limits, candidate source, prompt, test, entry point) from the supervisor,
   sends C its program and limits, sets its own limits, writes the READY token on the verdict pipe;
4. waits for C to report that its program loaded, runs the prompt (for the helper functions tests use) and
   the test in its own namespace with the entry-point name bound to a proxy, then ``check(proxy)``;
5. writes the PASS token only if all of that returned; otherwise one line ``F <reason> <returncode>\\n``.

C: sets its rlimits (``RLIMIT_NPROC`` 0: no fork, no threads), removes process-control functions (an
accident guard, not the boundary), ``exec``s the candidate program with ``__name__ = "candidate"``, reports
``("ready",)`` or ``("raised", type, message)``, then serves calls ``("c", args, kwargs)`` of the entry point
with ``("r", value)`` or ``("x", exception type name, message)``. Frames are a 4-byte big-endian length and a
codec message. Whatever C does - frames, ``gc``, ``ctypes``, ``/proc/self/mem`` - it sees only its own
process; it can return values, raise, die or run out of time, and T turns anything but a well-formed reply
into a failure.
"""

import builtins
import ctypes
import json  # already loaded inside the sandbox: the prepended codec imports it
import os
import resource
import signal
import sys

# Not ``typing.TYPE_CHECKING``: importing ``typing`` would cost every sandbox start ~35 ms, so the annotations
# naming its types are strings that only the type checker reads.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from importlib.machinery import ModuleSpec
    from types import CodeType, ModuleType
    from typing import Any, NoReturn

try:
    from .codec import CodecError, decode, encode
except ImportError:  # inside the sandbox the codec's source is prepended to this one
    pass

_PR_SET_DUMPABLE = 4
_MAX_FRAME = 16 << 20
_GUARDED = (
    "kill",
    "killpg",
    "system",
    "fork",
    "forkpty",
    "putenv",
    "unsetenv",
    "remove",
    "removedirs",
    "rmdir",
    "unlink",
    "rename",
    "renames",
    "replace",
    "truncate",
    "chmod",
    "fchmod",
    "lchmod",
    "chown",
    "fchown",
    "lchown",
    "chroot",
    "setuid",
    "setgid",
    "setsid",
    "setpgid",
    "fchdir",
    "popen",
    "posix_spawn",
    "posix_spawnp",
    "execv",
    "execve",
    "execl",
    "execle",
    "execlp",
    "execlpe",
    "execvp",
    "execvpe",
    "spawnl",
    "spawnle",
    "spawnlp",
    "spawnlpe",
    "spawnv",
    "spawnve",
    "spawnvp",
    "spawnvpe",
)


class CandidateError(Exception):
    """An exception raised in the candidate process whose type is not a builtin exception."""


class _DiedError(Exception):
    """The candidate process closed its reply pipe (it exited or was killed)."""


def _close_fds_except(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _read_exact(fd: int, n: int) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise _DiedError()
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _send(fd: int, data: bytes) -> None:
    data = len(data).to_bytes(4, "big") + data
    while data:
        data = data[os.write(fd, data) :]


def _recv(fd: int) -> "Any":
    size = int.from_bytes(_read_exact(fd, 4), "big")
    if size > _MAX_FRAME:
        raise CodecError(f"frame of {size} bytes")
    return decode(_read_exact(fd, size))


def _set_limits(cpu_s: int, as_b: int, fsize_b: int, nofile: int, nproc: int) -> None:
    for res, soft, hard in (
        (resource.RLIMIT_CPU, cpu_s, cpu_s + 1),
        (resource.RLIMIT_AS, as_b, as_b),
        (resource.RLIMIT_FSIZE, fsize_b, fsize_b),
        (resource.RLIMIT_NOFILE, nofile, nofile),
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_NPROC, nproc, nproc),
    ):
        cur_hard = resource.getrlimit(res)[1]
        if cur_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, cur_hard), min(hard, cur_hard)
        resource.setrlimit(res, (soft, hard))


def _print_tb() -> None:
    try:
        import traceback  # only on failure: its imports cost a few ms of every start otherwise

        traceback.print_exc()
        sys.stderr.flush()
    except BaseException:  # stderr full (RLIMIT_FSIZE) or closed: diagnostics only
        pass


def _describe(exc: BaseException) -> tuple[str, str]:
    try:
        return type(exc).__name__, str(exc)[:1000]
    except BaseException:
        return "Exception", "<unprintable exception>"


def _patch_shutil(module: "Any") -> None:
    module.rmtree = module.move = module.chown = None


def _patch_subprocess(module: "Any") -> None:
    module.Popen = None


_PATCHES: "dict[str, Callable[[ModuleType], None]]" = {"shutil": _patch_shutil, "subprocess": _patch_subprocess}


class _GuardImports:
    """Meta-path finder that patches ``shutil``/``subprocess`` when the candidate imports them (importing them
    up front would cost every run ~10 ms)."""

    @staticmethod
    def find_spec(name: str, path: "Any" = None, target: "Any" = None) -> "ModuleSpec | None":
        patch = _PATCHES.get(name)
        if patch is None:
            return None
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None:
            return spec
        loader: Any = spec.loader  # any importlib Loader: its exec_module is wrapped below
        exec_module = loader.exec_module

        def exec_and_patch(module: "ModuleType") -> None:
            exec_module(module)
            patch(module)

        loader.exec_module = exec_and_patch
        return spec


def _guard() -> None:
    import posix

    for mod in (os, posix):
        for name in _GUARDED:
            if hasattr(mod, name):
                setattr(mod, name, None)
    for name, patch in _PATCHES.items():
        if name in sys.modules:
            patch(sys.modules[name])
    sys.meta_path.insert(0, _GuardImports)
    setattr(resource, "setrlimit", None)  # noqa: B010 - mypy rejects assigning None to a function
    setattr(resource, "prlimit", None)  # noqa: B010


def _candidate(call_r: int, reply_w: int) -> "NoReturn":
    """C: load the program, then serve calls of the entry point until T closes the call pipe."""
    exit_, write_tb = os._exit, _print_tb
    for sig in range(1, signal.NSIG):
        try:
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    try:
        tag, source, entry_point, limits = _recv(call_r)
        assert tag == "p"
    except BaseException:
        exit_(3)
    _set_limits(*limits)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _guard()
    namespace: dict[str, object] = {"__name__": "candidate", "__builtins__": builtins}
    try:
        exec(compile(source, "candidate.py", "exec"), namespace)
    except BaseException as exc:
        write_tb()
        _send(reply_w, encode(("raised",) + _describe(exc)))
        exit_(1)
    _send(reply_w, encode(("ready",)))
    while True:
        try:
            tag, args, kwargs = _recv(call_r)
        except BaseException:
            exit_(0)
        try:
            fn: Any = namespace.get(entry_point)
            if fn is None:
                raise NameError(f"name {entry_point!r} is not defined")
            reply = encode(("r", fn(*args, **kwargs)))
        except BaseException as exc:
            write_tb()
            reply = encode(("x",) + _describe(exc))
        _send(reply_w, reply)


def _exception(name: object, text: object) -> BaseException:
    cls = getattr(builtins, name, None) if isinstance(name, str) else None
    if isinstance(cls, type) and issubclass(cls, BaseException):
        try:
            return cls(text)
        except BaseException:
            pass
    return CandidateError(f"{name}: {text}")


class _Runner:
    """T's side: the verdict pipe, the call pipes to C and the proxy the test calls."""

    def __init__(self, verdict_fd: int, call_w: int, reply_r: int, child: int) -> None:
        self.verdict_fd, self.call_w, self.reply_r, self.child = verdict_fd, call_w, reply_r, child

    def fail(self, reason: str, returncode: int = 1) -> "NoReturn":
        try:
            sys.stderr.flush()
        except BaseException:
            pass
        os.write(self.verdict_fd, b"F %s %d\n" % (reason.encode(), returncode))
        os._exit(1)

    def candidate_gone(self) -> "NoReturn":
        """C stopped answering: report how it ended (its exit status, or the signal that killed it)."""
        try:
            os.close(self.call_w)
        except OSError:
            pass
        _, status = os.waitpid(self.child, 0)
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            self.fail("cpu_limit" if sig == signal.SIGXCPU else "candidate_killed", -sig)
        self.fail("candidate_exited", os.WEXITSTATUS(status))

    def receive(self) -> "Any":
        try:
            return _recv(self.reply_r)
        except _DiedError:
            self.candidate_gone()
        except (CodecError, OSError):
            self.fail("candidate_protocol_violation")

    def proxy(self, entry_point: str) -> "Callable[..., Any]":
        runner = self

        def candidate(*args: object, **kwargs: object) -> "Any":
            try:
                data = encode(("c", args, kwargs))
            except CodecError as exc:
                raise TypeError(f"argument cannot be sent to the candidate: {exc}") from None
            try:
                _send(runner.call_w, data)
            except OSError:
                runner.candidate_gone()
            reply = runner.receive()
            if type(reply) is tuple and len(reply) == 2 and reply[0] == "r":
                return reply[1]
            if type(reply) is tuple and len(reply) == 3 and reply[0] == "x":
                raise _exception(reply[1], reply[2])
            runner.fail("candidate_protocol_violation")

        candidate.__name__ = candidate.__qualname__ = entry_point
        return candidate


def _prompt_code(prompt: str, entry_point: str) -> "CodeType | None":
    """The prompt compiled on its own (for its imports and helper functions), else the part before the entry
    point's ``def``, else nothing."""
    import re

    parts = [prompt]
    if entry_point:
        match = re.search(rf"(?m)^def\s+{re.escape(entry_point)}\s*\(", prompt)
        if match:
            parts.append(prompt[: match.start()])
    for part in parts:
        try:
            return compile(part, "prompt.py", "exec")
        except (SyntaxError, ValueError):
            continue
    return None


def main() -> "NoReturn":
    """T's entry point: ``argv[1:3]`` are the request and verdict fds (module docstring for the steps)."""
    request_fd, verdict_fd = int(sys.argv[1]), int(sys.argv[2])
    del sys.argv[1:]
    os.environ.pop("PWD", None)  # bwrap --chdir adds it; the environment is exactly the five fixed variables
    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        os._exit(70)
    _close_fds_except({0, 1, 2, request_fd, verdict_fd})
    for sig in range(1, signal.NSIG):
        if sig not in (signal.SIGCHLD, signal.SIGKILL, signal.SIGSTOP, signal.SIGXCPU):
            try:
                signal.signal(sig, signal.SIG_IGN)
            except (OSError, ValueError):
                pass
    call_r, call_w = os.pipe()
    reply_r, reply_w = os.pipe()
    child = os.fork()
    if child == 0:
        for fd in (request_fd, verdict_fd, call_w, reply_r):
            os.close(fd)
        _close_fds_except({0, 1, 2, call_r, reply_w})
        try:
            _candidate(call_r, reply_w)
        finally:
            os._exit(1)
    os.close(call_r)
    os.close(reply_w)

    chunks: list[bytes] = []
    while True:
        chunk = os.read(request_fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(request_fd)
    request = json.loads(b"".join(chunks))  # the codec's import of json
    ready, passed = request["ready"].encode(), request["pass"].encode()
    entry_point, limits = request["entry_point"], request["limits"]
    runner = _Runner(verdict_fd, call_w, reply_r, child)
    try:
        _send(call_w, encode(("p", request["candidate"], entry_point, tuple(limits))))
    except OSError:
        runner.candidate_gone()
    cpu_s, as_b, fsize_b = limits[:3]
    _set_limits(cpu_s, as_b, fsize_b, 64, 0)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    os.write(verdict_fd, ready)

    loaded = runner.receive()
    if loaded != ("ready",):
        if type(loaded) is tuple and len(loaded) == 3 and loaded[0] == "raised":
            runner.fail("candidate_raised")
        runner.fail("candidate_protocol_violation")
    if entry_point:
        namespace: dict[str, object] = {"__name__": "test", "__builtins__": builtins}
        try:
            code = _prompt_code(request["prompt"], entry_point)
            if code is not None:
                exec(code, namespace)
            namespace[entry_point] = runner.proxy(entry_point)
            exec(compile(request["test"] + "\n", "test.py", "exec"), namespace)
            exec(compile(f"check({entry_point})\n", "check.py", "exec"), namespace)
        except BaseException:
            _print_tb()
            runner.fail("test_failed")
    os.write(verdict_fd, passed)
    os._exit(0)


if __name__ == "__main__":
    main()
