"""Questions of an annotation task: their specs, answer validation, gold checks and per-item aggregation.

Question types and answer values:

=========== =============================== ============================================================
type        answer                          aggregate of one item (over its annotators)
=========== =============================== ============================================================
rating      integer in [scale_min, max]     mean; normalised score (mean - min) / (max - min) in [0, 1]
pass_fail   "pass" | "fail"                 pass rate; majority verdict (None on a tie)
pairwise    "a" | "b" | "tie" (allow_tie)   A win rate (a = 1, tie = 0.5, b = 0); majority (None on a tie)
comment     free text (≤ 5000 characters)   the comments, never scored
=========== =============================== ============================================================

The *primary* question (the first scored one) gives the item's ScoreComputed ``score`` and ``is_correct``
(pass_fail: majority pass; pairwise: majority prefers A; rating: None — a graded score).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

QuestionType = Literal["rating", "pass_fail", "pairwise", "comment"]
SCORED_TYPES = ("rating", "pass_fail", "pairwise")
PASS_FAIL = ("pass", "fail")
PAIRWISE = ("a", "b", "tie")
MAX_COMMENT = 5000


class Question(BaseModel):
    """One question of a task. ``name`` is the answer key (and the dimension of agreement and scores)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,62}$", description="Answer key, e.g. 'correct'.")
    type: QuestionType
    prompt: str = Field("", max_length=1000, description="What the annotator is asked; default: the name.")
    scale_min: int = Field(1, ge=0, le=100, description="rating: lowest value.")
    scale_max: int = Field(5, ge=1, le=100, description="rating: highest value.")
    allow_tie: bool = Field(True, description="pairwise: 'tie' is a valid answer.")
    required: bool | None = Field(None, description="Default: true, except for comment questions.")

    @model_validator(mode="after")
    def _check(self) -> Question:
        if self.type == "rating" and not self.scale_min < self.scale_max:
            raise ValueError(f"rating question {self.name!r}: scale_min must be below scale_max")
        if self.type == "rating" and self.scale_max - self.scale_min > 10:
            raise ValueError(f"rating question {self.name!r}: at most 11 scale points (keyboard digits)")
        if self.required is None:
            object.__setattr__(self, "required", self.type != "comment")
        if not self.prompt:
            object.__setattr__(self, "prompt", self.name.replace("_", " "))
        return self

    @property
    def scored(self) -> bool:
        """Whether answers to this question are numbers/labels (not free text)."""
        return self.type in SCORED_TYPES


def parse_questions(raw: list[dict[str, Any]]) -> list[Question]:
    """Question specs as stored in ``annotation_tasks.questions``."""
    return [Question.model_validate(q) for q in raw]


def primary_question(questions: list[Question]) -> Question:
    """The first scored question (tasks are validated to have one)."""
    return next(q for q in questions if q.scored)


def _problem(loc: tuple[Any, ...], msg: str, type_: str) -> dict[str, Any]:
    return {"loc": list(loc), "msg": msg, "type": type_}


def validate_answer(q: Question, value: Any) -> tuple[Any, str | None]:
    """``(clean value, None)`` or ``(None, reason)`` for one answer to ``q``."""
    if q.type == "rating":
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
            return None, f"must be an integer from {q.scale_min} to {q.scale_max}"
        if not q.scale_min <= value <= q.scale_max:
            return None, f"{value} is outside the scale {q.scale_min}..{q.scale_max}"
        return int(value), None
    if q.type == "pass_fail":
        if value not in PASS_FAIL:
            return None, "must be 'pass' or 'fail'"
        return value, None
    if q.type == "pairwise":
        allowed = PAIRWISE if q.allow_tie else PAIRWISE[:2]
        if value not in allowed:
            return None, "must be one of " + ", ".join(repr(a) for a in allowed)
        return value, None
    if not isinstance(value, str) or len(value) > MAX_COMMENT:
        return None, f"must be text of at most {MAX_COMMENT} characters"
    return value, None


def validate_answers(
    questions: list[Question], answers: Any, loc: tuple[Any, ...] = ("body", "answers"), partial: bool = False
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Check ``answers`` (question name → value) against ``questions``.

    Returns ``(clean answers, problems)``; each problem is ``{"loc", "msg", "type"}`` naming the question.
    ``partial`` (gold answers) skips the required check but needs at least one scored answer.
    """
    if not isinstance(answers, dict):
        return {}, [_problem(loc, "must be an object of question name → answer", "invalid_answers")]
    by_name = {q.name: q for q in questions}
    clean: dict[str, Any] = {}
    problems = [
        _problem((*loc, name), f"unknown question {name!r}", "unknown_question") for name in answers if name not in by_name
    ]
    for q in questions:
        value = answers.get(q.name)
        if value is None or (q.type == "comment" and value == ""):
            if q.required and not partial:
                problems.append(_problem((*loc, q.name), "an answer is required", "missing_answer"))
            continue
        if partial and q.type == "comment":
            problems.append(_problem((*loc, q.name), "comments have no known answer", "invalid_answer"))
            continue
        v, reason = validate_answer(q, value)
        if reason:
            problems.append(_problem((*loc, q.name), reason, "invalid_answer"))
        else:
            clean[q.name] = v
    if partial and not problems and not clean:
        problems.append(_problem(loc, "a gold item needs the known answer of at least one question", "missing_answer"))
    return clean, problems


def gold_check(
    questions: list[Question], gold: dict[str, Any], answers: dict[str, Any], rating_tolerance: float = 0.0
) -> tuple[int, int]:
    """``(checked, correct)``: questions with a known answer that the annotator answered, and how many
    matched (rating: ``|answer - gold| <= rating_tolerance``; others: equal)."""
    checked = correct = 0
    for q in questions:
        if q.name not in gold or q.name not in answers or not q.scored:
            continue
        checked += 1
        if q.type == "rating":
            correct += abs(answers[q.name] - gold[q.name]) <= rating_tolerance
        else:
            correct += answers[q.name] == gold[q.name]
    return checked, correct


def _majority(values: list[str]) -> str | None:
    counts = Counter(values).most_common()
    if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]


def aggregate(questions: list[Question], answer_sets: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per question, the aggregate of one item's answers (``answer_sets``: one dict per annotator).

    rating → ``{"n", "mean", "normalized"}``; pass_fail → ``{"n", "pass_rate", "majority"}``;
    pairwise → ``{"n", "a_win_rate", "majority"}`` (a = 1, tie = 0.5, b = 0); comment → ``{"n", "comments"}``.
    Means and rates are None when nobody answered.
    """
    out: dict[str, dict[str, Any]] = {}
    for q in questions:
        vals = [a[q.name] for a in answer_sets if a.get(q.name) not in (None, "")]
        n = len(vals)
        if q.type == "rating":
            mean = sum(vals) / n if n else None
            norm = (mean - q.scale_min) / (q.scale_max - q.scale_min) if mean is not None else None
            out[q.name] = {"n": n, "mean": mean, "normalized": norm}
        elif q.type == "pass_fail":
            out[q.name] = {"n": n, "pass_rate": vals.count("pass") / n if n else None, "majority": _majority(vals)}
        elif q.type == "pairwise":
            wins = sum({"a": 1.0, "tie": 0.5, "b": 0.0}[v] for v in vals)
            out[q.name] = {"n": n, "a_win_rate": wins / n if n else None, "majority": _majority(vals)}
        else:
            out[q.name] = {"n": n, "comments": vals}
    return out


def item_score(
    questions: list[Question], agg: dict[str, dict[str, Any]]
) -> tuple[bool | None, float | None, str | None, dict[str, Any]]:
    """``(is_correct, score, extracted, metrics)`` of one item for its ScoreComputed, from :func:`aggregate`.

    The primary question decides ``score`` and ``is_correct`` (see the module docstring); ``metrics`` holds
    every scored question: ``<name>_mean`` / ``<name>_normalized`` (rating), ``<name>_pass_rate``
    (pass_fail), ``<name>_a_win_rate`` (pairwise).
    """
    metrics: dict[str, Any] = {}
    for q in questions:
        a = agg[q.name]
        if q.type == "rating":
            metrics[f"{q.name}_mean"] = a["mean"]
            metrics[f"{q.name}_normalized"] = a["normalized"]
        elif q.type == "pass_fail":
            metrics[f"{q.name}_pass_rate"] = a["pass_rate"]
        elif q.type == "pairwise":
            metrics[f"{q.name}_a_win_rate"] = a["a_win_rate"]
    p = primary_question(questions)
    a = agg[p.name]
    if p.type == "rating":
        return None, a["normalized"], None if a["mean"] is None else f"{a['mean']:g}", metrics
    if p.type == "pass_fail":
        verdict = {"pass": True, "fail": False}.get(a["majority"])
        return verdict, a["pass_rate"], a["majority"], metrics
    verdict = {"a": True, "b": False}.get(a["majority"])
    return verdict, a["a_win_rate"], a["majority"], metrics
