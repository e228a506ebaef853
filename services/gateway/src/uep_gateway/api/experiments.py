"""Views of the groups one create request makes: an A/B experiment (``arms``) and a batch (``models``).

- ``GET /v1/experiments/{experiment_id}``: the experiment's arms (each its own evaluation), their status and
  progress, and the paired comparison of every arm with the first arm of the request.
- ``GET /v1/batches/{batch_id}``: the same for a batch: its evaluations (one per model) and each one's paired
  comparison with the batch's first model.

The comparisons are :func:`uep_common.analytics.comparison.compare` (2×2 table, exact McNemar test, paired bootstrap of
the accuracy and score differences, transitions and the fingerprint diff, which names what the arm changed);
the group and its order come from :func:`uep_common.analytics.comparison.group_evaluations`. A comparison is left out
(``comparison`` null, ``pending`` saying why) until both sides have a scored result. Every evaluation of the
group must be the caller's tenant's: another tenant's experiment or batch answers 404 with the body of an
unknown one. Bounds: a group has at most 20 evaluations (the create request's limits); ``transitions`` caps
the items listed per comparison (the counts always cover every item).
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import exists, select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.analytics.comparison import Comparison, compare, group_evaluations
from uep_common.analytics.summary import Headline
from uep_common.contract.configs import parse_evaluation_config
from uep_common.records.lifecycle import TERMINAL
from uep_common.tables.models import Evaluation, SampleResult
from uep_gateway.deps import db_session
from uep_gateway.errors import FieldError
from uep_gateway.schemas import EvaluationView, Progress
from uep_gateway.tenancy import tenant_filter
from uep_gateway.usecases.evaluations import evaluation_view
from uep_gateway.validation import NUL_CHECK

router = APIRouter(tags=["experiments"], dependencies=NUL_CHECK)

MAX_GROUP = 20
"""Most evaluations one create request makes (``models``: 20, ``arms``: 8); larger groups are cut here."""


class GroupMember(BaseModel):
    """One evaluation of the group: an arm of an experiment, or a model of a batch (arm ``main``)."""

    model_config = ConfigDict(protected_namespaces=())

    evaluation_id: uuid.UUID
    arm: str
    model: dict[str, Any]
    status: str
    progress: Progress = Field(description="Live from Redis while running, else from PostgreSQL (as GET /v1/evaluations/{id}).")
    accuracy: float | None
    headline: Headline | None = Field(None, description="The figure to show (uep_common.analytics.summary.headline_of).")
    release: bool = Field(description="Marked as a release run at creation: it enters the leaderboards.")
    links: dict[str, str]


class MemberComparison(BaseModel):
    """The paired comparison of one evaluation of the group (``current``) with the group's first (``baseline``)."""

    arm: str
    model: str
    evaluation_id: uuid.UUID
    baseline_arm: str
    baseline_model: str
    baseline_evaluation_id: uuid.UUID
    comparison: Comparison | None = Field(
        description="uep_common.analytics.comparison.Comparison (McNemar, paired bootstrap, transitions, fingerprint diff); "
        "null while either side has no scored result."
    )
    pending: str | None = Field(None, description="Why there is no comparison yet.")


class GroupView(BaseModel):
    """``GET /v1/experiments/{id}`` and ``GET /v1/batches/{id}``."""

    id: uuid.UUID
    kind: Literal["experiment", "batch"]
    benchmark: dict[str, Any]
    status: str = Field(
        description="pending (every member pending), running (a member not ended yet), completed (every member "
        "completed) or ended (every member ended, not all completed)"
    )
    progress: Progress = Field(description="Sums over the members.")
    members: list[GroupMember] = Field(description="In request order; the first is the baseline of the comparisons.")
    comparisons: list[MemberComparison] = Field(description="Every member after the first, against the first.")


def group_status(statuses: list[str]) -> str:
    """The status of a group from its members' (see :class:`GroupView`); ``statuses`` is not empty."""
    if all(s == "pending" for s in statuses):
        return "pending"
    if any(s not in TERMINAL for s in statuses):
        return "running"
    return "completed" if all(s == "completed" for s in statuses) else "ended"


async def _has_scores(session: AsyncSession, evaluation_id: uuid.UUID) -> bool:
    return bool(
        await session.scalar(select(exists().where(SampleResult.evaluation_id == evaluation_id, SampleResult.score.is_not(None))))
    )


def _label(view: EvaluationView) -> str:
    return f"{view.arm} ({view.model.get('name')})"


async def group_view(
    session: AsyncSession,
    request: Request,
    kind: Literal["experiment", "batch"],
    group_id: uuid.UUID,
    transitions: int,
) -> GroupView:
    """The view of the caller's tenant's experiment or batch ``group_id``. Raises 404 naming the path
    parameter when there is none (or it is another tenant's)."""
    col = Evaluation.experiment_id if kind == "experiment" else Evaluation.batch_id
    first = await session.scalar(select(Evaluation).where(col == group_id, tenant_filter(session, Evaluation)).limit(1))
    if first is None:
        raise FieldError("not_found", ("path", f"{kind}_id"), f"unknown {kind} {group_id}", f"unknown_{kind}")
    group = (await group_evaluations(session, first))[:MAX_GROUP]
    views: list[EvaluationView] = [await evaluation_view(session, request.app.state.redis, ev.id) for ev in group]
    members = [
        GroupMember(
            evaluation_id=v.id,
            arm=v.arm,
            model=v.model,
            status=v.status,
            progress=v.progress,
            accuracy=v.summary.accuracy if v.summary else None,
            headline=v.headline,
            release=bool(parse_evaluation_config(ev.config).release),
            links={
                "self": f"/v1/evaluations/{v.id}",
                "results": f"/v1/evaluations/{v.id}/results",
                "compare": f"/v1/evaluations/{v.id}/compare?baseline={group[0].id}",
            },
        )
        for ev, v in zip(group, views, strict=True)
    ]
    base, base_view = group[0], views[0]
    base_scored = await _has_scores(session, base.id)
    reason = "first_arm" if kind == "experiment" else "first_in_batch"
    comparisons = []
    for ev, v in zip(group[1:], views[1:], strict=True):
        missing = [] if base_scored else [_label(base_view)]
        if not await _has_scores(session, ev.id):
            missing.append(_label(v))
        result = None
        if not missing:
            result = await compare(session, ev.id, base.id, reason, limit=transitions)
        comparisons.append(
            MemberComparison(
                arm=v.arm,
                model=str(v.model.get("name", "")),
                evaluation_id=ev.id,
                baseline_arm=base_view.arm,
                baseline_model=str(base_view.model.get("name", "")),
                baseline_evaluation_id=base.id,
                comparison=result,
                pending=None if result else f"no scored result yet: {', '.join(missing)}",
            )
        )
    completed = sum(m.progress.completed for m in members)
    total = sum(m.progress.total for m in members)
    return GroupView(
        id=group_id,
        kind=kind,
        benchmark=base_view.benchmark,
        status=group_status([m.status for m in members]),
        progress=Progress(
            completed=completed,
            errors=sum(m.progress.errors for m in members),
            total=total,
            fraction=completed / total if total else 1.0,
            discarded=sum(m.progress.discarded for m in members),
        ),
        members=members,
        comparisons=comparisons,
    )


TRANSITIONS = Query(20, ge=0, le=1000, description="Most changed items listed per comparison (counts cover every item).")


@router.get("/v1/experiments/{experiment_id}", response_model=GroupView)
async def get_experiment(
    experiment_id: uuid.UUID, request: Request, transitions: int = TRANSITIONS, session: AsyncSession = Depends(db_session)
) -> GroupView:
    """An A/B experiment: its arms in request order with status and progress, and every arm's paired
    comparison with the first arm (exact McNemar, paired bootstrap, fingerprint diff naming the prompt or
    model change). 404 naming ``experiment_id`` when it is unknown or another tenant's."""
    return await group_view(session, request, "experiment", experiment_id, transitions)


@router.get("/v1/batches/{batch_id}", response_model=GroupView)
async def get_batch(
    batch_id: uuid.UUID, request: Request, transitions: int = TRANSITIONS, session: AsyncSession = Depends(db_session)
) -> GroupView:
    """A batch (one evaluation per model): its evaluations in request order with status and progress, and
    each one's paired comparison with the first model's. 404 naming ``batch_id`` when it is unknown or
    another tenant's."""
    return await group_view(session, request, "batch", batch_id, transitions)
