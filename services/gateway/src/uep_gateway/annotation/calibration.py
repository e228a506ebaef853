"""Recording a calibration: the judge–human agreement of an annotation task
(:func:`uep_gateway.annotation.analysis.judge_agreement`, flagged annotators left out) written as
``judge_calibrations`` rows, one per judge (model × template × version) and scored question, all with one
``computed_at`` (one snapshot). Written when a task over judged items completes
(``POST …/annotations`` of its last item) and on request (``POST /v1/annotation-tasks/{id}/calibration``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.tables.annotation import AnnotationTask
from uep_common.tables.judging import JudgeCalibration
from uep_gateway.annotation.analysis import judge_agreement


async def record_calibration(session: AsyncSession, task: AnnotationTask) -> list[JudgeCalibration]:
    """Add the snapshot of ``task`` to ``session`` (the caller commits) and return its rows (none when no
    judge verdict covers the task's items)."""
    result = await judge_agreement(session, task, exclude_flagged=True)
    rows = []
    now = datetime.now(UTC)
    for judge in result["judges"]:
        for q in judge["questions"]:
            cal: dict[str, Any] = q["calibration"]
            row = JudgeCalibration(
                tenant_id=task.tenant_id,
                task_id=task.id,
                evaluation_id=task.source_evaluation_id,
                judge_model_name=judge["judge_model"],
                template=judge["template"],
                template_version=judge["template_version"],
                question=q["question"],
                question_type=q["type"],
                items=cal["items"],
                agreement=cal["kappa_mean"],
                alpha=cal["alpha"],
                statistics=_jsonable(cal),
                computed_at=now,
            )
            session.add(row)
            rows.append(row)
    await session.flush()
    return rows


def _jsonable(value: Any) -> Any:
    """``value`` with tuple keys and other non-JSON keys as strings (the statistics hold only numbers,
    strings, lists and dicts)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
