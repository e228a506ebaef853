"""bench/pipeline_overhead: what a user gets from the whole uep pipeline vs. calling Triton directly.

For each case (a model and its number of slots, the registry capacity ``models.max_in_flight``), the same N
requests — the first N MMLU prompts, rendered with the benchmark's template, with its ``max_tokens`` (32) and
the model's temperature — go to the same Triton model at the same concurrency:

- direct: as many asyncio workers as the model has slots call Triton with tritonclient's gRPC client;
- pipeline: one evaluation (``POST /v1/evaluations``, nothing but benchmark, model, limit and first-N
  sampling) through gateway → scheduler → inference → scorer → reporter, timed from the POST until it is
  completed (every item stored in PostgreSQL).

Everything runs at its defaults: no tuned inference concurrency, lease factor or ``max_parallel``; only the
model's slots are set (the registry capacity, and the model server's ``UEP_LLM_N_PARALLEL=4``, so the LLM has
4 llama.cpp slots of which a 1-slot case uses one). Models: ``echo`` (``uep-bench-echo``: a fixed service
time per batch, default 20 ms, like a small model on an accelerator) and ``llm`` (``smollm2-135m-instruct``,
the embedded LLM on CPU). Cases (``--cases``, default ``echo:1,llm:1,echo:4,llm:4``: inference is restarted when a model's
capacity changes, since a replica sizes a model's semaphore at its first call) run ``--rounds`` rounds
(default 3) of direct and pipeline, interleaved A,B then B,A, so drift of a shared machine weighs on both
alike, each run started once the whole stack uses under 10 % of a core (the report of the previous pipeline
run is rendered after its evaluation completed: left running, it slowed whichever run came next); per case the bench prints each round's throughput, the median of the per-round ratios
pipeline/direct and their spread (min–max). Target for the project: ratio ≥ 0.95 in every case.

Both sides share this machine (2 cores in CI): the pipeline's six services compete with the model for CPU,
which the direct run does not have to — on a CPU-bound model (``llm``), and on the echo model's Python
server, that contention is part of the ratio. So the bench also prints how busy the model's slots were during
each pipeline run (the items' call times, ``latency_ms``, over slots × run time): below 1 the model idled
waiting for work; a ratio below the busy share means each call itself took longer than in the direct run.

``--pin-model``: the model server on a core of its own, as on a production model node (``bench/cpu_pinning``:
the last CPU for Triton and its backends, the others for the broker, the six services and the bench's client), the
LLM with one llama.cpp thread per core it has (``UEP_LLM_THREADS``). Direct and pipeline runs then call the same
pinned model, so the ratio is the pipeline's own cost, without the CPU the services would take from a model on
the same cores (``bench/llm_interference`` measures that).

``--compare-instrumentation``: the cost of observability. The pipeline run (echo, the first case's slots) is
repeated with the services restarted in two modes, interleaved (off, on, on, off, off, on, … for
``--rounds`` rounds): *on* — Prometheus metrics recorded and served (``UEP_METRICS_ENABLED=true``) and
every span exported (``UEP_OTEL_EXPORTER=console``, one JSON line per span to the run directory's traces/);
*off* — no metrics (every hook a no-op) and no span export (``none``). Spans are still made in both modes: the
trace context they carry across Kafka is what puts one trace id on an evaluation's log lines. Prints each
mode's throughput per round and the ratio of the medians on/off (target ≥ 0.97).

Usage: ``python bench/pipeline_overhead.py [--cases echo:1,llm:1,echo:4,llm:4] [--rounds 3] [--n-echo 1000]
[--n-llm 30] [--service-ms 20] [--pin-model] [--compare-instrumentation] [--port-base 20000] [--database uep_bench]
[--redis-db 14] [--run-dir .run/bench]``
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy" / "local"))
from servers import PG_SERVER, REDIS_SERVER  # noqa: E402 - deploy/local is on the path from here


@dataclasses.dataclass(frozen=True)
class BenchModel:
    """A model of the bench: registry name, Triton name, and the model server's name in ``UEP_TRITON_MODELS``."""

    name: str
    triton_name: str
    server_name: str


MODELS = {
    "echo": BenchModel("uep-bench-echo", "uep_bench_echo", "bench_echo"),
    "llm": BenchModel("smollm2-135m-instruct", "smollm2_135m_instruct", "smollm2"),
}
LLM_SLOTS = 4
"""llama.cpp slots the model server opens for the LLM (``UEP_LLM_N_PARALLEL``): the most any case may use."""


@dataclasses.dataclass(frozen=True)
class Request:
    """One generation request as inference sends it (contract ``uep``)."""

    prompt: str
    max_tokens: int
    temperature: float
    stop: list[str]


async def direct(grpc_url: str, model: BenchModel, requests: list[Request], concurrency: int) -> tuple[float, float]:
    """``(seconds to answer every request with concurrency workers calling Triton directly, mean completion
    tokens)``."""
    import numpy as np
    import tritonclient.grpc.aio as g

    client = g.InferenceServerClient(grpc_url)
    tokens: list[int] = []
    queue: asyncio.Queue[Request] = asyncio.Queue()
    for r in requests:
        queue.put_nowait(r)

    def tensor(name: str, datatype: str, value: object) -> object:
        t = g.InferInput(name, [1, 1], datatype)
        t.set_data_from_numpy(np.array([[value]], dtype={"BYTES": np.object_, "INT32": np.int32, "FP32": np.float32}[datatype]))
        return t

    async def worker() -> None:
        while not queue.empty():
            r = queue.get_nowait()
            inputs = [
                tensor("text_input", "BYTES", r.prompt.encode()),
                tensor("max_tokens", "INT32", r.max_tokens),
                tensor("temperature", "FP32", r.temperature),
                tensor("stop", "BYTES", json.dumps(r.stop).encode()),
                tensor("chat", "INT32", -1),  # the model's default, as for a prompt without a chat setting
            ]
            result = await client.infer(model.triton_name, inputs)
            assert result.as_numpy("text_output") is not None
            tokens.append(int(result.as_numpy("completion_tokens").reshape(-1)[0]))

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - t0
    await client.close()
    return elapsed, statistics.mean(tokens)


AUTH: dict[str, str] = {}
"""Authorization header of the bench stack's admin key (set once the stack is up)."""


def pipeline(gateway_url: str, database_url: str, model: str, n: int) -> tuple[float, float, float]:
    """``(seconds from POST /v1/evaluations to status completed, mean completion tokens, model-seconds)`` for
    the first ``n`` MMLU items on ``model``, every other setting at its default; model-seconds is the sum of the
    items' call times (``latency_ms``: the model call's wall time at inference, without the wait for a slot). Completion is read from PostgreSQL every 20 ms
    once 90 % of the items are in, every 200 ms before (the gateway's read rate limit would refuse polling that
    fast, and fast polling all along would be the bench's own load beside the model)."""
    import httpx
    from sqlalchemy import text

    from uep_common.runtime.session import make_sync_engine

    engine = make_sync_engine(database_url)
    try:
        with httpx.Client(base_url=gateway_url, timeout=30, headers=AUTH) as c:
            t0 = time.perf_counter()
            r = c.post("/v1/evaluations", json={"benchmark": "mmlu", "model": model, "sample_limit": n, "sampling": "first"})
            r.raise_for_status()
            eid = r.json()["id"]
        query = text("SELECT status, completed_items, error_items FROM evaluations WHERE id = :e")
        with engine.connect() as db:
            while True:
                status, done, errors = db.execute(query, {"e": eid}).one()
                db.rollback()  # a fresh snapshot for the next read
                if status not in ("pending", "running"):
                    break
                time.sleep(0.02 if done >= 0.9 * n else 0.2)  # fast only near the end: the bench's own load
            elapsed = time.perf_counter() - t0
            tokens, busy = db.execute(
                text("SELECT avg(completion_tokens), sum(latency_ms) / 1000.0 FROM sample_results WHERE evaluation_id = :e"),
                {"e": eid},
            ).one()
    finally:
        engine.dispose()
    assert (status, done, errors) == ("completed", n, 0), (eid, status, done, errors)
    return elapsed, float(tokens or 0), float(busy or 0)


def _set_capacity(database_url: str, model: str, slots: int) -> None:
    """Registry capacity of ``model`` = ``slots`` calls in flight (the scheduler and inference read it per item)."""
    from sqlalchemy import text

    from uep_common.runtime.session import make_sync_engine

    engine = make_sync_engine(database_url)
    with engine.begin() as c:
        c.execute(text("UPDATE models SET max_in_flight = :c WHERE name = :m"), {"c": slots, "m": model})
    engine.dispose()


def _requests(n: int, model: BenchModel) -> list[Request]:
    """The first ``n`` MMLU items as inference renders them for ``model`` (benchmark template and max_tokens,
    the model's temperature and stop strings)."""
    from uep_common.builtin.catalog import BENCHMARKS, LOCAL_MODELS
    from uep_common.builtin.datasets import load_mmlu
    from uep_common.prompting.prompts import render_prompt

    prompt = next(b for b in BENCHMARKS if b.slug == "mmlu").config["prompt"]
    decoding = next(m for m in LOCAL_MODELS if m.name == model.name).decoding_defaults
    return [
        Request(
            render_prompt(prompt["template"], it.input),
            prompt.get("max_tokens") or decoding.get("max_tokens", 256),
            float(decoding.get("temperature", 0.0)),
            [*decoding.get("stop", []), *prompt.get("stop", [])],
        )
        for it in load_mmlu()[:n]
    ]


@dataclasses.dataclass
class CaseResult:
    """Throughputs (items/s) of one case, one entry per round."""

    case: str
    n: int
    direct: list[float] = dataclasses.field(default_factory=list)
    pipeline: list[float] = dataclasses.field(default_factory=list)
    busy: list[float] = dataclasses.field(default_factory=list)
    """Per pipeline run: the items' model call time over slots × the run's time (1.0: no slot ever idle)."""

    @property
    def ratios(self) -> list[float]:
        return [p / d for p, d in zip(self.pipeline, self.direct, strict=True)]


SIZED: dict[str, int] = {}
"""Capacity each model had when inference sized its semaphore (the first call after inference started)."""


def _size(cfg, model: str, slots: int) -> None:
    """Set ``model``'s capacity to ``slots``; restart inference when it already sized that model's semaphore
    at another capacity (a replica sizes a model's semaphore once, at its first call)."""
    import uep_stack

    if SIZED.get(model, slots) != slots:
        uep_stack.stop(cfg, ["inference"])
        uep_stack.start_service(cfg, "inference")
        SIZED.clear()
    _set_capacity(cfg.database_url, model, slots)
    SIZED[model] = slots


WARM_UP_ITEMS = 30
"""Items per warm-up run of the model (:func:`warm_up`)."""


def warm_up(grpc_url: str, model: BenchModel, requests: list[Request], slots: int, max_runs: int = 8) -> list[float]:
    """Call the model directly with ``requests`` at ``slots`` until its throughput settles: two runs in a row
    within 10 % of each other, at most ``max_runs``. Returns each run's items/s. The embedded LLM speeds up over
    its first hundred or so calls (2.5 → 5.5 items/s on 30 MMLU prompts at 1 slot, measured on this machine), so
    a short warm-up made the first rounds measure the model's warm-up rather than the pipeline."""
    runs: list[float] = []
    while len(runs) < max_runs:
        elapsed, _tokens = asyncio.run(direct(grpc_url, model, requests, slots))
        runs.append(len(requests) / elapsed)
        if len(runs) >= 2 and abs(runs[-1] - runs[-2]) <= 0.1 * runs[-2]:
            break
    return runs


PINNED: dict[str, set[int]] = {}
"""With ``--pin-model``: ``{"model": CPUs, "stack": CPUs}`` (:func:`cpu_pinning.split_cpus`)."""


def _pin(cfg) -> dict[str, int]:
    """Apply ``--pin-model``'s affinities again (a restarted service inherits the bench's own); returns the
    threads pinned per process (none without ``--pin-model``)."""
    if not PINNED:
        return {}
    from cpu_pinning import pin_stack

    return pin_stack(cfg.run_dir, PINNED["model"], PINNED["stack"])


def run_case(cfg, kind: str, slots: int, n: int, rounds: int) -> CaseResult:
    """``rounds`` rounds of direct and pipeline on ``kind`` at ``slots``, interleaved (A,B then B,A), each run
    started once the stack is quiet (``bench/idle_cost.wait_quiet``: the previous pipeline run's report is
    rendered after its evaluation completed, and would otherwise weigh on the next run)."""
    from idle_cost import wait_quiet

    model = MODELS[kind]
    requests = _requests(n, model)
    _size(cfg, model.name, slots)
    _pin(cfg)
    grpc_url = f"127.0.0.1:{cfg.triton_grpc}"
    warm = min(n, max(8 * slots, WARM_UP_ITEMS))
    runs = warm_up(grpc_url, model, requests[:warm], slots)
    print(f"  {kind}:{slots}  model warmed up: {' → '.join(f'{r:.2f}' for r in runs)} items/s direct", flush=True)
    pipeline(cfg.gateway_url, cfg.database_url, model.name, min(n, 8 * slots))  # the services' warm-up
    out = CaseResult(f"{kind}:{slots}", n)
    for r in range(rounds):
        for side in ("direct", "pipeline") if r % 2 == 0 else ("pipeline", "direct"):
            busy, (quiet_s, busiest) = "", wait_quiet(cfg.run_dir)
            if side == "direct":
                elapsed, tokens = asyncio.run(direct(grpc_url, model, requests, slots))
                out.direct.append(n / elapsed)
            else:
                elapsed, tokens, model_s = pipeline(cfg.gateway_url, cfg.database_url, model.name, n)
                out.pipeline.append(n / elapsed)
                out.busy.append(model_s / slots / elapsed)
                busy = f", slots busy {out.busy[-1]:.0%} of the run"
            print(
                f"  {out.case:<7} round {r + 1} {side:>8}: {n / elapsed:8.2f} items/s ({elapsed:.2f} s, "
                f"{tokens:.1f} completion tokens/item{busy}; after {quiet_s:.1f} s for the stack to go quiet"
                f"{f', mostly {busiest}' if busiest else ''})",
                flush=True,
            )
    return out


MODES = {
    "off": {"UEP_METRICS_ENABLED": "false", "UEP_OTEL_EXPORTER": "none"},
    "on": {"UEP_METRICS_ENABLED": "true", "UEP_OTEL_EXPORTER": "console"},
}
"""Service environment of each instrumentation mode of ``--compare-instrumentation``."""


def compare_instrumentation(
    cfg, n: int, slots: int, rounds: int, cpu: dict[str, dict[str, list[float]]] | None = None
) -> dict[str, list[float]]:
    """Throughput (items/s, POST → completed) of the pipeline on the echo model at ``slots`` in each mode of
    :data:`MODES`, ``rounds`` times, interleaved off/on, on/off, …; the six services are restarted in the mode's
    environment before each run. With ``cpu``, each run's CPU milliseconds per item of every stack process (with
    its descendants, from ``/proc``: ``bench/idle_cost.tree_ticks``) are appended to ``cpu[mode][process]``."""
    import uep_stack
    from idle_cost import TICKS, stack_pids, tree_ticks

    model = MODELS["echo"].name
    _set_capacity(cfg.database_url, model, slots)  # the services restart below: every semaphore sized afresh
    order = [m for r in range(rounds) for m in (("off", "on") if r % 2 == 0 else ("on", "off"))]
    results: dict[str, list[float]] = {m: [] for m in MODES}
    for i, mode in enumerate(order):
        if i == 0 or order[i - 1] != mode:  # at a round boundary the mode repeats: the services keep running
            uep_stack.stop(cfg, uep_stack.SERVICES)
            uep_stack.start_services(dataclasses.replace(cfg, extra_env={**cfg.extra_env, **MODES[mode]}))
            pipeline(cfg.gateway_url, cfg.database_url, model, 20)  # warm-up after the restart: groups joined, caches filled
        pids = stack_pids(cfg.run_dir)
        ticks0 = tree_ticks(pids)
        elapsed, _tokens, _model_s = pipeline(cfg.gateway_url, cfg.database_url, model, n)
        ticks1 = tree_ticks(pids)
        results[mode].append(n / elapsed)
        if cpu is not None:
            for name in pids:
                ms = 1000.0 * (ticks1[name][0] - ticks0[name][0]) / TICKS / n
                cpu.setdefault(mode, {}).setdefault(name, []).append(ms)
        print(f"  round {i // 2 + 1} instrumentation {mode:>3}: {n / elapsed:8.1f} items/s ({elapsed:.2f} s)", flush=True)
    return results


def _cases(spec: str) -> list[tuple[str, int]]:
    out = []
    for part in spec.split(","):
        kind, _, slots = part.strip().partition(":")
        if kind not in MODELS or not slots.isdigit() or int(slots) < 1:
            raise SystemExit(f"--cases: {part!r} is not MODEL:SLOTS with MODEL one of {sorted(MODELS)}")
        if kind == "llm" and int(slots) > LLM_SLOTS:
            raise SystemExit(f"--cases: {part!r}: the model server opens {LLM_SLOTS} LLM slots at most")
        out.append((kind, int(slots)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="echo:1,llm:1,echo:4,llm:4", help="MODEL:SLOTS,… (models: echo, llm)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of direct and pipeline per case (and of each mode)")
    ap.add_argument("--n-echo", type=int, default=1000, help="items per run on the echo model")
    ap.add_argument("--n-llm", type=int, default=30, help="items per run on the LLM")
    ap.add_argument("--service-ms", type=int, default=20, help="the echo model's service time per batch")
    ap.add_argument("--pin-model", action="store_true", help="the model server on a core of its own, the rest on the others")
    ap.add_argument("--compare-instrumentation", action="store_true", help="pipeline with metrics and span export on vs off")
    ap.add_argument("--port-base", type=int, default=20000, help="UEP_STACK_PORT_BASE of the bench's private stack")
    ap.add_argument("--database", default="uep_bench", help="PostgreSQL database of the bench's stack (made if missing)")
    ap.add_argument("--redis-db", type=int, default=14, help="Redis database number of the bench's stack")
    ap.add_argument("--run-dir", default=str(ROOT / ".run" / "bench"), help="run directory of the bench's stack")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the stack (finally) on kill too
    cases = _cases(args.cases)
    kinds = {k for k, _ in cases} | ({"echo"} if args.compare_instrumentation else set())
    os.environ.update(
        {
            "UEP_STACK_PORT_BASE": str(args.port_base),
            "UEP_STACK_RUN_DIR": args.run_dir,
            "UEP_DATABASE_URL": f"{PG_SERVER}/{args.database}",
            "UEP_REDIS_URL": f"{REDIS_SERVER}/{args.redis_db}",
            "UEP_TRITON_MODELS": ",".join(sorted(MODELS[k].server_name for k in kinds)),
            "UEP_BENCH_SERVICE_MS": str(args.service_ms),
            "UEP_LLM_N_PARALLEL": str(LLM_SLOTS),  # the model server's slots; a case's capacity uses some of them
            "UEP_OTEL_EXPORTER": "none",
            "UEP_LOG_LEVEL": "WARNING",
        }
    )
    import uep_stack
    from free_ports import stack_ports, wait_until_free

    if args.pin_model:
        from cpu_pinning import split_cpus

        PINNED["model"], PINNED["stack"] = split_cpus()
        os.environ["UEP_LLM_THREADS"] = str(len(PINNED["model"]))
    cfg = uep_stack.config()
    uep_stack.down(cfg)
    wait_until_free(stack_ports(cfg))  # a stack stopped just before leaves TIME_WAIT sockets
    uep_stack.up(cfg)
    AUTH.update(cfg.auth_headers())
    if PINNED:
        threads = _pin(cfg)
        print(
            f"pinned: the model server to CPU {sorted(PINNED['model'])} ({threads.get('triton', 0)} threads), the rest to "
            f"{sorted(PINNED['stack'])}; UEP_LLM_THREADS={os.environ['UEP_LLM_THREADS']}",
            flush=True,
        )
    results: list[CaseResult] = []
    cpu: dict[str, dict[str, list[float]]] = {}
    try:
        for kind, slots in cases:
            results.append(run_case(cfg, kind, slots, args.n_llm if kind == "llm" else args.n_echo, args.rounds))
        modes = (
            compare_instrumentation(cfg, args.n_echo, next((s for k, s in cases if k == "echo"), 4), args.rounds, cpu)
            if args.compare_instrumentation
            else None
        )
    finally:
        uep_stack.down(cfg)
    pinning = f", the model server pinned to CPU {sorted(PINNED['model'])} (one llama.cpp thread)" if PINNED else ""
    print(
        f"\nMMLU prompts, defaults everywhere, echo service time {args.service_ms} ms/batch, {args.rounds} rounds per case{pinning}"
    )
    print(
        f"{'case':<8} {'N':>5} {'direct items/s':>15} {'pipeline items/s':>17} {'ratio (median)':>15} {'spread':>14} "
        f"{'slots busy':>11}"
    )
    for c in results:
        ratios = c.ratios
        print(
            f"{c.case:<8} {c.n:>5} {statistics.median(c.direct):>15.2f} {statistics.median(c.pipeline):>17.2f} "
            f"{statistics.median(ratios):>15.3f} {min(ratios):>6.3f}–{max(ratios):.3f} {statistics.median(c.busy):>10.0%}"
        )
    print("target: ratio ≥ 0.95 in every case (pipeline POST → completed, every item stored; direct = tritonclient gRPC)")
    print(
        "slots busy: the pipeline's model call time over slots × run time — below 1 the model idled; a ratio below it\n"
        "means each call took longer than in the direct run (the services' CPU beside the model's on this machine)"
    )
    if modes is not None:
        on, off = statistics.median(modes["on"]), statistics.median(modes["off"])
        print(f"instrumentation off (no metrics, no span export): {off:8.1f} items/s  (median of {len(modes['off'])})")
        print(f"instrumentation on (metrics, spans exported):     {on:8.1f} items/s  (median of {len(modes['on'])})")
        print(f"ratio on/off:                                     {on / off:8.3f}   (target ≥ 0.97)")
        print("CPU per item, ms (median of the runs), by process: off → on (difference)")
        for name in sorted(cpu.get("on", {})):
            a, b = statistics.median(cpu["off"].get(name, [0.0])), statistics.median(cpu["on"][name])
            print(f"  {name:<10} {a:7.2f} → {b:7.2f}  ({b - a:+.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
