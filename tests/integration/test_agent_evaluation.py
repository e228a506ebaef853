"""An agent evaluation end to end on the stack: the embedded SmolLM2 runs the built-in sklearn-data-agent
benchmark in the platform's agent loop (inference), its tool calls run in the bubblewrap sandbox, the scorer
scores answer, path and traceability, and every item's trajectory is stored with its result."""

import pytest

from uep_common.contract.agents import Trajectory

from .helpers import all_results, submit, wait_done

# minutes of the embedded LLM: make test-slow, not make test
pytestmark = pytest.mark.slow

TOOL_STATUSES = {"ok", "error", "timed_out", "bad_tool_call"}


def test_the_embedded_llm_runs_the_data_agent_benchmark(gateway):
    evaluation_id = submit(
        gateway, benchmark="sklearn-data-agent", model="smollm2-135m-instruct", sample_limit=3, sampling="first"
    )
    final = wait_done(gateway, evaluation_id, timeout_s=420)
    assert final["status"] == "completed", final
    assert final["summary"]["metric_name"] == "agent_answer"
    # the path and traceability rates come with their Wilson intervals, the mean inside each
    summary = final["summary"]
    for name in ("agent_path", "agent_traceable"):
        low, high = summary["metric_intervals"][name]
        assert low <= summary["metric_means"][name] <= high
    results = all_results(gateway, evaluation_id)
    assert len(results) == 3
    for r in results:
        assert r["error"] is None, r["error"]
        t = Trajectory.model_validate(r["trajectory"])
        # the run ended for one of the loop's reasons, within the benchmark's six steps
        assert t.stop_reason in {"submitted", "max_steps", "max_tokens", "time_limit"}, t.stop_reason
        assert 1 <= len(t.steps) <= 6
        assert [s.index for s in t.steps] == list(range(1, len(t.steps) + 1))
        assert all(s.status in TOOL_STATUSES and s.completion_tokens > 0 for s in t.steps)
        # a call that was run in the sandbox (sql, python) took time there and left its result
        assert all(s.tool_ms > 0 and s.result for s in t.steps if s.tool in ("sql", "python") and s.status != "bad_tool_call")
        # the item's usage is the sum over its steps: what settlement charges
        assert r["prompt_tokens"] == sum(s.prompt_tokens for s in t.steps) == t.prompt_tokens
        assert r["completion_tokens"] == sum(s.completion_tokens for s in t.steps) == t.completion_tokens
        assert r["output"] == (t.answer or "")
        # every agent metric scored the item, with the run's usage as submetrics
        assert {"agent_answer", "agent_path", "agent_traceable", "agent_steps", "agent_tokens"} <= r["metrics"].keys()
        assert r["metrics"]["agent_steps"] == len(t.steps)
        assert r["metrics"]["agent_tokens"] == t.prompt_tokens + t.completion_tokens
        # traceable implies right
        assert r["metrics"]["agent_traceable"] <= r["metrics"]["agent_answer"]
