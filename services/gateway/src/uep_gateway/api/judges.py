"""LLM-as-judge: configuration checks (used when benchmarks are uploaded and evaluations created),
diagnostics per judge model and template version, per-item verdicts and hybrid routes.

- ``GET /v1/judges/diagnostics?evaluation_id=&benchmark=&judge_model=``: parse failure rate, position-swap
  inconsistency rate, length correlation (Spearman), self-preference (``uep_gateway.judge_diagnostics``).
- ``GET /v1/judges/verdicts?evaluation_id=``: every judge verdict of an evaluation with its raw answers.
- ``GET /v1/judges/routes?evaluation_id=&stage=``: how a hybrid evaluation routed its items.

Every read covers only the caller's tenant's evaluations (an explicit ``tenant_id`` filter on top of
row-level security); an ``evaluation_id`` of another tenant is 404 naming ``query.evaluation_id``, as an
unknown one is.
"""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Depends, Query
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.tables.judging import HybridRoute, JudgeVerdict
from uep_common.tables.models import Benchmark, Evaluation, Sample
from uep_gateway.deps import db_session
from uep_gateway.judge_diagnostics import VerdictRow, diagnostics
from uep_gateway.tenancy import owned, tenant_filter
from uep_gateway.validation import NUL_CHECK

router = APIRouter(prefix="/v1/judges", tags=["judges"], dependencies=NUL_CHECK)
MAX_DIAGNOSTIC_ROWS = 500_000


async def _evaluation(session: AsyncSession, evaluation_id: uuid.UUID) -> Evaluation:
    """The caller's evaluation named by the ``evaluation_id`` query parameter; 404 naming it otherwise (also
    for another tenant's)."""
    return await owned(session, Evaluation, evaluation_id, ("query", "evaluation_id"), "evaluation")


async def _verdict_rows(
    session: AsyncSession, evaluation_id: uuid.UUID | None, benchmark: str | None, judge_model: str | None
) -> list[VerdictRow]:
    q = select(JudgeVerdict).where(tenant_filter(session, JudgeVerdict))
    if evaluation_id is not None:
        q = q.where(JudgeVerdict.evaluation_id == evaluation_id)
    if benchmark is not None:
        ids = select(Benchmark.id).where(Benchmark.slug == benchmark)
        q = q.where(JudgeVerdict.benchmark_id.in_(ids))
    if judge_model is not None:
        q = q.where(JudgeVerdict.judge_model_name == judge_model)
    rows = await session.scalars(q.order_by(JudgeVerdict.id).limit(MAX_DIAGNOSTIC_ROWS))
    columns = [c.key for c in JudgeVerdict.__table__.columns]
    return [VerdictRow.from_record({c: getattr(r, c) for c in columns}) for r in rows]


@router.get("/diagnostics")
async def judge_diagnostics(
    evaluation_id: uuid.UUID | None = Query(None, description="Only this evaluation's verdicts."),
    benchmark: str | None = Query(None, max_length=100, description="Only verdicts on this benchmark (slug, all versions)."),
    judge_model: str | None = Query(None, max_length=200, description="Only this judge model (name)."),
    session: AsyncSession = Depends(db_session),
) -> dict[str, Any]:
    """Per judge model and template version: parse failure rate, invalid rate, position-swap inconsistency
    rate, first-position rate, Spearman correlation of score with answer length, self-preference
    (definitions in ``uep_gateway.judge_diagnostics``)."""
    if evaluation_id is not None:
        await _evaluation(session, evaluation_id)
    rows = await _verdict_rows(session, evaluation_id, benchmark, judge_model)
    return {"judges": diagnostics(rows), "verdicts": len(rows)}


@router.get("/verdicts")
async def list_verdicts(
    evaluation_id: uuid.UUID = Query(..., description="The evaluation whose judge verdicts to list."),
    limit: int = Query(500, ge=1, le=5000),
    session: AsyncSession = Depends(db_session),
) -> list[dict[str, Any]]:
    """Every judge verdict of an evaluation in benchmark order: judge, order, validity, scores or winner,
    the last raw answer and every attempt's raw text and parse error."""
    await _evaluation(session, evaluation_id)
    rows = (
        await session.execute(
            select(JudgeVerdict, Sample.ordinal)
            .join(Sample, Sample.id == JudgeVerdict.sample_id)
            .where(JudgeVerdict.evaluation_id == evaluation_id, tenant_filter(session, JudgeVerdict))
            .order_by(Sample.ordinal, JudgeVerdict.repeat, JudgeVerdict.judge_model_name, JudgeVerdict.position)
            .limit(limit)
        )
    ).all()
    keys = (
        "sample_id",
        "repeat",
        "arm",
        "judge_model_name",
        "mode",
        "template",
        "template_version",
        "position",
        "valid",
        "attempts",
        "overall",
        "scores",
        "winner",
        "candidate_outcome",
        "reasoning",
        "raw_text",
        "attempts_log",
        "error",
        "answer_chars",
        "prompt_tokens",
        "completion_tokens",
        "latency_ms",
    )
    return [{"sample_ordinal": ordinal, **{k: getattr(r, k) for k in keys}} for r, ordinal in rows]


@router.get("/routes")
async def list_routes(
    evaluation_id: uuid.UUID = Query(..., description="A hybrid evaluation."),
    stage: str | None = Query(None, pattern="^(judge|human)$"),
    session: AsyncSession = Depends(db_session),
) -> list[dict[str, Any]]:
    """How a hybrid evaluation routed its items: stage 'judge' (the automatic metric could not decide) and
    stage 'human' (the judge's verdict was invalid, swap-inconsistent or a jury disagreed), in benchmark order."""
    await _evaluation(session, evaluation_id)
    q = (
        select(HybridRoute, Sample.ordinal)
        .join(Sample, Sample.id == HybridRoute.sample_id)
        .where(HybridRoute.evaluation_id == evaluation_id, tenant_filter(session, HybridRoute))
    )
    if stage:
        q = q.where(HybridRoute.stage == stage)
    rows = (await session.execute(q.order_by(Sample.ordinal, HybridRoute.repeat, HybridRoute.stage))).all()
    return [
        {
            "sample_ordinal": o,
            "sample_id": r.sample_id,
            "repeat": r.repeat,
            "arm": r.arm,
            "stage": r.stage,
            "reason": r.reason,
            "details": r.details,
            "created_at": r.created_at,
        }
        for r, o in rows
    ]
