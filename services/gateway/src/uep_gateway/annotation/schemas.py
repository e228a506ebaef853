"""Request and response bodies of the annotation API (pydantic v2; unknown request fields are refused)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from uep_gateway.annotation.questions import Question


class GoldItem(BaseModel):
    """A gold item: an item of the source evaluation (by sample ordinal and repeat) with known answers."""

    model_config = ConfigDict(extra="forbid")

    sample_ordinal: int = Field(ge=0)
    repeat: int = Field(0, ge=0)
    answers: dict[str, Any] = Field(description="Question name → the known answer (comments excluded).")


class AnnotationTaskCreate(BaseModel):
    """``POST /v1/annotation-tasks``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    source: Literal["evaluation", "hybrid"] = Field(
        "evaluation",
        description="'evaluation': annotate the stored outputs of evaluation_id (scores go to a new human evaluation); "
        "'hybrid': annotate the items the hybrid evaluation evaluation_id routed to humans.",
    )
    evaluation_id: uuid.UUID
    compare_evaluation_id: uuid.UUID | None = Field(
        None, description="Pairwise questions: the evaluation whose output for the same sample is answer B."
    )
    questions: list[Question] = Field(min_length=1, max_length=12)
    guidelines: str = Field("", max_length=20_000, description="Shown to annotators with every item (plain text).")
    annotations_per_item: int = Field(3, ge=1, le=50, description="N submitted annotations complete an item.")
    item_limit: int | None = Field(None, ge=1, description="Annotate only the first N items (benchmark order).")
    calibration_sample: int | None = Field(
        None,
        ge=1,
        le=10_000,
        description="Calibrate the judge: annotate N items drawn at random (seeded by calibration_seed) among the "
        "items of evaluation_id that a judge gave a valid verdict (all of them when fewer); source 'evaluation' only.",
    )
    calibration_seed: int = Field(0, ge=0, le=2**31 - 1, description="Seed of the calibration_sample draw.")
    gold: list[GoldItem] = Field(default_factory=list, max_length=500)
    quality_threshold: float = Field(0.7, ge=0, le=1, description="Gold accuracy under this flags an annotator.")
    min_gold_answers: int = Field(2, ge=1, description="Gold answers checked before an annotator can be flagged.")
    gold_rating_tolerance: float = Field(0.0, ge=0, description="A rating within this of the gold rating is correct.")
    assignment_ttl_seconds: int = Field(900, ge=5, le=7 * 86400, description="An unsubmitted assignment expires after this.")
    show_reference: bool = Field(True, description="Show the benchmark's reference answer to annotators.")

    @field_validator("questions")
    @classmethod
    def _names(cls, v: list[Question]) -> list[Question]:
        if len({q.name for q in v}) != len(v):
            raise ValueError("question names must be distinct")
        if not any(q.scored for q in v):
            raise ValueError("at least one rating, pass_fail or pairwise question is needed (comments are not scored)")
        return v


class AnnotationTaskView(BaseModel):
    """An annotation task with its progress."""

    id: uuid.UUID
    name: str
    source: str
    source_evaluation_id: uuid.UUID
    compare_evaluation_id: uuid.UUID | None
    result_evaluation_id: uuid.UUID | None
    questions: list[dict[str, Any]]
    guidelines: str
    annotations_per_item: int
    assignment_ttl_seconds: int
    quality_threshold: float
    min_gold_answers: int
    gold_rating_tolerance: float
    show_reference: bool
    status: str
    total_items: int
    gold_items: int
    completed_items: int
    annotations: int
    created_at: datetime
    completed_at: datetime | None
    links: dict[str, str]


class AnnotatorCreate(BaseModel):
    """``POST /v1/annotators``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200, pattern=r"^[^\s].*$")


class AnnotatorView(BaseModel):
    """An annotator."""

    id: uuid.UUID
    name: str
    created_at: datetime


class TaskProgress(BaseModel):
    """Task progress (scored items complete out of total) and the annotator's own count."""

    completed_items: int
    total_items: int
    annotator_done: int
    annotator_gold_done: int


class NextItem(BaseModel):
    """``GET …/next``: the item to annotate (``item`` None when nothing is left for this annotator)."""

    task_id: uuid.UUID
    annotator: AnnotatorView
    assignment_id: uuid.UUID | None
    expires_at: datetime | None
    item: dict[str, Any] | None = Field(description="{id, sample_ordinal, repeat, arm, prompt, output, output_b, reference}.")
    reason: str | None = Field(None, description="Why no item: 'task_completed' or 'nothing_left_for_annotator'.")
    progress: TaskProgress


class AnnotationSubmit(BaseModel):
    """``POST …/annotations``."""

    model_config = ConfigDict(extra="forbid")

    assignment_id: uuid.UUID
    answers: dict[str, Any]


class AnnotationAccepted(BaseModel):
    """201 answer of a submission."""

    annotation_id: int
    item_id: int
    item_complete: bool
    score_event_id: uuid.UUID | None
    progress: TaskProgress
