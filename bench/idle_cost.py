"""bench/idle_cost: CPU an idle local stack burns, per process, from /proc.

Starts a private stack (or, with ``--attach RUN_DIR``, measures one already running, e.g. ``.run/dev``), lets it
settle (``--settle`` seconds with no evaluation, 90 by default: consumers joined, first reconcile passes done,
the broker JVM's just-in-time compiler quiet again), then reads the
CPU time (``utime + stime`` of ``/proc/<pid>/stat``, in clock ticks) of each stack process and all its
descendants — the broker (Kafka's JVM), Triton (with its Python backend stubs), the six services, and the
checkout's PostgreSQL (the postmaster with its backends) and Redis — twice, ``--seconds`` apart (default 30), and
prints each one's share of one core over that window and the total. The stack's PIDs are the files
``<run dir>/pids/<name>.pid``, the servers' ``.run/servers/pids/<name>.pid``.

Target for the project: everything but the model server under 2 % of a core (Triton is listed but is the model
server, not uep's overhead; the total is printed with and without it).

``--variant NAME:K=V,K=V`` (repeatable) measures the services in each environment in turn, restarting the six
services before each (e.g. ``--variant before:UEP_KAFKA_FETCH_MAX_WAIT_MS=100 --variant after:``), and
prints one table per variant.

Usage: ``python bench/idle_cost.py [--seconds 30] [--settle 20] [--attach RUN_DIR] [--variant NAME:K=V,…]
[--port-base 20000] [--database uep_bench_idle] [--redis-db 14] [--run-dir .run/bench-idle]
[--triton-models bench_echo]``
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy" / "local"))
from servers import PG_SERVER, REDIS_SERVER  # noqa: E402 - deploy/local is on the path from here

TICKS = os.sysconf("SC_CLK_TCK")
MODEL_SERVER = "triton"


def _stat(pid: int) -> tuple[int, int, int] | None:
    """``(ppid, utime + stime, cutime + cstime)`` of ``pid`` in clock ticks (the last: the children it has waited
    for), or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # after "pid (comm) ": state is field 3 of proc(5)
    return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def processes() -> dict[int, tuple[int, int, int]]:
    """:func:`_stat` of every live process, by PID."""
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None:
                out[int(entry)] = st
    return out


def descendants(root: int, procs: dict[int, tuple[int, int, int]]) -> list[int]:
    """``root`` and every live process below it in ``procs`` (:func:`processes`; by their parent field)."""
    children: dict[int, list[int]] = defaultdict(list)
    for pid, (ppid, _own, _reaped) in procs.items():
        children[ppid].append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def _switches(pid: int) -> int:
    """Voluntary context switches of every thread of ``pid`` (each is the thread going to sleep: a wake-up)."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        try:
            for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total


def tree_ticks(roots: dict[str, int]) -> dict[str, tuple[int, int]]:
    """``(CPU ticks, voluntary context switches)`` of each root PID plus all its live descendants (their own
    ``utime + stime``)."""
    procs = processes()
    out: dict[str, tuple[int, int]] = {}
    for name, root in roots.items():
        tree = descendants(root, procs)
        out[name] = (sum(procs[pid][1] for pid in tree if pid in procs), sum(_switches(pid) for pid in tree))
    return out


def stack_pids(run_dir: Path) -> dict[str, int]:
    """``{name: pid}`` from ``<run_dir>/pids/*.pid`` (processes alive only)."""
    out = {}
    for f in sorted((run_dir / "pids").glob("*.pid")):
        pid = int(f.read_text().strip())
        if _stat(pid) is not None:
            out[f.stem] = pid
    return out


def measure(run_dir: Path, seconds: float) -> dict[str, tuple[float, float]]:
    """``(percent of one core, wake-ups per second)`` of each stack process and of the checkout's PostgreSQL and
    Redis (each with its descendants) over ``seconds``; wake-ups are voluntary context switches, a count that
    machine load does not inflate as it does tick-sampled CPU time."""
    import servers

    pids = {**stack_pids(run_dir), **stack_pids(servers.config().run_dir)}
    if not pids:
        raise SystemExit(f"no live process under {run_dir / 'pids'}")
    t0, before = time.monotonic(), tree_ticks(pids)
    time.sleep(seconds)
    t1, after = time.monotonic(), tree_ticks(pids)
    dt = t1 - t0
    return {
        name: (100.0 * (after[name][0] - before[name][0]) / TICKS / dt, (after[name][1] - before[name][1]) / dt) for name in pids
    }


def wait_quiet(
    run_dir: Path, below_pct: float = 10.0, window_s: float = 1.0, timeout_s: float = 120.0
) -> tuple[float, str | None]:
    """Wait until the stack of ``run_dir`` (every process with its descendants, the model server included) uses
    less than ``below_pct`` percent of one core in total over a ``window_s`` window, or ``timeout_s`` passed.
    Returns the seconds waited and the process that used the most CPU meanwhile (None when the stack was quiet at
    once). Benches call it before each timed run, so work left by the previous one (an evaluation's report and
    PDF rendered after it completed, a compaction round) does not weigh on the next."""
    t0 = time.monotonic()
    pids = stack_pids(run_dir)
    first = before = tree_ticks(pids)
    while True:
        time.sleep(window_s)
        after = tree_ticks(pids)
        busy = sum(after[n][0] - before[n][0] for n in pids) / TICKS / window_s * 100.0
        if busy < below_pct or time.monotonic() - t0 >= timeout_s:
            used = {n: after[n][0] - first[n][0] for n in pids}
            waited = time.monotonic() - t0
            return waited, (max(used, key=used.__getitem__) if waited > 1.5 * window_s else None)
        before = after


def report(usage: dict[str, tuple[float, float]], seconds: float, name: str = "") -> None:
    """Print the table of :func:`measure`."""
    label = f" [{name}]" if name else ""
    print(f"\nidle CPU{label} over {seconds:.0f} s: % of one core (utime + stime) and wake-ups/s (voluntary context")
    print("switches), each process with its descendants")
    for proc, (pct, wakes) in sorted(usage.items(), key=lambda kv: -kv[1][0]):
        print(f"  {proc:<10} {pct:6.2f} %  {wakes:7.0f}/s")
    ours = [v for k, v in usage.items() if k != MODEL_SERVER]
    total = (sum(p for p, _w in usage.values()), sum(w for _p, w in usage.values()))
    print(f"  {'total':<10} {total[0]:6.2f} %  {total[1]:7.0f}/s")
    print(
        f"  {'uep+servers':<10} {sum(p for p, _w in ours):6.2f} %  {sum(w for _p, w in ours):7.0f}/s"
        "   (without the model server; target < 2 %)"
    )


def main() -> int:
    from free_ports import add_stack_arguments

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="measuring window")
    ap.add_argument(
        "--settle",
        type=float,
        default=90.0,
        help="idle seconds before the window (own stack only): the broker's JVM compiles hot code for the first minute",
    )
    ap.add_argument("--attach", type=Path, help="measure the stack of this run directory instead of starting one")
    add_stack_arguments(ap, "uep_bench_idle", str(ROOT / ".run" / "bench-idle"))
    ap.add_argument("--triton-models", default="bench_echo", help="models the private stack's Triton loads")
    ap.add_argument("--variant", action="append", default=[], help="NAME:K=V,K=V — services' environment to measure")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the stack (finally) on kill too
    if args.attach:
        report(measure(args.attach.resolve(), args.seconds), args.seconds)
        return 0
    os.environ.update(
        {
            "UEP_STACK_PORT_BASE": str(args.port_base),
            "UEP_STACK_RUN_DIR": args.run_dir,
            "UEP_DATABASE_URL": f"{PG_SERVER}/{args.database}",
            "UEP_REDIS_URL": f"{REDIS_SERVER}/{args.redis_db}",
            "UEP_TRITON_MODELS": args.triton_models,
        }
    )
    import uep_stack
    from free_ports import stack_ports, wait_until_free

    variants = [_variant(v) for v in args.variant] or [("", {})]
    cfg = uep_stack.config()
    uep_stack.down(cfg)
    wait_until_free(stack_ports(cfg))  # a stack stopped just before leaves TIME_WAIT sockets
    uep_stack.up(cfg)
    results = []
    try:
        for i, (name, env) in enumerate(variants):
            if env or i > 0:  # `up` started the services with the stack's own environment
                uep_stack.stop(cfg, uep_stack.SERVICES)
                uep_stack.start_services(dataclasses.replace(cfg, extra_env={**cfg.extra_env, **env}))
            time.sleep(args.settle)
            results.append((name, measure(cfg.run_dir, args.seconds)))
            report(results[-1][1], args.seconds, name)
    finally:
        uep_stack.down(cfg)
    for name, usage in results:
        report(usage, args.seconds, name)
    return 0


def _variant(spec: str) -> tuple[str, dict[str, str]]:
    name, _, pairs = spec.partition(":")
    env = {}
    for pair in filter(None, pairs.split(",")):
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--variant {spec!r}: {pair!r} is not K=V")
        env[key] = value
    return name, env


if __name__ == "__main__":
    sys.exit(main())
