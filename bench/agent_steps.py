"""bench/agent_steps: the agent harness's own time per step against the model call, and what the embedded
SmolLM2 scores on the built-in agent benchmark ``sklearn-data-agent``.

``make bench-agent`` (``.venv/bin/python bench/agent_steps.py``) runs every item of the benchmark through the
platform's loop (:func:`uep_inference.agent.loop.run_agent`) with its real tools (``sql`` and ``python`` in the
bubblewrap sandbox), each step's model call the embedded SmolLM2 in this process under the step's JSON Schema
(llama.cpp grammar, the model server's own code path without Triton). Then it scores each run with the
scorer's agent metrics and prints, per item, the stop reason, the answer and the three verdicts; and, over all
steps, the mean model time, tool time and platform time (the run's wall time less model and tool time: prompt
building, schema, parsing, argument checks), and the ratio platform / model measured in this run.

The broker, the database and the scheduler are not in this measurement (bench/pipeline_overhead measures the
per-item overhead of the pipeline); an agent item pays that once, not per step.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from uep_common.builtin.agent_data import load_sklearn_data_agent
from uep_common.builtin.catalog import BENCHMARKS
from uep_common.contract.configs import parse_benchmark_config
from uep_inference.agent.loop import StepReply, run_agent
from uep_model_server.io import GenerationRequest
from uep_model_server.llm import SmolLM2
from uep_scorer.scoring import apply_metric

METRICS = ("agent_answer", "agent_path", "agent_traceable")


def main() -> None:
    """Run the benchmark and print the table and the per-step figures."""
    bench = next(b for b in BENCHMARKS if b.slug == "sklearn-data-agent")
    spec = parse_benchmark_config(bench.config).prompt_spec.agent
    assert spec is not None
    llm = SmolLM2()

    async def ask(prompt: str, max_tokens: int, timeout_s: float, schema: dict[str, Any]) -> StepReply:
        request = GenerationRequest(prompt, max_tokens, 0.0, (), True, schema)
        start = time.perf_counter()
        (result,) = await asyncio.to_thread(llm, [request])
        ms = (time.perf_counter() - start) * 1000
        return StepReply(result.text, None, ms, result.prompt_tokens, result.completion_tokens)

    totals = dict.fromkeys(METRICS, 0)
    steps = []
    try:
        for item in load_sklearn_data_agent():
            run = asyncio.run(run_agent(item.input["question"], spec, ask, 60.0))
            t = run.trajectory
            verdicts = [bool(apply_metric(m, None, t.answer or "", item.reference, {}, t).is_correct) for m in METRICS]
            for m, v in zip(METRICS, verdicts, strict=True):
                totals[m] += v
            platform = t.wall_ms - t.model_ms - t.tool_ms
            steps += [(s.model_ms, s.tool_ms, platform / len(t.steps)) for s in t.steps]
            tools = ",".join(f"{s.tool or '?'}:{s.status}" for s in t.steps)
            print(f"{item.external_id:24} {t.stop_reason:10} answer={t.answer!r:14} gold={item.reference['answer']!r:12} "
                  f"{' '.join(str(int(v)) for v in verdicts)}  {tools}")  # fmt: skip
    finally:
        llm.close()
    n = len(load_sklearn_data_agent())
    print()
    for m in METRICS:
        print(f"{m:16} {totals[m]}/{n}")
    model = statistics.mean(s[0] for s in steps)
    tool = statistics.mean(s[1] for s in steps if s[1] > 0) if any(s[1] > 0 for s in steps) else 0.0
    platform = statistics.mean(s[2] for s in steps)
    print(f"steps {len(steps)}: model {model:.0f} ms/step, tool {tool:.0f} ms/run in the sandbox, "
          f"platform {platform:.2f} ms/step, platform/model {platform / model:.4f}")  # fmt: skip


if __name__ == "__main__":
    main()
