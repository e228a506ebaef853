"""CPU affinity for benches: the model server on cores of its own, the rest of the stack and the bench on the others.

In production the model server (Triton) runs on nodes of its own, and the services never take CPU from the model.
On one development machine both share the cores, and a CPU-bound model loses more than the CPU the services take
(``bench/llm_interference``). Pinning emulates the production split on one machine: Linux affinity
(``sched_setaffinity``) of every thread of every process of a stack, and of the calling process.
"""

from __future__ import annotations

import os
from pathlib import Path

from idle_cost import MODEL_SERVER, descendants, processes, stack_pids


def pin_tree(root: int, cpus: set[int]) -> int:
    """Set the affinity of every thread of ``root`` and its descendants to ``cpus``; returns the threads set
    (threads that exit meanwhile are skipped; threads started later inherit their creator's affinity)."""
    n = 0
    for pid in descendants(root, processes()):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                os.sched_setaffinity(int(tid), cpus)
                n += 1
            except OSError:
                continue
    return n


def split_cpus() -> tuple[set[int], set[int]]:
    """``(model CPUs, stack CPUs)``: the last usable CPU for the model server, the others for the rest.

    Raises:
        SystemExit: fewer than two usable CPUs.
    """
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("pinning the model server needs at least two CPUs")
    return {cpus[-1]}, set(cpus[:-1])


def pin_stack(run_dir: Path, model_cpus: set[int], stack_cpus: set[int]) -> dict[str, int]:
    """Pin the model server of the stack of ``run_dir`` (with its backends) to ``model_cpus``, every other stack
    process and the calling process to ``stack_cpus``; returns the threads pinned per process."""
    out = {name: pin_tree(pid, model_cpus if name == MODEL_SERVER else stack_cpus) for name, pid in stack_pids(run_dir).items()}
    os.sched_setaffinity(0, stack_cpus)
    return out
