"""Parameter models of the agent metrics ``agent_answer``, ``agent_traceable`` and ``agent_path`` (rules in the
scorer's ``uep_scorer.metrics.agent``): a text answer is compared after ``exact_match``'s normalisation, with
case ignored unless the benchmark says otherwise."""

from __future__ import annotations

from pydantic import Field

from .registry import metric_params
from .text import NormalizationParams


@metric_params("agent_answer", "agent_traceable")
class AgentAnswerParams(NormalizationParams):
    """``agent_answer`` and ``agent_traceable``: the normalisation of a text answer (a number with the reference's
    ``tolerance`` is compared numerically and ignores these)."""

    ignore_case: bool = Field(True, description="lower-case both sides before comparing (default true for agents)")


@metric_params("agent_path")
class AgentPathParams(AgentAnswerParams):
    """``agent_path``: the answer normalisation plus whether an answer given with no tool result may pass."""

    allow_without_evidence: bool = Field(False, description="accept an answer given with no tool result")
