"""Creating annotation tasks: their items from an evaluation's stored outputs or from a hybrid evaluation's
human-routed items, gold items, and (for a human evaluation of outputs) the new evaluation row the human
scores are published to.

Hand-out order: the gold items first (a qualification round, so an annotator's accuracy is known before
their answers complete scored items), then the scored items in benchmark order (sample ordinal, repeat).
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.configs import EvaluationType, check_evaluation_config, parse_benchmark_config
from uep_common.contract.events import EvaluationStatus
from uep_common.prompting.prompts import PromptRenderError, render_prompt
from uep_common.runtime.telemetry import current_trace_headers
from uep_common.tables.annotation import AnnotationItem, AnnotationTask
from uep_common.tables.judging import HybridRoute, JudgeVerdict
from uep_common.tables.models import Benchmark, Evaluation, Sample, SampleResult
from uep_gateway.annotation.questions import validate_answers
from uep_gateway.annotation.schemas import AnnotationTaskCreate
from uep_gateway.errors import DomainError, FieldError
from uep_gateway.tenancy import owned


def _prompt(bench: Benchmark, sample: Sample) -> str:
    """The sample's prompt as the benchmark's template renders it (no few-shot demonstrations); the raw input
    fields when the template cannot render."""
    template = parse_benchmark_config(bench.config).template
    if template:
        try:
            return render_prompt(template, sample.input)
        except PromptRenderError:
            pass
    return "\n".join(f"{k}: {v}" for k, v in sample.input.items())


def _reference(sample: Sample) -> str | None:
    ref = sample.reference
    if isinstance(ref, dict):
        if set(ref) == {"answer"}:
            return str(ref["answer"])
        return "\n".join(f"{k}: {v}" for k, v in ref.items()) or None
    return None if ref is None else str(ref)


async def _evaluation(session: AsyncSession, evaluation_id: uuid.UUID, field: str) -> Evaluation:
    """The caller's evaluation ``evaluation_id``; 422 naming ``body.<field>`` otherwise (also for another
    tenant's)."""
    return await owned(session, Evaluation, evaluation_id, ("body", field), "evaluation", kind="invalid")


async def _outputs(session: AsyncSession, evaluation_id: uuid.UUID) -> dict[tuple[uuid.UUID, int], tuple[SampleResult, Sample]]:
    """Stored results with an output, keyed by (sample, repeat), in benchmark order."""
    rows = await session.execute(
        select(SampleResult, Sample)
        .join(Sample, Sample.id == SampleResult.sample_id)
        .where(SampleResult.evaluation_id == evaluation_id, SampleResult.output.is_not(None))
        .order_by(Sample.ordinal, SampleResult.repeat, SampleResult.arm)
    )
    return {(r.sample_id, r.repeat): (r, s) for r, s in rows.all()}


def _candidate(
    ev: Evaluation,
    sample: Sample,
    repeat: int,
    arm: str,
    bench: Benchmark,
    content: dict[str, Any],
    show_ref: bool,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "evaluation_id": ev.id,
        "sample_id": sample.id,
        "repeat": repeat,
        "arm": arm,
        "sample_ordinal": sample.ordinal,
        "content": {"prompt": _prompt(bench, sample), **content, "reference": _reference(sample) if show_ref else None},
        "source_details": details or {},
    }


async def _from_evaluation(
    session: AsyncSession, body: AnnotationTaskCreate, ev: Evaluation, bench: Benchmark
) -> dict[tuple[int, int], dict[str, Any]]:
    """Candidates ((ordinal, repeat) → item fields) from the stored outputs of ``ev`` (and of the compare
    evaluation as answer B)."""
    pairwise = any(q.type == "pairwise" for q in body.questions)
    if pairwise and body.compare_evaluation_id is None:
        raise FieldError(
            "invalid",
            ("body", "compare_evaluation_id"),
            "pairwise questions need a compare_evaluation_id (answer B)",
            "missing_compare_evaluation",
        )
    outputs = await _outputs(session, ev.id)
    other: dict[tuple[uuid.UUID, int], Any] = {}
    if body.compare_evaluation_id is not None:
        cmp_ev = await _evaluation(session, body.compare_evaluation_id, "compare_evaluation_id")
        if cmp_ev.benchmark_id != ev.benchmark_id:
            raise FieldError(
                "invalid",
                ("body", "compare_evaluation_id"),
                "the compare evaluation ran another benchmark version",
                "benchmark_mismatch",
            )
        other = await _outputs(session, cmp_ev.id)
    out: dict[tuple[int, int], dict[str, Any]] = {}
    for (sample_id, repeat), (r, s) in outputs.items():
        content = {"output": r.output, "output_b": None}
        if body.compare_evaluation_id is not None:
            if (sample_id, repeat) not in other:
                continue
            content["output_b"] = other[(sample_id, repeat)][0].output
        details = {"metric_name": r.metric_name, "is_correct": r.is_correct}
        out[(s.ordinal, repeat)] = _candidate(ev, s, repeat, r.arm, bench, content, body.show_reference, details)
    return out


async def _from_hybrid(
    session: AsyncSession, body: AnnotationTaskCreate, ev: Evaluation, bench: Benchmark
) -> tuple[dict[tuple[int, int], dict[str, Any]], dict[tuple[int, int], dict[str, Any]]]:
    """``(scored candidates, gold candidates)``: the items ``ev`` routed to humans (``hybrid_routes`` stage
    'human') and, as possible gold items, its items already decided (stored results).

    A routed item has no stored result, so what the annotator sees comes from the route's ``details``, written
    by the judge service: ``output`` (required), ``prompt`` (default: the benchmark template rendered again),
    ``output_b`` / ``baseline_output`` (pairwise), and the model call's ``latency_ms``, ``prompt_tokens``,
    ``completion_tokens`` (carried to the ScoreComputed)."""
    if body.compare_evaluation_id is not None:
        raise FieldError(
            "invalid", ("body", "compare_evaluation_id"), "hybrid tasks take answer B from the routed items", "unexpected_field"
        )
    rows = await session.execute(
        select(HybridRoute, Sample)
        .join(Sample, Sample.id == HybridRoute.sample_id)
        .where(HybridRoute.evaluation_id == ev.id, HybridRoute.stage == "human")
        .order_by(Sample.ordinal, HybridRoute.repeat, HybridRoute.arm)
    )
    routed: dict[tuple[int, int], dict[str, Any]] = {}
    for route, s in rows.all():
        d = route.details or {}
        content = {
            "output": d.get("output"),
            "output_b": d.get("output_b") or d.get("baseline_output"),
            **({"prompt": d["prompt"]} if d.get("prompt") else {}),
        }
        details: dict[str, Any] = {
            "route_reason": route.reason,
            **{k: d[k] for k in ("latency_ms", "prompt_tokens", "completion_tokens") if k in d},
        }
        routed[(s.ordinal, route.repeat)] = _candidate(
            ev, s, route.repeat, route.arm, bench, content, body.show_reference, details
        )
    if any(c["content"]["output"] is None for c in routed.values()):
        raise FieldError(
            "invalid",
            ("body", "evaluation_id"),
            "the routed items carry no output to annotate (hybrid_routes.details.output, written by the judge service)",
            "missing_output",
        )
    if any(q.type == "pairwise" for q in body.questions) and any(c["content"]["output_b"] is None for c in routed.values()):
        raise FieldError(
            "invalid", ("body", "questions"), "pairwise questions need answer B; the routed items have none", "missing_answer_b"
        )
    decided = {
        (s.ordinal, r.repeat): _candidate(
            ev, s, r.repeat, r.arm, bench, {"output": r.output, "output_b": None}, body.show_reference
        )
        for (_, _), (r, s) in (await _outputs(session, ev.id)).items()
    }
    return routed, decided


async def _calibration_sample(
    session: AsyncSession, body: AnnotationTaskCreate, ev: Evaluation, scored: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``body.calibration_sample`` of the ``scored`` candidates that a judge gave a valid verdict, drawn by
    ``random.Random(calibration_seed).sample`` (all of them when fewer), in benchmark order. Raises 422 naming
    ``body.calibration_sample`` for a hybrid task or an evaluation without a valid verdict."""
    loc = ("body", "calibration_sample")
    if body.source != "evaluation":
        raise FieldError("invalid", loc, "a calibration sample is drawn from a judged evaluation's stored outputs", "not_judged")
    judged = set(
        (
            await session.execute(
                select(JudgeVerdict.sample_id, JudgeVerdict.repeat, JudgeVerdict.arm)
                .where(JudgeVerdict.evaluation_id == ev.id, JudgeVerdict.valid.is_(True))
                .distinct()
            )
        ).tuples()
    )
    pool = [c for c in scored if (c["sample_id"], c["repeat"], c["arm"]) in judged]
    if not pool:
        raise FieldError("invalid", loc, f"evaluation {ev.id} has no item with a valid judge verdict", "not_judged")
    n = min(body.calibration_sample or 0, len(pool))
    picked = {id(c) for c in random.Random(body.calibration_seed).sample(pool, n)}
    return [c for c in pool if id(c) in picked]


async def create_task(session: AsyncSession, body: AnnotationTaskCreate) -> AnnotationTask:
    """Validate ``body``, then add the task, its items and (source 'evaluation') its human evaluation row to
    ``session`` (the caller commits). Nothing is added when a check fails.

    Raises:
        FieldError/DomainError (422): unknown evaluation, pairwise without answer B, no items, a gold item that
            is not an item of the source or whose answers are invalid, a calibration sample of an evaluation
            no judge gave a valid verdict.
    """
    ev = await _evaluation(session, body.evaluation_id, "evaluation_id")
    bench = await session.get(Benchmark, ev.benchmark_id)
    assert bench is not None  # evaluations.benchmark_id: a NOT NULL foreign key (no ON DELETE)
    if body.source == "evaluation":
        candidates = await _from_evaluation(session, body, ev, bench)
        gold_pool = candidates
    else:
        candidates, gold_pool = await _from_hybrid(session, body, ev, bench)

    problems: list[dict[str, Any]] = []
    gold: dict[tuple[int, int], dict[str, Any]] = {}
    for i, g in enumerate(body.gold):
        key = (g.sample_ordinal, g.repeat)
        if key not in gold_pool and key not in candidates:
            problems.append(
                {
                    "loc": ["body", "gold", i, "sample_ordinal"],
                    "msg": f"item (sample_ordinal {g.sample_ordinal}, repeat {g.repeat}) has no output to annotate",
                    "type": "unknown_item",
                }
            )
            continue
        if key in gold:
            problems.append({"loc": ["body", "gold", i], "msg": "duplicate gold item", "type": "duplicate_item"})
            continue
        answers, errs = validate_answers(body.questions, g.answers, ("body", "gold", i, "answers"), partial=True)
        problems += errs
        gold[key] = {**(gold_pool.get(key) or candidates[key]), "gold_answers": answers}
    if problems:
        raise DomainError("invalid", problems)
    scored = [c for key, c in candidates.items() if key not in gold]
    if body.calibration_sample:
        scored = await _calibration_sample(session, body, ev, scored)
    if body.item_limit:
        scored = scored[: body.item_limit]
    if not scored:
        raise FieldError(
            "invalid",
            ("body", "evaluation_id"),
            "no items to annotate: "
            + ("no stored outputs, or every one is gold" if body.source == "evaluation" else "no item was routed to humans"),
            "no_items",
        )

    task_id = uuid.uuid4()
    result_evaluation_id = ev.id
    if body.source == "evaluation":
        result_evaluation_id = uuid.uuid4()
        # A new evaluation whose items are the annotated items: its ScoreComputed (stored by the reporter)
        # never collide with the automatic scores of the source. dispatched_items = total_items, so the
        # scheduler never dispatches an item of it to a model; the reporter completes it by its normal path
        # when the last item's ScoreComputed is stored.
        session.add(
            Evaluation(
                id=result_evaluation_id,
                tenant_id=ev.tenant_id,
                benchmark_id=ev.benchmark_id,
                model_id=ev.model_id,
                status=EvaluationStatus.running.value,  # born running: annotators, not the scheduler, drive it
                priority="normal",
                sample_limit=None,
                repeats=ev.repeats,
                total_items=len(scored),
                dispatched_items=len(scored),
                arm=ev.arm,
                config=check_evaluation_config(
                    {
                        "evaluation_type": EvaluationType.human.value,
                        "source_evaluation_id": str(ev.id),
                        "annotation_task_id": str(task_id),
                        **({"compare_evaluation_id": str(body.compare_evaluation_id)} if body.compare_evaluation_id else {}),
                    }
                ),
                trace_context=current_trace_headers(),
                started_at=datetime.now(UTC),
            )
        )
        await session.flush()  # the evaluation row before the task that refers to it (no ORM relationship)
    task = AnnotationTask(
        id=task_id,
        tenant_id=ev.tenant_id,
        name=body.name,
        source=body.source,
        source_evaluation_id=ev.id,
        compare_evaluation_id=body.compare_evaluation_id,
        result_evaluation_id=result_evaluation_id,
        questions=[q.model_dump() for q in body.questions],
        guidelines=body.guidelines,
        annotations_per_item=body.annotations_per_item,
        assignment_ttl_seconds=body.assignment_ttl_seconds,
        quality_threshold=body.quality_threshold,
        min_gold_answers=body.min_gold_answers,
        gold_rating_tolerance=body.gold_rating_tolerance,
        show_reference=body.show_reference,
        status="open",
        total_items=len(scored),
        gold_items=len(gold),
    )
    session.add(task)
    await session.flush()  # the task row before its items (foreign key)
    for position, c in enumerate([*gold.values(), *scored]):
        is_gold = "gold_answers" in c
        session.add(
            AnnotationItem(
                task_id=task_id,
                position=position,
                evaluation_id=c["evaluation_id"],
                sample_id=c["sample_id"],
                repeat=c["repeat"],
                arm=c["arm"],
                sample_ordinal=c["sample_ordinal"],
                is_gold=is_gold,
                gold_answers=c.get("gold_answers"),
                content=c["content"],
                source_details=c["source_details"],
                submitted_count=0,
                status="open",
            )
        )
    return task
