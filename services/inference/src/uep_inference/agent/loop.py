"""The agent loop of one item: ask the model for a tool call, run the tool, feed the result back, until the
model submits an answer or a limit ends the run (:class:`~uep_common.contract.agents.AgentSpec`: steps, tokens,
the item's time; and the item's evaluation ending between steps).

Each step is one model call made through ``ask`` (the service's :func:`uep_inference.service.call_model`:
the model's capacity slot, retries, the item's watch), its answer decoded under :func:`call_schema` and
parsed here. A step whose answer is no valid call is kept (status ``bad_tool_call``) and the model is told
why; it counts as a step. The prompt of a step is the task, the tools and the steps so far (each result cut
to :data:`FED_BACK_CHARS`), so it grows by at most that much per step.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from uep_common.contract.agents import MAX_ARGUMENT_CHARS, AgentSpec, AgentStep, Trajectory
from uep_common.contract.events import ErrorInfo

from . import tools as _shipped  # noqa: F401 - registers the shipped tools
from .registry import BadToolCallError, Tool, ToolContext, call_schema, get_tool

FED_BACK_CHARS = 600
"""Characters of a tool result repeated in later steps' prompts (the stored step keeps up to 2000)."""

DEFAULT_INSTRUCTIONS = (
    "You solve the task below by calling tools, one call per reply. Check facts with the tools before you "
    "answer, then call submit with the final answer only (a number or a few words)."
)


@dataclass(frozen=True)
class StepReply:
    """One step's model call as the loop needs it: the answer ``text`` or the ``error``, the call's
    ``latency_ms``, its token counts, ``ended`` (the evaluation's status when its end cut the call short) and
    ``throttled`` (an attempt met overload)."""

    text: str | None
    error: ErrorInfo | None
    latency_ms: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    ended: str | None = None
    throttled: bool = False


Ask = Callable[[str, int, float, dict[str, Any]], Awaitable[StepReply]]
"""``ask(prompt, max_tokens, timeout_s, json_schema)``: one model call of a step."""


@dataclass(frozen=True)
class AgentRun:
    """An item's run: its ``trajectory``, the ``error`` that ended it (a failed model call; None otherwise),
    whether a model call met overload (``throttled``) and the status of the evaluation if its end stopped the
    run (``ended``)."""

    trajectory: Trajectory
    error: ErrorInfo | None = None
    throttled: bool = False
    ended: str | None = None


def declared_tools(spec: AgentSpec) -> list[Tool]:
    """The tools of ``spec`` (``submit`` added when missing), in its order. Raises
    :class:`~uep_inference.agent.registry.BadToolCallError` naming an unknown one."""
    names = [*spec.tools, *([] if "submit" in spec.tools else ["submit"])]
    return [get_tool(name) for name in dict.fromkeys(names)]


def step_prompt(task: str, spec: AgentSpec, tools: list[Tool], steps: list[AgentStep]) -> str:
    """The prompt of the next step: instructions, the tools with their arguments' schemas, the task and the
    steps so far (each call and its result, cut to :data:`FED_BACK_CHARS`)."""
    lines = [spec.instructions or DEFAULT_INSTRUCTIONS, "", "Tools:"]
    lines += [f"- {t.name}: {t.description} Arguments: {json.dumps(t.parameters_schema()['properties'])}" for t in tools]
    lines += ["", 'Reply with one JSON object: {"thought": "...", "tool": "<name>", "arguments": {...}}.', "", f"Task: {task}"]
    for s in steps:
        call = json.dumps({"tool": s.tool, "arguments": s.arguments}) if s.tool else "(no valid tool call)"
        result = s.result if len(s.result) <= FED_BACK_CHARS else s.result[:FED_BACK_CHARS] + " [...]"
        lines += ["", f"Step {s.index}: {call}", f"Result ({s.status}): {result}"]
    lines += ["", f"Step {len(steps) + 1} of {spec.max_steps}:"]
    return "\n".join(lines)


def parse_call(text: str, tools: list[Tool]) -> tuple[str | None, Tool, dict[str, Any]]:
    """``(thought, tool, arguments)`` of a step's answer. Raises :class:`BadToolCallError` saying what is wrong
    (not JSON, no object, a tool not declared, arguments not an object or too long)."""
    try:
        value = json.loads(text)
    except ValueError:
        raise BadToolCallError(f"the reply is not JSON: {text[:200]!r}") from None
    if not isinstance(value, dict):
        raise BadToolCallError("the reply is not a JSON object")
    name, arguments = value.get("tool"), value.get("arguments", {})
    declared = {t.name: t for t in tools}
    if name not in declared:
        raise BadToolCallError(f"tool {name!r} is not one of {', '.join(declared)}")
    if not isinstance(arguments, dict):
        raise BadToolCallError("arguments must be a JSON object")
    if len(json.dumps(arguments)) > MAX_ARGUMENT_CHARS:
        raise BadToolCallError(f"arguments longer than {MAX_ARGUMENT_CHARS} characters")
    thought = value.get("thought")
    return (str(thought)[:1000] if thought else None), declared[name], arguments


async def run_agent(
    task: str, spec: AgentSpec, ask: Ask, call_timeout_s: float, ended: Callable[[], str | None] = lambda: None
) -> AgentRun:
    """Run the agent loop on ``task`` (the item's rendered prompt) under ``spec``'s limits; ``call_timeout_s``
    bounds one model call (and the item's remaining time bounds it further); ``ended()`` gives the status of
    the item's evaluation once it has ended (no further step starts). Never raises for what the model does."""
    start = time.perf_counter()
    deadline = start + spec.time_s
    steps: list[AgentStep] = []
    answer: str | None = None
    error: ErrorInfo | None = None
    throttled = False
    stop: str | None = None
    status_ended: str | None = None
    try:
        tools = declared_tools(spec)
    except BadToolCallError as exc:
        error = ErrorInfo(stage="inference", type="bad_agent_config", message=str(exc))
        return AgentRun(Trajectory(stop_reason="bad_agent_config"), error)
    schema = call_schema(tools)
    while stop is None:
        used = sum(s.prompt_tokens + s.completion_tokens for s in steps)
        remaining = deadline - time.perf_counter()
        if (status_ended := ended()) is not None:
            stop = "evaluation_ended"
        elif len(steps) >= spec.max_steps:
            stop = "max_steps"
        elif used >= spec.max_tokens:
            stop = "max_tokens"
        elif remaining <= 0:
            stop = "time_limit"
        if stop is not None:
            break
        prompt = step_prompt(task, spec, tools, steps)
        try:
            async with asyncio.timeout(remaining):
                reply = await ask(prompt, spec.step_max_tokens, min(call_timeout_s, remaining), schema)
        except TimeoutError:
            stop = "time_limit"
            break
        throttled = throttled or reply.throttled
        if reply.error is not None or reply.text is None:
            status_ended = reply.ended
            stop = "evaluation_ended" if reply.ended else "model_error"
            error = reply.error or ErrorInfo(stage="inference", type="no_output", message="the model returned nothing")
            break
        step = await _run_step(len(steps) + 1, reply, tools, spec, deadline)
        steps.append(step)
        if step.tool == "submit" and step.status == "ok":
            answer, stop = step.result, "submitted"
        elif step.status == "timed_out" and time.perf_counter() >= deadline:
            stop = "time_limit"
    trajectory = Trajectory(
        steps=steps,
        stop_reason=stop,
        answer=answer,
        prompt_tokens=sum(s.prompt_tokens for s in steps),
        completion_tokens=sum(s.completion_tokens for s in steps),
        model_ms=sum(s.model_ms for s in steps),
        tool_ms=sum(s.tool_ms for s in steps),
        wall_ms=(time.perf_counter() - start) * 1000,
    )
    return AgentRun(trajectory, error, throttled, status_ended)


async def _run_step(index: int, reply: StepReply, tools: list[Tool], spec: AgentSpec, deadline: float) -> AgentStep:
    usage = {"model_ms": reply.latency_ms, "prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens}
    assert reply.text is not None
    try:
        thought, chosen, arguments = parse_call(reply.text, tools)
    except BadToolCallError as exc:
        return AgentStep(index=index, status="bad_tool_call", result=str(exc), **usage)
    ctx = ToolContext(spec, max(0.1, min(spec.tool_timeout_s, deadline - time.perf_counter())))
    began = time.perf_counter()
    try:
        outcome = await chosen.call(ctx, arguments)
    except BadToolCallError as exc:
        return AgentStep(
            index=index, thought=thought, tool=chosen.name, arguments=arguments, status="bad_tool_call", result=str(exc), **usage
        )
    tool_ms = (time.perf_counter() - began) * 1000
    status = outcome.status if outcome.status in ("ok", "error", "timed_out", "sandbox_unavailable") else "error"
    return AgentStep(
        index=index, thought=thought, tool=chosen.name, arguments=arguments, result=outcome.result, status=status,
        tool_ms=tool_ms if chosen.name != "submit" else 0.0, **usage,
    )  # fmt: skip
