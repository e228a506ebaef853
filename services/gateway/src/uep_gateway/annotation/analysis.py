"""Reading a task's annotations back: per-item results, inter-annotator agreement per question, and
judge–human agreement per judge model and template version.

``exclude_flagged``: answers of annotators flagged now (gold accuracy under the task's threshold, see
:func:`uep_gateway.annotation.assignment.quality`) are left out.
"""

from __future__ import annotations

import math
import uuid
from collections import defaultdict
from typing import Any

from pydantic import ValidationError
from sqlalchemy import select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.configs import parse_evaluation_config
from uep_common.contract.judge_config import JudgeConfig
from uep_common.tables.annotation import Annotation, AnnotationItem, AnnotationTask
from uep_common.tables.judging import JudgeVerdict
from uep_common.tables.models import Evaluation
from uep_gateway.annotation.agreement import alpha, question_agreement
from uep_gateway.annotation.assignment import AnnotatorQuality, quality
from uep_gateway.annotation.calibration_stats import Kind, judge_vs_humans, rescale
from uep_gateway.annotation.questions import Question, aggregate, parse_questions


async def load_answers(
    session: AsyncSession, task: AnnotationTask, exclude_flagged: bool, items: list[AnnotationItem] | None = None
) -> tuple[dict[int, list[tuple[Annotation, AnnotatorQuality]]], dict[uuid.UUID, AnnotatorQuality]]:
    """``(item id → [(annotation, annotator quality)], annotator id → quality)``, optionally for ``items`` only."""
    qual = await quality(session, task)
    q = select(Annotation).where(Annotation.task_id == task.id).order_by(Annotation.id)
    if items is not None:
        q = q.where(Annotation.item_id.in_([i.id for i in items]))
    by_item: dict[int, list[Any]] = defaultdict(list)
    for a in await session.scalars(q):
        aq = qual[a.annotator_id]
        if exclude_flagged and aq.flagged:
            continue
        by_item[a.item_id].append((a, aq))
    return by_item, qual


async def task_agreement(session: AsyncSession, task: AnnotationTask, exclude_flagged: bool) -> dict[str, Any]:
    """Krippendorff's alpha of every scored question over all the task's items (gold included: they are
    annotated by everyone) and annotators: ``{"exclude_flagged", "excluded_annotators", "questions": [...]}``
    (each entry as :func:`uep_gateway.annotation.agreement.question_agreement` returns)."""
    questions = parse_questions(task.questions)
    by_item, qual = await load_answers(session, task, exclude_flagged)
    out = []
    for q in questions:
        if not q.scored:
            continue
        units = {item_id: {aq.name: a.answers.get(q.name) for a, aq in rows} for item_id, rows in by_item.items()}
        out.append(question_agreement(q, units))
    excluded = sorted(aq.name for aq in qual.values() if aq.flagged) if exclude_flagged else []
    return {"exclude_flagged": exclude_flagged, "excluded_annotators": excluded, "questions": out}


def _judge_value(q: Question, v: JudgeVerdict, cfg: JudgeConfig | None) -> float | str | None:
    """The judge's answer to human question ``q`` from one verdict: a rating as a fraction of its scale
    (the dimension named like the question, or the overall score for a question named 'overall');
    pass/fail from the overall score against the judge's pass threshold; pairwise from the candidate's
    outcome (candidate = answer A)."""
    if q.type == "rating":
        if q.name in (v.scores or {}) and v.scores[q.name] is not None:
            dim = next((d for d in (cfg.dimensions if cfg else []) if d.name == q.name), None)
            lo, hi = (dim.min, dim.max) if dim else (0.0, 10.0)
            return (float(v.scores[q.name]) - lo) / (hi - lo)
        if q.name == "overall" and v.overall is not None:
            lo, hi = (cfg.overall_min, cfg.overall_max) if cfg else (0.0, 10.0)
            return (v.overall - lo) / (hi - lo)
        return None
    if q.type == "pass_fail":
        if v.overall is None:
            return None
        return "pass" if v.overall >= (cfg.threshold if cfg else 5.0) else "fail"
    if q.type == "pairwise":
        return {"win": "a", "loss": "b", "tie": "tie"}.get(v.candidate_outcome or "")
    return None


def _combine(values: list[Any]) -> float | str | None:
    """One judge's value for an item from its verdicts (pairwise: both orders; disagreeing orders = tie)."""
    values = [x for x in values if x is not None]
    if not values:
        return None
    first: float | str = values[0]
    if isinstance(first, float):
        mean: float = sum(values) / len(values)
        return mean
    return first if len(set(values)) == 1 else "tie"


def calibration(
    q: Question, judged: dict[tuple[Any, ...], Any], annotations: dict[str, dict[tuple[Any, ...], dict[str, Any]]]
) -> dict[str, Any]:
    """The judge's agreement with each annotator on question ``q``
    (:func:`uep_gateway.annotation.calibration_stats.judge_vs_humans`): ``judged`` item → the judge's value as
    :func:`_combine` gives it (a rating as a fraction of the judge's scale, put on the question's integer
    points by :func:`uep_gateway.annotation.calibration_stats.rescale`); ``annotations`` annotator → item → answers."""
    kind: Kind = "scale" if q.type == "rating" else "labels"
    if q.type == "rating":
        domain: list[Any] = list(range(q.scale_min, q.scale_max + 1))
        judge = {k: rescale(float(v), 0.0, 1.0, q.scale_min, q.scale_max) for k, v in judged.items()}
    else:
        domain = ["fail", "pass"] if q.type == "pass_fail" else ["a", "b", "tie"]
        judge = dict(judged)
    humans = {
        name: {k: a[q.name] for k, a in by_item.items() if a.get(q.name) is not None} for name, by_item in annotations.items()
    }
    return {"kind": kind, **judge_vs_humans(judge, {n: h for n, h in humans.items() if h}, domain, kind)}


def _human_value(q: Question, agg: dict[str, Any]) -> float | str | None:
    value: float | str | None = agg["normalized"] if q.type == "rating" else agg["majority"]
    return value


async def judge_agreement(session: AsyncSession, task: AnnotationTask, exclude_flagged: bool) -> dict[str, Any]:
    """Agreement between each judge (model × template × template version) and the humans, per question.

    Reads the judge service's valid ``judge_verdicts`` of the task's items. For each item the humans'
    value is their consensus (rating: mean as a fraction of the scale; pass/fail and pairwise: majority,
    items without a majority left out) and the judge's value is taken by :func:`_judge_value`. Reported:
    ``n`` (items with both), ``alpha`` (Krippendorff, two coders judge and humans: interval on the [0, 1]
    rating fractions, nominal otherwise), ``agreement`` (pass/fail, pairwise: share of equal answers) and
    ``mean_abs_diff`` (rating, in scale fractions), and ``calibration`` (the judge against each annotator:
    kappa, weighted kappa, Krippendorff's alpha with the judge as a coder, Spearman, confusion; see
    :func:`calibration`).
    """
    questions = [q for q in parse_questions(task.questions) if q.scored]
    items = list(await session.scalars(select(AnnotationItem).where(AnnotationItem.task_id == task.id)))
    by_item, _ = await load_answers(session, task, exclude_flagged, items)
    human: dict[tuple[Any, ...], dict[str, Any]] = {}
    per_annotator: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = defaultdict(dict)
    for it in items:
        rows = by_item.get(it.id)
        if rows:
            for a, aq in rows:
                per_annotator[aq.name][(it.evaluation_id, it.sample_id, it.repeat, it.arm)] = a.answers
            agg = aggregate(questions, [a.answers for a, _ in rows])
            human[(it.evaluation_id, it.sample_id, it.repeat, it.arm)] = {q.name: _human_value(q, agg[q.name]) for q in questions}
    if not human:
        return {"exclude_flagged": exclude_flagged, "judges": []}
    keys = list(human)
    verdicts = list(
        await session.scalars(
            select(JudgeVerdict).where(
                tuple_(JudgeVerdict.evaluation_id, JudgeVerdict.sample_id, JudgeVerdict.repeat, JudgeVerdict.arm).in_(keys),
                JudgeVerdict.valid.is_(True),
            )
        )
    )
    configs: dict[uuid.UUID, JudgeConfig | None] = {}
    for ev_id in {v.evaluation_id for v in verdicts}:
        ev = await session.get(Evaluation, ev_id)
        assert ev is not None  # judge_verdicts.evaluation_id: a NOT NULL foreign key, ON DELETE CASCADE
        try:
            configs[ev_id] = parse_evaluation_config(ev.config).judge
        except ValidationError:
            configs[ev_id] = None
    groups: dict[tuple[Any, ...], dict[tuple[Any, ...], list[JudgeVerdict]]] = defaultdict(lambda: defaultdict(list))
    for v in verdicts:
        groups[(v.judge_model_name, v.template, v.template_version)][(v.evaluation_id, v.sample_id, v.repeat, v.arm)].append(v)
    judges = []
    for (model, template, version), per_item in sorted(groups.items()):
        dims = []
        for q in questions:
            pairs = []
            judged: dict[tuple[Any, ...], Any] = {}
            for key, vs in per_item.items():
                j = _combine([_judge_value(q, v, configs.get(v.evaluation_id)) for v in vs])
                if j is not None:
                    judged[key] = j
                h = human[key][q.name]
                if j is not None and h is not None:
                    pairs.append((j, h))
            entry: dict[str, Any] = {"question": q.name, "type": q.type, "n": len(pairs), "alpha": None, "reason": None}
            if q.type == "rating":
                data = [[j for j, _ in pairs], [h for _, h in pairs]]
                entry["alpha"], entry["reason"] = alpha(data, "interval") if pairs else (None, "too_few_pairable_values")
                entry["mean_abs_diff"] = sum(abs(j - h) for j, h in pairs) / len(pairs) if pairs else None
            else:
                domain = {"pass_fail": ["fail", "pass"], "pairwise": ["a", "b", "tie"]}[q.type]
                data = [[float(domain.index(str(j))) for j, _ in pairs], [float(domain.index(h)) for _, h in pairs]]
                entry["alpha"], entry["reason"] = (
                    alpha(data, "nominal", list(map(float, range(len(domain))))) if pairs else (None, "too_few_pairable_values")
                )
                entry["agreement"] = sum(j == h for j, h in pairs) / len(pairs) if pairs else None
            if entry["alpha"] is not None and math.isnan(entry["alpha"]):
                entry["alpha"], entry["reason"] = None, "no_variation"
            entry["calibration"] = calibration(q, judged, per_annotator)
            dims.append(entry)
        judges.append(
            {"judge_model": model, "template": template, "template_version": version, "items": len(per_item), "questions": dims}
        )
    return {"exclude_flagged": exclude_flagged, "judges": judges}
