"""The judge page's reads: every judge of the caller's tenant with its use, cost and calibration history.

- ``GET /v1/judges``: per judge model (as named in its verdicts): verdicts, invalid verdicts, evaluations
  judged, cost charged (``spend_ledger`` role ``judge``) and mean cost per verdict, its standing (newest
  calibration, flagged under ``UEP_JUDGE_MIN_AGREEMENT``; :mod:`uep_common.analytics.judge_standing`) and
  its calibration history (one entry per snapshot, newest first).
- ``GET /v1/judges/calibrations?judge_model=&task_id=``: the stored calibration rows with every statistic.
- ``GET /v1/judges/costs?evaluation_id=``: judge cost per evaluation and judge model, per verdict.

Every read is of the caller's tenant only (explicit ``tenant_id`` filters on top of row-level security);
an ``evaluation_id`` or ``task_id`` of another tenant is 404 naming it, as an unknown one is.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.analytics.judge_standing import judge_costs, judge_standings
from uep_common.contract.costs import currency
from uep_common.tables.annotation import AnnotationTask
from uep_common.tables.judging import JudgeCalibration
from uep_common.tables.models import Evaluation
from uep_gateway.deps import db_session
from uep_gateway.tenancy import caller_tenant_id, owned, tenant_filter
from uep_gateway.validation import NUL_CHECK

router = APIRouter(prefix="/v1/judges", tags=["judges"], dependencies=NUL_CHECK)
HISTORY_PER_JUDGE = 50
MAX_CALIBRATION_ROWS = 2000

_USE = text(
    "WITH v AS (SELECT judge_model_id, min(judge_model_name) AS name, count(*) AS verdicts, "
    "count(*) FILTER (WHERE NOT valid) AS invalid, count(DISTINCT evaluation_id) AS evaluations, "
    "max(created_at) AS last_used FROM judge_verdicts WHERE tenant_id = :t GROUP BY judge_model_id), "
    "c AS (SELECT model_id, sum(settled) AS cost FROM spend_ledger WHERE tenant_id = :t AND role = 'judge' "
    "GROUP BY model_id) "
    "SELECT v.name, sum(v.verdicts) AS verdicts, sum(v.invalid) AS invalid, sum(v.evaluations) AS evaluations, "
    "max(v.last_used) AS last_used, sum(coalesce(c.cost, 0)) AS cost FROM v "
    "LEFT JOIN c ON c.model_id = v.judge_model_id GROUP BY v.name ORDER BY v.name"
)


class Snapshot(BaseModel):
    """One calibration of a judge: the rows written together for one annotation task."""

    computed_at: datetime
    task_id: uuid.UUID
    evaluation_id: uuid.UUID
    agreement: float | None = Field(description="Lowest per-question agreement (mean kappa with the annotators).")
    alpha: float | None = Field(description="Lowest per-question Krippendorff's alpha with the judge as a coder.")
    items: int = Field(description="Most items of any question that both judge and annotators answered.")
    flagged: bool
    questions: list[dict[str, Any]]


class JudgeView(BaseModel):
    """A judge model of the tenant: its use, cost, standing and calibration history."""

    judge_model: str
    verdicts: int
    invalid_verdicts: int
    evaluations: int
    last_used: datetime | None
    cost: float = Field(description="Judge calls charged to the tenant's evaluations, in the site currency.")
    cost_per_verdict: float | None
    agreement: float | None = Field(description="The newest calibration's agreement (None: never calibrated).")
    flagged: bool = Field(description="agreement below threshold.")
    history: list[Snapshot]


class JudgeList(BaseModel):
    """``GET /v1/judges``."""

    threshold: float = Field(description="UEP_JUDGE_MIN_AGREEMENT: a judge whose agreement is below it is flagged.")
    currency: str
    judges: list[JudgeView]


def snapshots(rows: list[JudgeCalibration], threshold: float) -> list[Snapshot]:
    """The rows of one judge grouped into snapshots (by task and ``computed_at``), newest first."""
    groups: dict[tuple[Any, ...], list[JudgeCalibration]] = defaultdict(list)
    for r in rows:
        groups[(r.computed_at, r.task_id, r.evaluation_id)].append(r)
    out = []
    for (at, task_id, evaluation_id), rs in sorted(groups.items(), key=lambda kv: kv[0][0], reverse=True):
        agreements = [r.agreement for r in rs if r.agreement is not None]
        alphas = [r.alpha for r in rs if r.alpha is not None]
        agreement = min(agreements) if agreements else None
        out.append(
            Snapshot(
                computed_at=at,
                task_id=task_id,
                evaluation_id=evaluation_id,
                agreement=agreement,
                alpha=min(alphas) if alphas else None,
                items=max(r.items for r in rs),
                flagged=agreement is not None and agreement < threshold,
                questions=[
                    {
                        "template": r.template,
                        "template_version": r.template_version,
                        "question": r.question,
                        "type": r.question_type,
                        "items": r.items,
                        "agreement": r.agreement,
                        "alpha": r.alpha,
                    }
                    for r in rs
                ],
            )
        )
    return out


@router.get("", response_model=JudgeList)
async def list_judges(request: Request, session: AsyncSession = Depends(db_session)) -> JudgeList:
    """Every judge model that judged the caller's tenant's evaluations or was calibrated there, by name."""
    threshold = request.app.state.settings.judge_min_agreement
    tenant_id = caller_tenant_id(session)
    use = {r["name"]: r for r in (await session.execute(_USE, {"t": tenant_id})).mappings()}
    cal_rows = list(
        await session.scalars(
            select(JudgeCalibration)
            .where(JudgeCalibration.tenant_id == tenant_id, tenant_filter(session, JudgeCalibration))
            .order_by(JudgeCalibration.computed_at.desc(), JudgeCalibration.id)
            .limit(MAX_CALIBRATION_ROWS)
        )
    )
    by_judge: dict[str, list[JudgeCalibration]] = defaultdict(list)
    for r in cal_rows:
        by_judge[r.judge_model_name].append(r)
    standings = await judge_standings(session, tenant_id, threshold)
    judges = []
    for name in sorted(set(use) | set(by_judge)):
        u = use.get(name)
        verdicts = int(u["verdicts"]) if u else 0
        cost = float(u["cost"]) if u else 0.0
        standing = standings.get(name, {})
        judges.append(
            JudgeView(
                judge_model=name,
                verdicts=verdicts,
                invalid_verdicts=int(u["invalid"]) if u else 0,
                evaluations=int(u["evaluations"]) if u else 0,
                last_used=u["last_used"] if u else None,
                cost=cost,
                cost_per_verdict=cost / verdicts if verdicts else None,
                agreement=standing.get("agreement"),
                flagged=bool(standing.get("flagged")),
                history=snapshots(by_judge.get(name, []), threshold)[:HISTORY_PER_JUDGE],
            )
        )
    return JudgeList(threshold=threshold, currency=currency(), judges=judges)


@router.get("/calibrations")
async def list_calibrations(
    judge_model: str | None = Query(None, max_length=200, description="Only this judge model (name)."),
    task_id: uuid.UUID | None = Query(None, description="Only calibrations of this annotation task."),
    limit: int = Query(200, ge=1, le=MAX_CALIBRATION_ROWS),
    session: AsyncSession = Depends(db_session),
) -> list[dict[str, Any]]:
    """Stored calibration rows, newest first, each with every statistic (per-annotator kappa, alpha with and
    without the judge, Spearman for ratings, the confusion of judge against human answers)."""
    q = select(JudgeCalibration).where(tenant_filter(session, JudgeCalibration))
    if task_id is not None:
        await owned(session, AnnotationTask, task_id, ("query", "task_id"), "annotation task")
        q = q.where(JudgeCalibration.task_id == task_id)
    if judge_model is not None:
        q = q.where(JudgeCalibration.judge_model_name == judge_model)
    rows = await session.scalars(q.order_by(JudgeCalibration.computed_at.desc(), JudgeCalibration.id).limit(limit))
    keys = [c.key for c in JudgeCalibration.__table__.columns if c.key != "tenant_id"]
    return [{k: getattr(r, k) for k in keys} for r in rows]


@router.get("/costs")
async def list_judge_costs(
    evaluation_id: uuid.UUID | None = Query(None, description="Only this evaluation (default: the newest judged ones)."),
    limit: int = Query(100, ge=1, le=1000, description="Evaluations listed without evaluation_id."),
    session: AsyncSession = Depends(db_session),
) -> dict[str, Any]:
    """Judge cost per evaluation and judge model: ``cost`` (charged, site currency), ``verdicts`` and
    ``cost_per_verdict`` (their ratio)."""
    if evaluation_id is not None:
        await owned(session, Evaluation, evaluation_id, ("query", "evaluation_id"), "evaluation")
        ids = [evaluation_id]
    else:
        ids = list(
            await session.scalars(
                select(Evaluation.id)
                .where(
                    tenant_filter(session, Evaluation),
                    text("EXISTS (SELECT 1 FROM judge_verdicts v WHERE v.evaluation_id = evaluations.id)"),
                )
                .order_by(Evaluation.created_at.desc())
                .limit(limit)
            )
        )
    return {"currency": currency(), "costs": await judge_costs(session, ids)}
