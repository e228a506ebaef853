"""Human scores as ScoreComputed events, staged in the outbox in the transaction that completes an item.

Where the score goes:

- task source 'evaluation' (a human evaluation of stored outputs): the task's own evaluation row
  (``result_evaluation_id``, ``config.evaluation_type`` 'human'), same sample/repeat/arm as the source
  item — so it never collides with the source's automatic score;
- task source 'hybrid': the hybrid evaluation's own item, which got no ScoreComputed from the judge
  (it routed the item to humans); ``metrics.decided_by`` = 'human'.

The reporter stores it like any other score (``ON CONFLICT DO NOTHING`` per item) and completes the
evaluation when its last item is in. Answers of annotators flagged (gold accuracy under the task's
threshold) at the moment the item completes are left out of the score; if every annotator of the item is
flagged, all answers are used and ``metrics.flagged_only`` is true.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.events import ScoreComputed
from uep_common.runtime.outbox import add_to_outbox
from uep_common.tables.annotation import Annotation, AnnotationItem, AnnotationTask
from uep_common.tables.models import Evaluation
from uep_gateway.annotation.questions import Question, aggregate, item_score

METRIC_NAME = "human_annotation"
METRIC_VERSION = "1"


async def stage_score(
    session: AsyncSession, task: AnnotationTask, item: AnnotationItem, questions: list[Question], quality: dict[uuid.UUID, Any]
) -> uuid.UUID | None:
    """Stage the ScoreComputed of the completed scored ``item`` in the outbox; returns its event id (None, and
    nothing staged, when the evaluation it would go to no longer exists).

    ``quality``: annotator id → :class:`uep_gateway.annotation.assignment.AnnotatorQuality` (flags).
    """
    rows = list(await session.scalars(select(Annotation).where(Annotation.item_id == item.id).order_by(Annotation.id)))
    kept = [a for a in rows if not (a.annotator_id in quality and quality[a.annotator_id].flagged)]
    flagged_only = not kept
    used = kept or rows
    agg = aggregate(questions, [a.answers for a in used])
    is_correct, score, extracted, metrics = item_score(questions, agg)
    target_id = task.result_evaluation_id if task.source == "evaluation" else item.evaluation_id
    ev = await session.get(Evaluation, target_id)
    if ev is None:  # the evaluation the score would go to was deleted (result_evaluation_id: ON DELETE SET NULL)
        return None
    details = item.source_details or {}
    event = ScoreComputed(
        evaluation_id=ev.id,
        tenant_id=ev.tenant_id,
        sample_id=item.sample_id,
        repeat=item.repeat,
        arm=item.arm,
        attempt=1,
        benchmark_id=ev.benchmark_id,
        model_id=ev.model_id,
        metric_name=METRIC_NAME,
        metric_version=METRIC_VERSION,
        is_correct=is_correct,
        score=score,
        extracted=extracted,
        metrics={
            "decided_by": "human",
            **metrics,
            "annotations": len(used),
            "excluded_flagged": len(rows) - len(kept) if kept else 0,
            "flagged_only": flagged_only,
            "annotation_task_id": str(task.id),
            **({"route_reason": details["route_reason"]} if "route_reason" in details else {}),
        },
        output=(item.content or {}).get("output"),
        # the model call's own numbers travel with a hybrid item (its evaluation has no other score for it);
        # a human evaluation of stored outputs leaves them to the source evaluation (no double counting)
        latency_ms=details.get("latency_ms") if task.source == "hybrid" else None,
        prompt_tokens=details.get("prompt_tokens") if task.source == "hybrid" else None,
        completion_tokens=details.get("completion_tokens") if task.source == "hybrid" else None,
    )
    add_to_outbox(session, event, trace_headers=ev.trace_context or {})
    return event.event_id
