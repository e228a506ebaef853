"""The agent contract: what a benchmark of kind ``agent`` declares (:class:`AgentSpec`, in its prompt spec) and
what an agent's run of one item leaves behind (:class:`Trajectory`, on OutputGenerated and ScoreComputed).

The platform runs the loop (inference, ``uep_inference.agent``): each step is one model call whose answer is
a tool call ``{"thought", "tool", "arguments"}`` (JSON decoded under a schema built from the declared tools);
the platform runs the tool (``python`` and ``sql`` in the code sandbox) and feeds its result back, until the
model calls ``submit`` or a limit ends the run. Every bound below keeps one trajectory well inside one Kafka
record (at most :data:`MAX_STEPS` steps of at most a few KiB each).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_STEPS = 50
"""Most steps an agent benchmark may allow per item."""
MAX_RESULT_CHARS = 2000
"""A tool result is cut to its last this many characters before it is stored and fed back (the sandbox keeps
the last 2000 characters of a run's output)."""
MAX_ARGUMENT_CHARS = 4000
"""Longest JSON text of one tool call's arguments that is run and stored."""
MAX_DATABASE_CHARS = 512 * 1024
"""Longest SQL script (``AgentSpec.database``) a benchmark may ship."""

StopReason = Literal["submitted", "max_steps", "max_tokens", "time_limit", "model_error", "evaluation_ended", "bad_agent_config"]
"""Why an agent's run of one item ended: the model called ``submit``; it used every step, its token budget or
the item's time; a model call failed; the item's evaluation ended (stop, cancel) between steps; the benchmark
names a tool the platform does not have."""


class CorpusDocument(BaseModel):
    """One document of a benchmark's corpus (what the ``search`` tool searches)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(min_length=1, max_length=200)
    text: str = Field(min_length=1, max_length=20_000)


class AgentSpec(BaseModel):
    """The ``agent`` block of a benchmark's prompt spec: the tools an agent may call and its limits per item.

    Attributes:
        tools: names of the platform's tool registry (``python``, ``sql``, ``search``, ``submit``); ``submit``
            is always available and need not be listed.
        max_steps: most model calls per item (each one a step, whether its tool call was valid or not).
        max_tokens: most prompt + completion tokens summed over an item's model calls; no step starts once
            they are spent.
        step_max_tokens: most new tokens of one step's answer.
        time_s: wall-clock limit of one item, seconds (model calls, tools and waits for the model's slot).
        tool_timeout_s: wall-clock limit of one tool run in the sandbox, seconds.
        max_rows: most rows a ``sql`` result returns.
        database: the SQL script (``CREATE TABLE`` / ``INSERT``) that builds the benchmark's SQLite database,
            fresh and in memory for every ``sql`` call; None when the benchmark has no database.
        corpus: the benchmark's documents for ``search``; None when it has none.
        instructions: text put before the task (what the agent is for); None = a generic instruction.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    tools: list[str] = Field(default_factory=lambda: ["submit"], min_length=1, max_length=16)
    max_steps: int = Field(8, ge=1, le=MAX_STEPS)
    max_tokens: int = Field(20_000, ge=1, le=2_000_000)
    step_max_tokens: int = Field(256, ge=1, le=8192)
    time_s: float = Field(120.0, gt=0, le=3600)
    tool_timeout_s: float = Field(10.0, gt=0, le=60)
    max_rows: int = Field(20, ge=1, le=1000)
    database: str | None = Field(None, max_length=MAX_DATABASE_CHARS)
    corpus: list[CorpusDocument] | None = Field(None, max_length=1000)
    instructions: str | None = Field(None, max_length=4000)


class AgentStep(BaseModel):
    """One step of an agent's run: the model's answer (a tool call) and what the tool returned.

    Attributes:
        index: 1-based step number.
        thought: the model's stated reasoning (cut to 1000 characters), None when it gave none.
        tool: the tool called; None when the answer was no valid tool call (``status`` ``bad_tool_call``).
        arguments: the call's arguments as the model gave them (``{}`` when they were too long to keep).
        result: what the tool returned (its last :data:`MAX_RESULT_CHARS` characters), or why the call was
            refused; the final answer for ``submit``.
        status: ``ok``; ``error`` (the tool ran and failed: an SQL error, an exception); ``timed_out``;
            ``bad_tool_call`` (unparseable answer, unknown tool, arguments that do not fit the tool);
            ``sandbox_unavailable``.
        model_ms: wall time of the step's model call (its wait for the model's slot excluded), milliseconds.
        tool_ms: wall time of the tool run, milliseconds (0 for ``submit`` and refused calls).
        prompt_tokens: the step's prompt tokens as the model counted them.
        completion_tokens: the step's new tokens.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    index: int = Field(ge=1)
    thought: str | None = None
    tool: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: str = ""
    status: Literal["ok", "error", "timed_out", "bad_tool_call", "sandbox_unavailable"] = "ok"
    model_ms: float = Field(0.0, ge=0)
    tool_ms: float = Field(0.0, ge=0)
    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)


class Trajectory(BaseModel):
    """An agent's run of one item: its steps, why it ended, its answer and its use of the model and tools.

    Attributes:
        steps: the steps in order (at most :data:`MAX_STEPS`).
        stop_reason: why it ended (:data:`StopReason`).
        answer: the argument of ``submit``; None when the model never submitted.
        prompt_tokens: sum of the steps' prompt tokens (the planner role's input).
        completion_tokens: sum of the steps' new tokens (the planner role's output).
        model_ms: sum of the steps' model call times, milliseconds.
        tool_ms: sum of the tool runs' times, milliseconds (the tool role).
        wall_ms: the run's wall time, milliseconds; ``wall_ms - model_ms - tool_ms`` is the platform's own
            time (building prompts, parsing answers, waiting for the model's slot).
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    steps: list[AgentStep] = Field(default_factory=list, max_length=MAX_STEPS)
    stop_reason: str
    answer: str | None = None
    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)
    model_ms: float = Field(0.0, ge=0)
    tool_ms: float = Field(0.0, ge=0)
    wall_ms: float = Field(0.0, ge=0)

    @property
    def tools_called(self) -> list[str]:
        """The tools of the steps whose call was run (``status`` other than ``bad_tool_call``), in order."""
        return [s.tool for s in self.steps if s.tool is not None and s.status != "bad_tool_call"]

    @property
    def evidence(self) -> list[str]:
        """The results of the tool runs that succeeded, ``submit`` excluded: what an answer can be backed by."""
        return [s.result for s in self.steps if s.tool not in (None, "submit") and s.status == "ok"]
