"""bench/llm_interference: how much the embedded LLM slows down when other processes take a little CPU.

The pipeline runs six services and a broker beside the model on the same cores; ``bench/pipeline_overhead``
measures that the LLM's calls take longer in a pipeline run than in the direct run beside it, with its slots
busy nearly all the time. This bench isolates the cause: it calls the LLM in-process (the model server's own
``uep_model_server.llm.SmolLM2``, llama.cpp through xllamacpp, the first ``--n`` MMLU prompts rendered as
inference renders them, ``max_tokens`` 32, greedy), one request after another, while a synthetic load takes a
set share of one core, and prints each load's throughput as a ratio to the same configuration without load.

The load is ``--procs`` processes that each spin for a share of every ``--period-ms`` window and sleep for the
rest, together ``LOAD`` percent of one core: short bursts from several processes, as the services' event loops
and the broker wake for each item. A configuration (``--configs THREADS:POLL,…``) is llama.cpp's ``n_threads``
and ``poll`` (how hard a thread busy-waits for the others at a barrier, 0–100; ``UEP_LLM_THREADS`` and
``UEP_LLM_POLL`` of the model server). Loads are interleaved in ``--rounds`` rounds (each round in a rotated order, so the machine's drift weighs on all alike)
after a warm-up (the model speeds up over its first hundred or so calls); the median per cell is printed.

What it shows on a 2-core machine: llama.cpp's threads meet at a barrier after each layer's work, so a burst that
takes one core away stalls every thread of the model, not only the one it displaced; the slowdown is a multiple
of the load's share. That bounds what the whole pipeline can reach on the same cores: the services' CPU per
item times the item rate is the load the model runs under.

Usage: ``python bench/llm_interference.py [--configs 2:50,2:0,1:50] [--loads 0,10,20,40] [--rounds 3] [--n 30] [--procs 4]
[--period-ms 20]``
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import time
from collections import defaultdict
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from uep_model_server.io import GenerationRequest
    from uep_model_server.llm import SmolLM2

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))


def spin(share: float, period_s: float, stop: Event) -> None:
    """Busy-loop ``share`` (0..1) of every ``period_s`` window and sleep the rest, until ``stop`` is set."""
    busy = share * period_s
    while not stop.is_set():
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < busy:
            pass
        time.sleep(max(0.0, period_s - (time.perf_counter() - t0)))


def run(model: SmolLM2, requests: list[GenerationRequest], load_pct: float, procs: int, period_s: float) -> float:
    """Items/s of ``requests`` through ``model`` one at a time, under ``load_pct`` percent of one core of load
    spread over ``procs`` spinning processes (none at 0)."""
    stop = mp.Event()
    workers = [
        mp.Process(target=spin, args=(load_pct / 100.0 / procs, period_s, stop), daemon=True)
        for _ in range(procs if load_pct > 0 else 0)
    ]
    for w in workers:
        w.start()
    try:
        t0 = time.perf_counter()
        for r in requests:
            model.generate_one(r)
        elapsed = time.perf_counter() - t0
    finally:
        stop.set()
        for w in workers:
            w.join()
    return len(requests) / elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", default="2:50,2:0,1:50", help="THREADS:POLL,… llama.cpp configurations to compare")
    ap.add_argument("--loads", default="0,10,20,40", help="background loads in percent of one core (0 is the reference)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of every load per thread count")
    ap.add_argument("--n", type=int, default=30, help="MMLU prompts per run")
    ap.add_argument("--procs", type=int, default=4, help="processes the load is spread over")
    ap.add_argument("--period-ms", type=float, default=20.0, help="each load process's busy/sleep period")
    ap.add_argument("--warm-up", type=int, default=3, help="unmeasured runs of the prompts before the rounds")
    args = ap.parse_args()
    loads = [float(x) for x in args.loads.split(",")]
    if 0.0 not in loads:
        loads.insert(0, 0.0)

    from pipeline_overhead import MODELS, _requests
    from uep_model_server.io import GenerationRequest
    from uep_model_server.llm import LlmSettings, SmolLM2

    prompts = _requests(args.n, MODELS["llm"])
    requests = [GenerationRequest(p.prompt, p.max_tokens, p.temperature, tuple(p.stop)) for p in prompts]
    table: dict[str, dict[float, list[float]]] = {}
    for config in args.configs.split(","):
        threads, poll = (int(x) for x in config.split(":"))
        model = SmolLM2(LlmSettings(n_threads=threads, poll=poll, verbosity=0))
        for _ in range(args.warm_up):
            run(model, requests, 0.0, args.procs, args.period_ms / 1000)
        cells: dict[float, list[float]] = defaultdict(list)
        for r in range(args.rounds):
            for load in loads[r % len(loads) :] + loads[: r % len(loads)]:
                cells[load].append(run(model, requests, load, args.procs, args.period_ms / 1000))
                print(f"  threads:poll {config} round {r + 1} load {load:4.0f} %: {cells[load][-1]:6.2f} items/s", flush=True)
        table[config] = cells
        del model

    print(
        f"\nSmolLM2-135M-Instruct in-process, {args.n} MMLU prompts one at a time, {args.rounds} rounds; load: "
        f"{args.procs} processes spinning in {args.period_ms:.0f} ms periods"
    )
    print(f"{'threads:poll':>12} {'load % of a core':>17} {'items/s (median)':>17} {'ratio to no load':>17} {'spread':>14}")
    for config, cells in table.items():
        base = statistics.median(cells[0.0])
        for load in loads:
            ratios = [v / base for v in cells[load]]
            print(
                f"{config:>12} {load:>17.0f} {statistics.median(cells[load]):>17.2f} "
                f"{statistics.median(cells[load]) / base:>17.3f} {min(ratios):>6.3f}–{max(ratios):.3f}"
            )
    print("a ratio below 1 - load/100 means the load cost the model more than the CPU it took")
    return 0


if __name__ == "__main__":
    sys.exit(main())
