"""The JSON Schema of a judge's answer, sent with every judge call so that a backend with constrained
decoding (llama.cpp grammars, vLLM / TensorRT-LLM guided decoding, an OpenAI-compatible ``response_format``)
can only produce an answer that parses and lies in the declared scales and label set.

Rubric and reference: ``{"scores": {<dimension>: n, ...}, "overall": n, "reasoning": str}`` with every key
required and no other key (OpenAI's strict structured outputs require both), keys in the order the prompt
shows them. A scale declared ``integer`` is an ``integer`` with an ``enum`` of its values when it has at most
:data:`MAX_ENUM` of them (``enum`` is honoured by every backend above; ``minimum``/``maximum`` is not by all),
else ``minimum``/``maximum``; any other scale is a ``number`` with ``minimum``/``maximum`` (a backend that
does not enforce those may still answer off the scale, which the parser then refuses). ``reasoning`` is bounded
by ``maxLength`` :data:`REASONING_MAX_CHARS` so that the answer ends within the judge's ``max_tokens``.

Pairwise: ``{"winner": "A" | "B" | "tie", "reasoning": str}``.

A configuration with ``score_label`` asks for labelled free text, so it has no schema (None).
"""

from __future__ import annotations

from typing import Any

from uep_common.contract.judge_config import JudgeConfig

MAX_ENUM = 101
"""Largest integer scale written as an ``enum`` (0-100 included)."""

REASONING_MAX_CHARS = 300
"""``maxLength`` of the ``reasoning`` string."""


def scale_schema(lo: float, hi: float, integer: bool) -> dict[str, Any]:
    """The schema of one score on ``[lo, hi]``: integers as an ``enum`` (or bounds past :data:`MAX_ENUM`
    values), other scales a bounded ``number``."""
    if integer:
        a, b = int(lo), int(hi)
        if b - a + 1 <= MAX_ENUM:
            return {"type": "integer", "enum": list(range(a, b + 1))}
        return {"type": "integer", "minimum": a, "maximum": b}
    return {"type": "number", "minimum": lo, "maximum": hi}


def _reasoning() -> dict[str, Any]:
    return {"type": "string", "maxLength": REASONING_MAX_CHARS}


def answer_schema(cfg: JudgeConfig) -> dict[str, Any] | None:
    """The JSON Schema of an answer under ``cfg`` (see the module docstring); None with ``score_label``."""
    if cfg.score_label is not None:
        return None
    if cfg.mode == "pairwise":
        return {
            "type": "object",
            "properties": {"winner": {"type": "string", "enum": ["A", "B", "tie"]}, "reasoning": _reasoning()},
            "required": ["winner", "reasoning"],
            "additionalProperties": False,
        }
    dims = {d.name: scale_schema(d.min, d.max, d.integer) for d in cfg.dimensions}
    return {
        "type": "object",
        "properties": {
            "scores": {
                "type": "object",
                "properties": dims,
                "required": list(dims),
                "additionalProperties": False,
            },
            "overall": scale_schema(cfg.overall_min, cfg.overall_max, cfg.overall_integer),
            "reasoning": _reasoning(),
        },
        "required": ["scores", "overall", "reasoning"],
        "additionalProperties": False,
    }
