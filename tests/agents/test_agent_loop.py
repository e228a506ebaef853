"""The agent loop (uep_inference.agent.loop) with a scripted model: submit, the step, token and time limits,
answers that are no valid call, an evaluation ending between steps, a failing model call."""

import asyncio
import json

from uep_common.contract.agents import AgentSpec, CorpusDocument
from uep_common.contract.events import ErrorInfo
from uep_inference.agent.loop import StepReply, parse_call, run_agent, step_prompt
from uep_inference.agent.registry import call_schema, get_tool

CORPUS = [CorpusDocument(id="d1", text="The answer is forty two.")]


def scripted(*answers: object, tokens: tuple[int, int] = (10, 5), sleep_s: float = 0.0):
    """A model that gives ``answers`` in turn (a dict is sent as JSON), counting its calls and prompts."""
    seen: list[str] = []

    async def ask(prompt: str, max_tokens: int, timeout_s: float, schema: dict) -> StepReply:
        seen.append(prompt)
        if sleep_s:
            await asyncio.sleep(sleep_s)
        answer = answers[min(len(seen), len(answers)) - 1]
        text = json.dumps(answer) if isinstance(answer, dict) else str(answer)
        return StepReply(text, None, 1.0, *tokens)

    return ask, seen


SEARCH = {"thought": "look it up", "tool": "search", "arguments": {"query": "answer"}}
SUBMIT = {"thought": "done", "tool": "submit", "arguments": {"answer": "42"}}


def test_search_then_submit():
    ask, seen = scripted(SEARCH, SUBMIT)
    run = asyncio.run(run_agent("What is the answer?", AgentSpec(tools=["search"], corpus=CORPUS), ask, 30.0))
    t = run.trajectory
    assert (t.stop_reason, t.answer, run.error) == ("submitted", "42", None)
    assert [(s.tool, s.status) for s in t.steps] == [("search", "ok"), ("submit", "ok")]
    assert t.steps[0].result == "[d1] The answer is forty two."
    assert (t.prompt_tokens, t.completion_tokens, t.model_ms) == (20, 10, 2.0)
    assert t.evidence == ["[d1] The answer is forty two."]
    # the second prompt carries the first call and its result
    assert 'Step 1: {"tool": "search", "arguments": {"query": "answer"}}' in seen[1]
    assert "Result (ok): [d1] The answer is forty two." in seen[1]


def test_step_limit():
    ask, seen = scripted(SEARCH)
    run = asyncio.run(run_agent("q", AgentSpec(tools=["search"], corpus=CORPUS, max_steps=3), ask, 30.0))
    assert (run.trajectory.stop_reason, len(run.trajectory.steps), len(seen), run.trajectory.answer) == ("max_steps", 3, 3, None)


def test_token_limit_stops_before_the_next_step():
    # 60 + 5 tokens a step: after two steps 130 >= 100, so no third step starts
    ask, seen = scripted(SEARCH, tokens=(60, 5))
    run = asyncio.run(run_agent("q", AgentSpec(tools=["search"], corpus=CORPUS, max_tokens=100), ask, 30.0))
    assert (run.trajectory.stop_reason, len(run.trajectory.steps)) == ("max_tokens", 2)


def test_time_limit_cuts_a_slow_model_call():
    # a model that takes 30 s per answer against an item limit of 0.5 s (margins far apart: no timing race)
    ask, seen = scripted(SUBMIT, sleep_s=30.0)
    run = asyncio.run(run_agent("q", AgentSpec(time_s=0.5), ask, 60.0))
    assert (run.trajectory.stop_reason, run.trajectory.steps, len(seen)) == ("time_limit", [], 1)


def test_invalid_answers_are_steps_the_model_is_told_about():
    ask, seen = scripted("not json", {"tool": "shell", "arguments": {}}, {"tool": "search", "arguments": {"q": 1}}, SUBMIT)
    run = asyncio.run(run_agent("q", AgentSpec(tools=["search"], corpus=CORPUS), ask, 30.0))
    steps = run.trajectory.steps
    assert [s.status for s in steps] == ["bad_tool_call", "bad_tool_call", "bad_tool_call", "ok"]
    assert steps[0].result == "the reply is not JSON: 'not json'"
    assert steps[1].result == "tool 'shell' is not one of search, submit"
    assert steps[2].result == "search: query: Field required; q: Extra inputs are not permitted"
    assert "Result (bad_tool_call): the reply is not JSON" in seen[1]
    assert run.trajectory.tools_called == ["submit"]


def test_an_ended_evaluation_stops_between_steps():
    ask, seen = scripted(SEARCH)
    calls = iter([None, None, "cancelled"])
    run = asyncio.run(run_agent("q", AgentSpec(tools=["search"], corpus=CORPUS), ask, 30.0, lambda: next(calls)))
    assert (run.trajectory.stop_reason, len(run.trajectory.steps), run.ended) == ("evaluation_ended", 2, "cancelled")


def test_a_failed_model_call_ends_the_run_with_its_error():
    error = ErrorInfo(stage="inference", type="triton_unavailable", message="down")

    async def ask(prompt, max_tokens, timeout_s, schema):
        return StepReply(None, error, 3.0)

    run = asyncio.run(run_agent("q", AgentSpec(), ask, 30.0))
    assert (run.trajectory.stop_reason, run.error) == ("model_error", error)


def test_unknown_declared_tool_is_a_config_error():
    ask, seen = scripted(SUBMIT)
    run = asyncio.run(run_agent("q", AgentSpec(tools=["shell"]), ask, 30.0))
    assert run.error is not None
    assert (run.trajectory.stop_reason, run.error.type, seen) == ("bad_agent_config", "bad_agent_config", [])


def test_call_schema_and_parse():
    tools = [get_tool("sql"), get_tool("submit")]
    schema = call_schema(tools)
    assert schema["properties"]["tool"] == {"type": "string", "enum": ["sql", "submit"]}
    assert len(schema["properties"]["arguments"]["anyOf"]) == 2
    thought, tool, args = parse_call('{"thought": "t", "tool": "sql", "arguments": {"query": "SELECT 1"}}', tools)
    assert (thought, tool.name, args) == ("t", "sql", {"query": "SELECT 1"})
    prompt = step_prompt("How many?", AgentSpec(tools=["sql"], max_steps=4), tools, [])
    assert prompt.endswith("Task: How many?\n\nStep 1 of 4:")
