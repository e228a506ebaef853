"""The code sandbox as the metrics use it; the implementation and its threat model are in
:mod:`uep_common.sandbox` (bubblewrap isolation, split runner/candidate processes, unsafe fallback)."""

from uep_common.sandbox import (
    CodeTask,
    SandboxLimits,
    SandboxResult,
    SandboxStatus,
    configure,
    run_python,
    run_task,
    status,
)

__all__ = [
    "CodeTask",
    "SandboxLimits",
    "SandboxResult",
    "SandboxStatus",
    "configure",
    "run_python",
    "run_task",
    "status",
]
