"""Running untrusted code for code benchmarks: a bubblewrap sandbox with an unforgeable verdict.

Threat model. The *model output* (the candidate) is hostile: it may try to escape, read secrets, harm the
host, outlive its run or forge a pass. The *benchmark's test and prompt* were written by whoever uploaded the
benchmark: trusted to decide their own benchmark's verdict (an uploader can always write a test that passes
everything) but hostile towards the host. So both run inside one bubblewrap sandbox
(:mod:`~uep_common.sandbox.bwrap`: unprivileged uid that is not host root, no capabilities,
``no_new_privs``, own user/PID/mount/network/IPC/UTS namespaces, read-only root, a small private tmpfs, empty
environment, seccomp filter from :mod:`~uep_common.sandbox.seccomp`, rlimits, the whole tree killed at the
verdict or the time limit), and inside it in two processes (:mod:`~uep_common.sandbox.runner`): the trusted
runner T runs the prompt and the test and alone holds the verdict pipe; the candidate process C runs the
model's code and is reached only through a proxy that exchanges bounded plain values
(:mod:`~uep_common.sandbox.codec`). C can return values, raise, die or run out of time; it cannot reach T's
memory (T is non-dumpable) or the verdict pipe (closed in C before any candidate code runs, and the tokens
reach T only after C was forked).

Not covered: kernel vulnerabilities reachable through the allowed syscalls; CPU and memory the sandbox uses
within its limits (1 GiB address space per process, ``timeout_s`` CPU, 16 MiB tmpfs); an uploader's test that
passes wrong answers of its own benchmark.

Entry points: :func:`run_task` (a :class:`CodeTask` split into candidate and test), :func:`run_python` (a
test-less program), :func:`configure` / :func:`status` (start-up probe), modes in
:mod:`~uep_common.sandbox.isolation`.
"""

from .isolation import MODES, SandboxStatus, configure, run_python, run_task, status
from .task import CodeTask, SandboxLimits, SandboxResult

__all__ = [
    "MODES",
    "CodeTask",
    "SandboxLimits",
    "SandboxResult",
    "SandboxStatus",
    "configure",
    "run_python",
    "run_task",
    "status",
]
