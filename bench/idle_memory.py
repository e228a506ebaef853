"""bench/idle_memory: memory (PSS) an idle local stack holds, per process, with its models built lazily vs eagerly.

Starts a private stack serving every embedded model (``--triton-models``, default all of them), lets it settle
(``--settle`` seconds, no evaluation), then reads the proportional set size (``Pss`` of ``/proc/<pid>/smaps_rollup``:
each page shared by n processes counted 1/n in each, so the sum over processes is the memory they hold together)
of each stack process with all its descendants — the broker, Triton with its Python backend stubs, the six
services. It does so twice in one run: with the model server as the stack starts it (``UEP_TRITON_LOAD=lazy``,
the default: each model built on its first request) and after restarting the model server with
``UEP_TRITON_LOAD=eager`` (every model built at start, as before lazy loading), and prints both tables and the
ratio of the totals.

Usage: ``python bench/idle_memory.py [--settle 20] [--port-base 20000] [--database uep_bench_idle] [--redis-db 14]
[--run-dir .run/bench-idle] [--triton-models smollm2,oracle,…]``
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy" / "local"))
from idle_cost import descendants, processes, stack_pids  # noqa: E402 - bench/ is the script's folder
from servers import PG_SERVER, REDIS_SERVER  # noqa: E402 - deploy/local is on the path from here

MIB = 1024.0


def pss_kib(pid: int) -> int:
    """``Pss`` of ``pid`` in KiB (``/proc/<pid>/smaps_rollup``), 0 when it is gone or unreadable."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def stack_pss(run_dir: Path) -> dict[str, float]:
    """PSS in MiB of each process of the stack in ``run_dir`` with its descendants."""
    procs = processes()
    return {name: sum(pss_kib(p) for p in descendants(root, procs)) / MIB for name, root in stack_pids(run_dir).items()}


def report(usage: dict[str, float], label: str) -> float:
    """Print the table of :func:`stack_pss`; returns the total in MiB."""
    print(f"\nidle PSS [{label}]: MiB, each process with its descendants")
    for name, mib in sorted(usage.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<10} {mib:8.1f}")
    total = sum(usage.values())
    print(f"  {'total':<10} {total:8.1f}")
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--settle", type=float, default=20.0, help="idle seconds before each reading")
    ap.add_argument("--port-base", type=int, default=20000, help="UEP_STACK_PORT_BASE of the bench's private stack")
    ap.add_argument("--database", default="uep_bench_idle", help="PostgreSQL database of the bench's stack")
    ap.add_argument("--redis-db", type=int, default=14, help="Redis database number of the bench's stack")
    ap.add_argument("--run-dir", default=str(ROOT / ".run" / "bench-idle"), help="run directory of the bench's stack")
    ap.add_argument(
        "--triton-models",
        default="smollm2,oracle,bench_echo,judge,judge_first,mmlu_topic,breast_cancer,e5_rank,e5_embed,vllm_echo,trtllm_echo",
        help="models the private stack's Triton serves",
    )
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the stack (finally) on kill too
    os.environ.update(
        {
            "UEP_STACK_PORT_BASE": str(args.port_base),
            "UEP_STACK_RUN_DIR": args.run_dir,
            "UEP_DATABASE_URL": f"{PG_SERVER}/{args.database}",
            "UEP_REDIS_URL": f"{REDIS_SERVER}/{args.redis_db}",
            "UEP_TRITON_MODELS": args.triton_models,
            "UEP_TRITON_LOAD": "lazy",
        }
    )
    import uep_stack
    from free_ports import stack_ports, wait_until_free

    cfg = uep_stack.config()
    uep_stack.down(cfg)
    wait_until_free(stack_ports(cfg))  # a stack stopped just before leaves TIME_WAIT sockets
    uep_stack.up(cfg)
    totals = {}
    try:
        time.sleep(args.settle)
        totals["lazy"] = report(stack_pss(cfg.run_dir), "lazy: no model used yet")
        uep_stack.stop(cfg, ["triton"])
        wait_until_free([cfg.triton_http, cfg.triton_grpc, cfg.triton_metrics])
        os.environ["UEP_TRITON_LOAD"] = "eager"
        uep_stack.spawn_triton(cfg)
        uep_stack.wait_triton(cfg)
        time.sleep(args.settle)
        totals["eager"] = report(stack_pss(cfg.run_dir), "eager: every model built at start")
    finally:
        uep_stack.down(cfg)
    print(
        f"\nidle stack PSS: lazy {totals['lazy']:.0f} MiB, eager {totals['eager']:.0f} MiB "
        f"(lazy/eager {totals['lazy'] / totals['eager']:.2f}, {totals['eager'] - totals['lazy']:.0f} MiB saved)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
