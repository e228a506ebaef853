"""What a sandboxed run is given (:class:`CodeTask`, :class:`SandboxLimits`) and what it reports
(:class:`SandboxResult`), shared by the bwrap sandbox and the unsafe process fallback."""

from __future__ import annotations

import math
from dataclasses import dataclass

STDERR_TAIL = 2000
"""Characters of the sandbox's stderr kept in :attr:`SandboxResult.stderr_tail`."""


@dataclass(frozen=True)
class SandboxLimits:
    """Limits for one sandboxed run.

    Attributes:
        timeout_s: wall-clock limit in seconds (CPU limit is ``ceil(timeout_s) + 1`` s, hard one more).
        memory_bytes: address-space limit (``RLIMIT_AS``) of each process, bytes.
        file_size_bytes: largest file a process may write (``RLIMIT_FSIZE``), bytes.
        open_files: ``RLIMIT_NOFILE`` of the candidate process.
        processes: ``RLIMIT_NPROC`` (0 = no fork or threads). Binding in the bwrap sandbox (unprivileged
            uid); in the unsafe process fallback the kernel ignores it when the scorer runs as root.
    """

    timeout_s: float = 10.0
    memory_bytes: int = 1 << 30
    file_size_bytes: int = 1 << 20
    open_files: int = 64
    processes: int = 0

    def rlimits(self) -> list[int]:
        """``[cpu_s, as_bytes, fsize_bytes, nofile, nproc]`` as the harnesses read them."""
        return [math.ceil(self.timeout_s) + 1, self.memory_bytes, self.file_size_bytes, self.open_files, self.processes]


@dataclass(frozen=True)
class CodeTask:
    """A program split by trust: the candidate's code and the benchmark's test.

    Attributes:
        candidate: the model's program (for HumanEval: prompt + completion, or the prompt's preamble + a full
            solution), run as module ``candidate`` in the candidate process.
        entry_point: the function the test calls; ``None``: no test, the run passes iff ``candidate`` runs to
            the end without raising.
        prompt: the benchmark's prompt, run in the trusted runner for the imports and helper functions its
            test uses (if it does not compile on its own, only the part before ``def <entry_point>(``).
        test: the benchmark's test code; it must define ``check(candidate)``, which is called with a proxy of
            the candidate's entry point.
    """

    candidate: str
    entry_point: str | None = None
    prompt: str = ""
    test: str = ""

    def full_program(self) -> str:
        """The single program the unsafe process fallback runs: ``candidate + test + check(entry_point)``."""
        if not self.entry_point:
            return self.candidate
        return f"{self.candidate}\n{self.test}\ncheck({self.entry_point})\n"


@dataclass(frozen=True)
class SandboxResult:
    """Outcome of one sandboxed run.

    Attributes:
        status: ``"passed"`` (the test's ``check`` returned, or a test-less program ran to the end),
            ``"failed"`` (an exception, the candidate died or broke the call protocol, a limit other than CPU),
            ``"timed_out"`` (wall clock or CPU limit), ``"error"`` (the sandbox never started the run:
            infrastructure, not the program's fault) or ``"sandbox_unavailable"`` (isolation could not be set
            up on this machine and no unsafe mode was chosen; nothing ran).
        duration_s: wall-clock seconds from the request to the end of the run.
        returncode: exit status of the process that ended the run (the candidate's when it died, negative =
            killed by that signal), ``None`` if nothing ran.
        stderr_tail: last 2000 characters of the run's stderr (tracebacks of the test and of the candidate).
        reason: short machine-readable cause of a non-passing outcome, e.g. ``"wall_clock"``, ``"cpu_limit"``,
            ``"test_failed"``, ``"candidate_exited"``, ``"candidate_protocol_violation"``.
    """

    status: str
    duration_s: float
    returncode: int | None
    stderr_tail: str
    reason: str | None = None
