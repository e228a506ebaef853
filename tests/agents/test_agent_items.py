"""An agent item through the inference step (uep_inference.service.generate_output) with the real
OpenAI-compatible backend over a scripted HTTP endpoint: every step is a structured-output request carrying
the tool-call schema, the sql call runs in the sandbox, the output is the submitted answer with the
trajectory; a stop between steps ends the run."""

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import cast

import httpx

from uep_common.contract.agents import AgentSpec
from uep_common.contract.events import ModelTarget, PromptSpec, SampleDispatched
from uep_inference.backends import Backends
from uep_inference.backends.openai_compatible import OpenAIBackend
from uep_inference.ended import EndedEvaluations, ItemWatch
from uep_inference.limits import ModelLimits
from uep_inference.service import generate_output
from uep_inference.settings import InferenceSettings

DB = "CREATE TABLE t (x REAL); INSERT INTO t VALUES (1.0), (2.0), (4.5);"
SQL = {"thought": "sum it", "tool": "sql", "arguments": {"query": "SELECT SUM(x) FROM t"}}
SUBMIT = {"thought": "done", "tool": "submit", "arguments": {"answer": "7.5"}}


class _OneBackend:
    def __init__(self, backend) -> None:
        self.backend = backend

    def for_target(self, target):
        return self.backend


def _Backends(backend) -> Backends:  # noqa: N802 - reads as the class it stands in for
    return cast(Backends, _OneBackend(backend))


def _event() -> SampleDispatched:
    prompt = PromptSpec(template="What is the sum of x? {{ q }}", chat=True, agent=AgentSpec(tools=["sql"], database=DB))
    target = ModelTarget(
        model_id=uuid.UUID(int=1), name="m", backend="openai_compatible", endpoint="http://llm.test/", max_concurrency=1
    )
    return SampleDispatched(
        evaluation_id=uuid.uuid4(), tenant_id=uuid.uuid4(), sample_id=uuid.uuid4(), benchmark_id=uuid.uuid4(),
        sample_ordinal=0, input={"q": "(table t)"}, prompt=prompt, target=target,
        lease_expires_at=datetime.now(UTC) + timedelta(minutes=5),
    )  # fmt: skip


def _scripted(answers: list[dict], bodies: list[dict], on_call=None):
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        if on_call:
            on_call()
        answer = answers[len(bodies) - 1]
        usage = {"prompt_tokens": 100 * len(bodies), "completion_tokens": 20}
        return httpx.Response(200, json={"choices": [{"message": {"content": json.dumps(answer)}}], "usage": usage})

    return OpenAIBackend(InferenceSettings(), transport=httpx.MockTransport(handler))


def test_an_agent_item_runs_its_steps_through_the_backend():
    bodies: list[dict] = []
    backend = _scripted([SQL, SUBMIT], bodies)

    async def go():
        try:
            return await generate_output(_event(), _Backends(backend), 10.0, ModelLimits())
        finally:
            await backend.close()

    out = asyncio.run(go())
    assert (out.error, out.output, out.prompt) == (None, "7.5", "What is the sum of x? (table t)")
    t = out.trajectory
    assert t is not None and t.stop_reason == "submitted"
    assert [(s.tool, s.status) for s in t.steps] == [("sql", "ok"), ("submit", "ok")]
    # 1.0 + 2.0 + 4.5 = 7.5, computed by SQLite in the sandbox
    assert json.loads(t.steps[0].result)["rows"] == [[7.5]]
    # usage: prompts of 100 and 200 tokens, 20 new tokens each
    assert (out.prompt_tokens, out.completion_tokens) == (300, 40)
    # each step is a chat request constrained to the tool-call schema (structured outputs)
    schema = bodies[0]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["tool"]["enum"] == ["sql", "submit"]
    assert bodies[0]["messages"][0]["content"].endswith("Task: What is the sum of x? (table t)\n\nStep 1 of 8:")
    assert 'Step 1: {"tool": "sql", "arguments": {"query": "SELECT SUM(x) FROM t"}}' in bodies[1]["messages"][0]["content"]


def test_a_stopped_evaluation_ends_the_agent_between_steps():
    event = _event()
    ended = EndedEvaluations()
    watch = ItemWatch(ended, event.evaluation_id, datetime.now(UTC) - timedelta(seconds=1))
    bodies: list[dict] = []
    # the evaluation is stopped while the first step's model call is in flight
    backend = _scripted([SQL, SUBMIT], bodies, on_call=lambda: ended.record(event.evaluation_id, "stopped", datetime.now(UTC)))

    async def go():
        try:
            return await generate_output(event, _Backends(backend), 10.0, ModelLimits(), watch=watch)
        finally:
            await backend.close()

    out = asyncio.run(go())
    t = out.trajectory
    assert t is not None and len(bodies) == 1
    assert (t.stop_reason, [s.tool for s in t.steps], t.answer) == ("evaluation_ended", ["sql"], None)
    # unfinished, not wrong: the item ends as one never called, which a retry of the evaluation runs again
    assert out.output is None and out.error is not None
    assert (out.error.type, out.error.message) == ("evaluation_ended", "agent stopped after 1 steps: the evaluation was stopped")
