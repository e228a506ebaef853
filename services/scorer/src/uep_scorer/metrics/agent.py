"""Metrics of agent items, read from the item's trajectory (:class:`uep_common.contract.agents.Trajectory`):
``agent_answer`` (the submitted answer is right), ``agent_path`` (the run took the expected path) and
``agent_traceable`` (right AND backed by a tool result in the trajectory).

Reference (every agent metric reads the same one)::

    {"answer": "5.84", "tolerance": 0.005, "must_call": ["sql"], "must_not_call": ["python"],
     "query": "SELECT ROUND(AVG(sepal_length), 2) FROM iris"}

``answer`` is the gold answer; with ``tolerance`` it is a number and an answer is right when its first number
is within ``tolerance`` of it (absolute), else the answer is compared with ``exact_match``'s normalisation.
``must_call`` / ``must_not_call``: tools the run must / must not have called (a call refused as invalid does
not count). ``query`` (the query proving the gold answer) is documentation for people; no metric reads it.

Rules. ``agent_path``: every ``must_call`` tool called, no ``must_not_call`` tool called, and - unless
``allow_without_evidence`` - an answer was not submitted without a single successful tool result before it
("answered without evidence"). A right number reached by the wrong path fails ``agent_path``.
``agent_traceable``: ``agent_answer`` is right and the gold answer appears in a successful tool result (a
number within ``tolerance`` among the result's numbers; for text, the normalised gold answer is contained in the
normalised result) - the "traceable accuracy" of data-question agents: right and supported by the evidence.

Usage goes with ``agent_path`` as submetrics (per-item metrics of their own): ``agent_steps``,
``agent_tool_calls``, ``agent_tokens`` (prompt + completion over the steps: the planner role),
``agent_tool_ms`` (the tool role's time), ``agent_model_ms``, ``agent_platform_ms`` (the run's wall time less
model and tool time: the harness's own overhead and the waits for the model's slot).

An item without a trajectory (the model was not run as an agent) is wrong on all three, extraction
``no_answer``.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from uep_common.contract.agents import Trajectory
from uep_common.contract.metric_params.agents import AgentAnswerParams, AgentPathParams
from uep_common.contract.metric_params.text import NormalizationParams

from .base import NO_ANSWER, MetricInputError, MetricResult, Params, binary_result, extraction_label, read_params
from .normalize import NormalizeOptions, normalization_options, normalize_text, reference_answers
from .numeric import find_numbers, normalize_digits
from .registry import register_metric

AGENT_REFERENCE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": ["string", "number"]},
        "tolerance": {"type": "number", "minimum": 0},
        "must_call": {"type": "array", "items": {"type": "string"}},
        "must_not_call": {"type": "array", "items": {"type": "string"}},
        "query": {"type": "string"},
    },
    "required": ["answer"],
}
"""The reference every agent metric reads (see the module docstring)."""


def _tolerance(reference: dict[str, Any]) -> Decimal | None:
    value = reference.get("tolerance")
    if value is None:
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:
        raise MetricInputError(f"reference tolerance {value!r} is not a number") from None


def _gold_number(reference: dict[str, Any]) -> Decimal:
    found = find_numbers(normalize_digits(str(reference["answer"])))
    if len(found) != 1:
        raise MetricInputError(f"reference answer {reference['answer']!r} must hold one number when tolerance is set")
    return found[0].value


def answer_options(params: AgentAnswerParams) -> NormalizeOptions:
    """The text normalisation of validated agent parameters, every option as given or defaulted (case ignored by
    default, unlike ``exact_match``)."""
    fields = {name: getattr(params, name) for name in NormalizationParams.model_fields}
    return normalization_options(NormalizationParams.model_validate(fields))


def answer_matches(text: str, reference: dict[str, Any], options: NormalizeOptions, *, anywhere: bool = False) -> bool:
    """Whether ``text`` gives the gold answer of ``reference``: its first number (any of its numbers with
    ``anywhere``) within the tolerance, or, without one, equal to it after ``exact_match``'s normalisation
    (contained in it with ``anywhere``). Raises MetricInputError for a malformed reference."""
    if "answer" not in reference:
        raise MetricInputError("reference has no 'answer'")
    tol = _tolerance(reference)
    if tol is not None:
        gold = _gold_number(reference)
        numbers = [n.value for n in find_numbers(normalize_digits(text))]
        candidates = numbers if anywhere else numbers[:1]
        return any(abs(n - gold) <= tol for n in candidates)
    got = normalize_text(text, options)
    golds = [normalize_text(g, options) for g in reference_answers(reference)]
    return any(g and (g in got if anywhere else g == got) for g in golds)


class _AgentMetric:
    version = "1"
    params_model: type[AgentAnswerParams] = AgentAnswerParams
    reference_schema: dict[str, Any] = AGENT_REFERENCE
    source = "the agent harness (uep_common.contract.agents); rules in uep_scorer.metrics.agent"

    def score(self, output: str, reference: dict[str, Any], params: Params) -> MetricResult:
        """Without a trajectory: the answer is read from ``output`` but no path or evidence exists."""
        return self.score_trajectory(None, output, reference, params)

    def score_trajectory(
        self, trajectory: Trajectory | None, output: str, reference: dict[str, Any], params: Params
    ) -> MetricResult:
        """Score one agent item; see the module docstring for the rules."""
        raise NotImplementedError


@register_metric
class AgentAnswer(_AgentMetric):
    """``agent_answer``: the submitted answer matches the gold answer (1/0)."""

    name = "agent_answer"

    def score_trajectory(
        self, trajectory: Trajectory | None, output: str, reference: dict[str, Any], params: Params
    ) -> MetricResult:
        """1 when the submitted answer matches the reference's (module docstring), else 0."""
        answer = trajectory.answer if trajectory is not None else None
        if answer is None:
            return binary_result(self, False, None, {"extraction": NO_ANSWER})
        right = answer_matches(answer, reference, answer_options(read_params(AgentAnswerParams, params)))
        return binary_result(self, right, answer, {"extraction": extraction_label(bool(answer.strip()))})


@register_metric
class AgentPath(_AgentMetric):
    """``agent_path``: the run called every ``must_call`` tool, no ``must_not_call`` tool, and did not answer
    without evidence (1/0); the run's usage as submetrics."""

    name = "agent_path"
    params_model = AgentPathParams

    def score_trajectory(
        self, trajectory: Trajectory | None, output: str, reference: dict[str, Any], params: Params
    ) -> MetricResult:
        """1 when the path meets the reference's expectations, else 0; ``details`` names what failed."""
        if trajectory is None:
            return binary_result(self, False, None, {"extraction": NO_ANSWER, "path": "no_trajectory"})
        called = trajectory.tools_called
        missing = [t for t in reference.get("must_call", []) if t not in called]
        forbidden = sorted({t for t in reference.get("must_not_call", []) if t in called})
        without_evidence = trajectory.answer is not None and not trajectory.evidence
        allow = read_params(AgentPathParams, params).allow_without_evidence
        ok = not missing and not forbidden and (allow or not without_evidence)
        usage = {
            "agent_steps": len(trajectory.steps),
            "agent_tool_calls": sum(1 for t in called if t != "submit"),
            "agent_tokens": trajectory.prompt_tokens + trajectory.completion_tokens,
            "agent_model_ms": round(trajectory.model_ms, 1),
            "agent_tool_ms": round(trajectory.tool_ms, 1),
            "agent_platform_ms": round(max(0.0, trajectory.wall_ms - trajectory.model_ms - trajectory.tool_ms), 1),
        }
        reasons = [f"missing {','.join(missing)}"] if missing else []
        reasons += [f"forbidden {','.join(forbidden)}"] if forbidden else []
        reasons += ["answered_without_evidence"] if without_evidence and not allow else []
        details = {"path": "; ".join(reasons) or "ok", "stop_reason": trajectory.stop_reason, "submetrics": usage}
        return binary_result(self, ok, ",".join(called), details)


@register_metric
class AgentTraceable(_AgentMetric):
    """``agent_traceable``: the submitted answer is right and the gold answer appears in a tool result (1/0)."""

    name = "agent_traceable"

    def score_trajectory(
        self, trajectory: Trajectory | None, output: str, reference: dict[str, Any], params: Params
    ) -> MetricResult:
        """1 when the answer is right and backed by a successful tool result, else 0."""
        if trajectory is None or trajectory.answer is None:
            return binary_result(self, False, None, {"extraction": NO_ANSWER})
        opts = answer_options(read_params(AgentAnswerParams, params))
        right = answer_matches(trajectory.answer, reference, opts)
        backed = any(answer_matches(result, reference, opts, anywhere=True) for result in trajectory.evidence)
        return binary_result(self, right and backed, trajectory.answer, {"supported": backed})
