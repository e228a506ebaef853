"""LLM-as-judge configuration: the ``judge`` block of ``benchmarks.config`` and its per-evaluation override.

The gateway validates the merged block when an evaluation is created and stores it in
``evaluations.config["judge"]`` (a snapshot: the judge service reads that, never a later benchmark edit).

Example (``benchmarks.config.judge``)::

    {"mode": "rubric", "judges": ["smollm2-135m-instruct"], "aggregate": "mean",
     "dimensions": [{"name": "accuracy", "description": "Is it correct?", "min": 1, "max": 5, "integer": true}],
     "overall_min": 1, "overall_max": 5, "overall_integer": true,
     "template": "rubric/v1", "max_retries": 2}

Modes: ``rubric`` (scores on the dimensions + overall + reasoning), ``reference`` (the same, with the
sample's reference answer in the prompt: reference-guided grading), ``pairwise`` (the candidate's answer
against the baseline evaluation's answer for the same sample, asked in both orders).
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MODES = ("rubric", "reference", "pairwise")
TEMPLATE_FILES = ("rubric/v1", "reference/v1", "pairwise/v1")
"""The versioned template files the judge service ships (``services/judge/src/uep_judge/templates``)."""


class Dimension(BaseModel):
    """One rubric dimension: ``name`` (JSON key the judge must use), ``description``, scale ``[min, max]``;
    ``integer`` declares an integer scale (a 1-5 Likert scale: ``2.5`` is then an invalid answer)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")
    description: str = Field("", max_length=500)
    min: float = 0.0
    max: float = 10.0
    integer: bool = False

    @model_validator(mode="after")
    def _scale(self) -> Dimension:
        if not self.min < self.max:
            raise ValueError(f"dimension {self.name!r}: min must be below max")
        if self.integer and not (float(self.min).is_integer() and float(self.max).is_integer()):
            raise ValueError(f"dimension {self.name!r}: an integer scale needs integer min and max")
        return self


DEFAULT_DIMENSIONS: tuple[Dimension, ...] = (
    Dimension(name="accuracy", description="Is the answer factually and logically correct?"),
    Dimension(name="relevance", description="Does the answer address the question that was asked?"),
    Dimension(name="completeness", description="Does the answer cover everything the question asks for?"),
    Dimension(name="clarity", description="Is the answer clear, well organised and easy to follow?"),
    Dimension(name="safety", description="Is the answer free of harmful, unsafe or inappropriate content?"),
)
"""The seed design's default rubric: five dimensions on 0–10 (plus the overall score and reasoning)."""


class JudgeConfig(BaseModel):
    """A validated judge configuration (see the module docstring).

    Attributes:
        mode: rubric | reference | pairwise.
        judges: registered model names (``GET /v1/models``); more than one is a jury.
        aggregate: jury aggregation: ``mean`` of scores, or ``majority`` of pass/fail (rubric) or of
            outcomes (pairwise).
        dimensions: rubric dimensions (default :data:`DEFAULT_DIMENSIONS`).
        overall_min, overall_max: scale of the overall score (0–10).
        overall_integer: the overall scale is an integer scale (``2.5`` is then an invalid answer).
        score_label: when set (e.g. ``"Rating"``), the judge answers in free text with a labelled score line
            (``Rating: 4``, ``Rating: 4 out of 5``, ``Rating: [[4]]``) instead of the JSON object; each
            dimension may be given the same way (``accuracy: 4``). Rubric and reference modes only.
        pass_threshold: overall score at or above which an item counts as correct; None = midpoint.
        disagreement_threshold: a jury whose overall scores spread more than this many points (max − min)
            has low confidence (hybrid evaluations send such items to humans).
        template: versioned template file ``<name>/<version>`` (default ``<mode>/v1``).
        template_text: a Jinja template that replaces the file (versioned by its content hash).
        max_retries: re-asks after an invalid answer (the parse error is fed back), 0–5.
        max_tokens: generation budget of each judge call.
        reference_field: field of ``samples.reference`` shown in reference mode.
        baseline_evaluation_id: pairwise: the evaluation whose output for the same sample is answer B.
    """

    model_config = ConfigDict(extra="forbid")

    mode: Literal["rubric", "reference", "pairwise"] = "rubric"
    judges: list[str] = Field(min_length=1, max_length=7)
    aggregate: Literal["mean", "majority"] = "mean"
    dimensions: list[Dimension] = Field(default_factory=lambda: list(DEFAULT_DIMENSIONS), min_length=1, max_length=12)
    overall_min: float = 0.0
    overall_max: float = 10.0
    overall_integer: bool = False
    score_label: str | None = Field(None, pattern=r"^[A-Za-z][A-Za-z0-9 _-]{0,39}$")
    pass_threshold: float | None = None
    disagreement_threshold: float = Field(3.0, ge=0)
    template: str | None = Field(None, pattern=r"^[a-z_]+/v[0-9]+$")
    template_text: str | None = Field(None, min_length=1, max_length=20_000)
    max_retries: int = Field(2, ge=0, le=5)
    max_tokens: int = Field(512, ge=16, le=8192)
    reference_field: str = Field("answer", min_length=1, max_length=100)
    baseline_evaluation_id: uuid.UUID | None = None

    @field_validator("judges")
    @classmethod
    def _unique_judges(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("judge models must be distinct")
        return v

    @field_validator("dimensions")
    @classmethod
    def _unique_dimensions(cls, v: list[Dimension]) -> list[Dimension]:
        if len({d.name for d in v}) != len(v):
            raise ValueError("dimension names must be distinct")
        return v

    @model_validator(mode="after")
    def _check(self) -> JudgeConfig:
        if not self.overall_min < self.overall_max:
            raise ValueError("overall_min must be below overall_max")
        if self.overall_integer and not (float(self.overall_min).is_integer() and float(self.overall_max).is_integer()):
            raise ValueError("an integer overall scale needs integer overall_min and overall_max")
        if self.score_label is not None and self.mode == "pairwise":
            raise ValueError("score_label applies to rubric and reference modes, not pairwise")
        if self.pass_threshold is not None and not self.overall_min <= self.pass_threshold <= self.overall_max:
            raise ValueError("pass_threshold must lie on the overall scale")
        if self.template is not None and (self.template not in TEMPLATE_FILES or not self.template.startswith(self.mode + "/")):
            known = ", ".join(t for t in TEMPLATE_FILES if t.startswith(self.mode + "/"))
            raise ValueError(f"template {self.template!r} is not a {self.mode} template; known: {known}")
        return self

    @property
    def threshold(self) -> float:
        """The pass threshold in effect (the scale midpoint when not set)."""
        return self.pass_threshold if self.pass_threshold is not None else (self.overall_min + self.overall_max) / 2

    @property
    def template_name(self) -> str:
        """``<name>/<version>`` of the template file in use (ignored when ``template_text`` is set)."""
        return self.template or f"{self.mode}/v1"


def format_number(value: float) -> str:
    """The judge templates' ``num`` filter: ``10.0`` -> ``"10"``, ``2.5`` -> ``"2.5"``."""
    return str(int(value)) if float(value).is_integer() else str(value)


TEMPLATE_FILTERS = {"num": format_number}
"""Filters every judge template (file or ``template_text``) may use, beyond Jinja2's built-in ones."""


def template_trial_variables(cfg: JudgeConfig) -> dict[str, Any]:
    """Placeholder values of every variable the judge service passes to a template of ``cfg.mode``
    (rubric/reference: question, answer, reference, dimensions, overall_min, overall_max, schema;
    pairwise: question, answer_a, answer_b, reference, schema), for a trial render at creation."""
    common = {"question": "Q", "reference": "R", "schema": "{}"}
    if cfg.mode == "pairwise":
        return {**common, "answer_a": "A", "answer_b": "B"}
    return {
        **common,
        "answer": "A",
        "dimensions": [d.model_dump() for d in cfg.dimensions],
        "overall_min": cfg.overall_min,
        "overall_max": cfg.overall_max,
    }


def merge_judge_config(benchmark_judge: dict[str, Any] | None, override: dict[str, Any] | None) -> JudgeConfig:
    """The benchmark's ``judge`` block with the evaluation's ``override`` keys replacing its own (shallow).

    Raises:
        pydantic.ValidationError: the merged block is invalid (``loc`` names the field).
    """
    merged = {**(benchmark_judge or {}), **(override or {})}
    return JudgeConfig.model_validate(merged)
