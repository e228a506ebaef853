"""The tool registry: ``@tool`` turns an async function with typed, annotated parameters into a tool an agent
can call, with the JSON Schema of its arguments (pydantic's, from the signature) for function calling.

A tool function takes a :class:`ToolContext` first, then its arguments as keyword parameters (each a type,
with ``Annotated[..., Field(...)]`` for bounds and a description), and returns a :class:`ToolOutcome`. It never
raises for what the model asked: a failing call is an outcome with status ``error``. A team adds a tool by
decorating a function in a module imported by :mod:`uep_inference.agent.tools`.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from uep_common.contract.agents import AgentSpec


@dataclass(frozen=True)
class ToolContext:
    """What a tool run may use: the benchmark's ``spec`` (its database, corpus, limits) and ``timeout_s``, the
    seconds the run may take (the tool's limit, or less when the item's time is nearly spent)."""

    spec: AgentSpec
    timeout_s: float


@dataclass(frozen=True)
class ToolOutcome:
    """A tool run's outcome: ``status`` (``ok``, ``error``, ``timed_out``, ``sandbox_unavailable``) and
    ``result``, the text fed back to the model (already bounded by the tool)."""

    status: str
    result: str


ToolFn = Callable[..., Awaitable[ToolOutcome]]


class BadToolCallError(ValueError):
    """A call the platform refuses to run: unknown tool, or arguments that do not fit the tool's schema."""


@dataclass(frozen=True)
class Tool:
    """A registered tool: its ``name``, ``description``, function and the pydantic model of its arguments."""

    name: str
    description: str
    fn: ToolFn
    arguments: type[BaseModel]

    def parameters_schema(self) -> dict[str, Any]:
        """The JSON Schema (draft 2020-12) of the arguments object, extra keys refused."""
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return schema

    def function_schema(self) -> dict[str, Any]:
        """The tool in OpenAI's function-calling shape: ``{"type": "function", "function": {name, description,
        parameters}}``."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters_schema()},
        }

    async def call(self, ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
        """Check ``arguments`` against the tool's schema and run it. Raises :class:`BadToolCallError` naming the
        field and the reason when they do not fit."""
        try:
            checked = self.arguments.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
            raise BadToolCallError(f"{self.name}: {problems}") from None
        return await self.fn(ctx, **checked.model_dump())


_REGISTRY: dict[str, Tool] = {}


def tool(name: str, description: str) -> Callable[[ToolFn], ToolFn]:
    """Register the decorated function as tool ``name``. Its parameters after the :class:`ToolContext` become
    the arguments (types and ``Field`` bounds from the annotations; a parameter without a default is required).
    Raises ValueError when ``name`` is taken or a parameter has no annotation."""

    def register(fn: ToolFn) -> ToolFn:
        if name in _REGISTRY:
            raise ValueError(f"tool {name!r} is already registered")
        hints = typing.get_type_hints(fn, include_extras=True)
        fields: dict[str, Any] = {}
        for param in list(inspect.signature(fn).parameters.values())[1:]:
            if param.name not in hints:
                raise ValueError(f"tool {name!r}: parameter {param.name!r} has no annotation")
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (hints[param.name], default)
        model = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
        _REGISTRY[name] = Tool(name, description, fn, model)
        return fn

    return register


def get_tool(name: str) -> Tool:
    """The tool called ``name``. Raises :class:`BadToolCallError` listing the known tools when there is none."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise BadToolCallError(f"unknown tool {name!r}; known tools: {', '.join(sorted(_REGISTRY))}") from None


def available_tools() -> list[str]:
    """The registered tool names, sorted."""
    return sorted(_REGISTRY)


def call_schema(tools: list[Tool], thought_chars: int = 300) -> dict[str, Any]:
    """The JSON Schema one step's answer is decoded under: ``{"thought": text, "tool": one of the tools,
    "arguments": the arguments of one of them}`` - a function call in the model's own JSON, which llama.cpp
    grammars and OpenAI-compatible structured outputs can both constrain to."""
    return {
        "type": "object",
        "properties": {
            "thought": {"type": "string", "maxLength": thought_chars},
            "tool": {"type": "string", "enum": [t.name for t in tools]},
            "arguments": {"anyOf": [t.parameters_schema() for t in tools]},
        },
        "required": ["thought", "tool", "arguments"],
        "additionalProperties": False,
    }
