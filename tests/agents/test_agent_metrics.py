"""The agent metrics (uep_scorer.metrics.agent) on hand-built trajectories. Each expected value follows from
the rules in the module docstring, worked out in the comments."""

import asyncio
import uuid
from typing import cast

import pytest

from uep_common.contract.agents import AgentStep, Trajectory
from uep_common.contract.events import OutputGenerated, ScoreComputed
from uep_scorer.metrics import TrajectoryMetric, get_metric
from uep_scorer.references import ReferenceStore
from uep_scorer.scoring import apply_metric, score_output


def metric(name: str) -> TrajectoryMetric:
    return cast(TrajectoryMetric, get_metric(name))


REF = {"answer": "5.84", "tolerance": 0.005, "must_call": ["sql"], "must_not_call": ["python"]}


def run(*steps: tuple[str, str, str], answer: str | None) -> Trajectory:
    built = [AgentStep(index=i + 1, tool=tool, result=result, status=status) for i, (tool, result, status) in enumerate(steps)]
    if answer is not None:
        built.append(AgentStep(index=len(built) + 1, tool="submit", result=answer, prompt_tokens=100, completion_tokens=20))
    return Trajectory(
        steps=built, stop_reason="submitted" if answer else "max_steps", answer=answer,
        prompt_tokens=300, completion_tokens=60, model_ms=900.0, tool_ms=150.0, wall_ms=1100.0,
    )  # fmt: skip


RIGHT_PATH = run(("sql", '{"columns": ["avg"], "rows": [[5.843333]]}', "ok"), answer="5.84")
# the right number, but computed with python instead of the database: must_call sql missing, python forbidden
WRONG_PATH = run(("python", "5.843333\n", "ok"), answer="5.84")
# the right number with no tool result at all: a guess
GUESS = run(answer="5.84")
# the database said 5.84 but the answer is 6
WRONG_ANSWER = run(("sql", '{"rows": [[5.843333]]}', "ok"), answer="6")
# right answer, sql called, but its result does not hold the number (a failed query)
UNSUPPORTED = run(("sql", "SQL error: no such table: iris2", "error"), answer="5.84")


def scores(name: str, trajectory: Trajectory | None) -> tuple[bool | None, float | None]:
    result = metric(name).score_trajectory(trajectory, "", REF, {})
    return result.is_correct, result.score


def test_agent_answer():
    # |5.84 - 5.84| <= 0.005 right; |6 - 5.84| = 0.16 > 0.005 wrong; no trajectory wrong
    assert scores("agent_answer", RIGHT_PATH) == (True, 1.0)
    assert scores("agent_answer", WRONG_PATH) == (True, 1.0)
    assert scores("agent_answer", WRONG_ANSWER) == (False, 0.0)
    assert scores("agent_answer", None) == (False, 0.0)


def test_agent_path_fails_a_right_number_on_the_wrong_path():
    assert scores("agent_path", RIGHT_PATH) == (True, 1.0)
    assert scores("agent_path", WRONG_PATH) == (False, 0.0)
    details = metric("agent_path").score_trajectory(WRONG_PATH, "", REF, {}).details
    assert details["path"] == "missing sql; forbidden python"
    # no tool before submit: sql missing, and answered without evidence
    assert metric("agent_path").score_trajectory(GUESS, "", REF, {}).details["path"] == ("missing sql; answered_without_evidence")
    # allowed without evidence and nothing required: the guess passes the path
    assert metric("agent_path").score_trajectory(GUESS, "", {"answer": "5.84"}, {"allow_without_evidence": True}).is_correct


def test_agent_path_usage_submetrics():
    details = metric("agent_path").score_trajectory(RIGHT_PATH, "", REF, {}).details
    # 2 steps (sql, submit), 1 tool call besides submit, 300 + 60 tokens, 1100 - 900 - 150 = 50 ms of platform
    assert details["submetrics"] == {
        "agent_steps": 2, "agent_tool_calls": 1, "agent_tokens": 360,
        "agent_model_ms": 900.0, "agent_tool_ms": 150.0, "agent_platform_ms": 50.0,
    }  # fmt: skip


def test_agent_traceable():
    # right and 5.843333 (within 0.005 of 5.84) is in the sql result
    assert scores("agent_traceable", RIGHT_PATH) == (True, 1.0)
    # right, and python's printed 5.843333 backs it: traceable (the path metric is what fails it)
    assert scores("agent_traceable", WRONG_PATH) == (True, 1.0)
    assert scores("agent_traceable", GUESS) == (False, 0.0)  # no evidence
    assert scores("agent_traceable", WRONG_ANSWER) == (False, 0.0)  # backed number, wrong answer
    assert scores("agent_traceable", UNSUPPORTED) == (False, 0.0)  # failed query backs nothing


def test_text_answers_use_exact_match_normalisation():
    ref = {"answer": "Iris virginica"}
    t = run(("sql", '{"rows": [["iris virginica"]]}', "ok"), answer="iris  Virginica")
    assert metric("agent_answer").score_trajectory(t, "", ref, {}).is_correct is True
    assert metric("agent_traceable").score_trajectory(t, "", ref, {}).is_correct is True


def test_apply_metric_passes_the_trajectory():
    assert apply_metric("agent_path", None, "5.84", REF, {}, RIGHT_PATH).is_correct is True
    assert apply_metric("agent_path", None, "5.84", REF, {}).is_correct is False  # no trajectory given


class _Refs:
    async def benchmark(self, benchmark_id):
        from uep_common.contract.configs import BenchmarkConfig, EvaluationType

        config = BenchmarkConfig.model_validate(
            {"metrics": [{"name": "agent_answer", "primary": True}, {"name": "agent_path"}, {"name": "agent_traceable"}]}
        )
        return config, EvaluationType.automatic

    async def reference(self, sample_id, benchmark_id):
        return REF


def test_score_output_scores_and_carries_the_trajectory():
    ids = {k: uuid.uuid4() for k in ("evaluation_id", "tenant_id", "sample_id", "benchmark_id", "model_id")}
    out = OutputGenerated(**ids, repeat=0, prompt="task", output="5.84", trajectory=WRONG_PATH)
    scored = asyncio.run(score_output(out, cast(ReferenceStore, _Refs())))
    assert isinstance(scored, ScoreComputed)
    assert (scored.metric_name, scored.is_correct) == ("agent_answer", True)
    assert (scored.metrics["agent_path"], scored.metrics["agent_traceable"], scored.metrics["agent_steps"]) == (0.0, 1.0, 2)
    assert scored.trajectory == WRONG_PATH


def test_summary_intervals_of_binary_per_item_metrics():
    from uep_common.analytics.summary import binary_intervals

    rows = [("agent_path", 10, 7.0, True), ("agent_steps", 10, 34.0, False), ("empty", 0, 0.0, None)]
    intervals = binary_intervals(rows)
    # Wilson 95 % for 7/10: (0.7 + z²/20 ± z·sqrt(0.021 + z²/400)) / (1 + z²/10), z = 1.95996 -> 0.3968, 0.8922
    assert intervals.keys() == {"agent_path"}
    assert intervals["agent_path"] == pytest.approx((0.3968, 0.8922), abs=1e-4)
