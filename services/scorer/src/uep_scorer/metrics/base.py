"""Shared types of the scoring core: the result record, the metric protocol and the errors.

Contract used by every metric module and by the service wiring:

* ``Metric.score(output, reference, params)`` never raises because of what the *model* wrote: an
  unparseable or empty output is an ordinary wrong answer (``is_correct=False``), and an
  infrastructure failure while judging it (e.g. the code sandbox could not start) is
  ``is_correct=None`` with the reason in ``details``.
* It raises :class:`MetricInputError` when the *benchmark data or configuration* is malformed (a
  missing reference key, an unknown ``variant``, a reference letter outside the choice set). That is
  a bug in the dataset or run config, not a property of the model output, so it must surface loudly
  instead of being recorded as a wrong answer.
* A metric that reads an answer out of the output (a number, a letter, a label, a regex capture, the
  output text itself) says whether it found one in ``details["extraction"]``: :data:`NO_ANSWER` when
  nothing could be extracted, :data:`ANSWERED` (or a finer label naming how, e.g. ``"explicit"``)
  otherwise; :func:`extraction_label` gives the two. :attr:`MetricResult.no_answer` reads it; it is what the
  summary's extraction failure rate counts and what routes a hybrid evaluation's item to the judge
  (``uep_scorer.scoring.hybrid_route_reason``). Graded metrics that extract nothing (BLEU, ROUGE) leave it out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

NO_ANSWER = "no_answer"
"""``details["extraction"]`` of a result whose output held no answer to extract."""
ANSWERED = "ok"
"""``details["extraction"]`` of a result whose answer was extracted (metrics may use a finer label)."""


def extraction_label(found: bool) -> str:
    """``details["extraction"]`` for an extraction that ``found`` an answer or not: ``"ok"`` / ``"no_answer"``."""
    return ANSWERED if found else NO_ANSWER


class MetricInputError(ValueError):
    """The reference or params given to a metric are malformed (data/config bug, not a model error)."""


@dataclass(frozen=True)
class MetricResult:
    """Outcome of scoring one model output against one reference.

    Attributes:
        name: metric name, e.g. ``"gsm8k_numeric_exact_match"``.
        version: metric version string (bumped whenever a rule change can alter a verdict), e.g. ``"1"``.
        is_correct: ``True``/``False`` verdict; ``None`` when undecidable because of an infrastructure
            error (nothing extracted is a decidable ``False``).
        score: ``1.0``/``0.0`` for binary metrics, ``None`` together with ``is_correct=None``.
        extracted: the answer extracted from the output in canonical form (``"1234"``, ``"B"``, the
            code that was executed), ``None`` if none was found.
        details: JSON-serialisable diagnostics, e.g. ``{"extraction": "no_answer"}`` or
            ``{"status": "timed_out", "stderr_tail": "..."}``.
    """

    name: str
    version: str
    is_correct: bool | None
    score: float | None
    extracted: str | None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def no_answer(self) -> bool:
        """Whether the metric found no answer in the output (``details["extraction"] == "no_answer"``)."""
        return self.details.get("extraction") == NO_ANSWER


@runtime_checkable
class Metric(Protocol):
    """A named, versioned, stateless scoring rule.

    Implementations must be safe to call concurrently from several threads (e.g. through
    ``asyncio.to_thread``): they keep no mutable state between calls.
    """

    name: str
    version: str
    params: dict[str, str]
    """Parameter name → one-line description with its default (shown by ``uep-scorer metrics``)."""
    source: str
    """Where the rule or formula comes from (paper, reference implementation)."""
    param_types: dict[str, str]
    """Parameter name → type (``bool``, ``number``, ``integer``, ``string``, ``string_list``, ``letters``,
    ``enum:a|b``), checked before scoring by :func:`uep_common.params.param_problems`."""
    required_params: tuple[str, ...]
    """Parameters without a default."""

    def score(self, output: str, reference: dict[str, Any], params: dict[str, Any]) -> MetricResult:
        """Score ``output`` against ``reference``.

        Raises:
            MetricInputError: malformed ``reference`` or ``params`` (never for a bad model output).
        """
        ...


def binary_result(metric: Metric, correct: bool, extracted: str | None, details: dict[str, Any]) -> MetricResult:
    """Build a decided binary result (score 1.0/0.0) for ``metric``."""
    return MetricResult(
        name=metric.name,
        version=metric.version,
        is_correct=correct,
        score=1.0 if correct else 0.0,
        extracted=extracted,
        details=details,
    )
