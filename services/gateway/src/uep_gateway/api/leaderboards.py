"""Leaderboards and retention.

- ``GET /v1/leaderboards``: every board (benchmark slug × score type) with its model and evaluation counts.
- ``GET /v1/leaderboards/compare?models=a,b@2&benchmarks=gsm8k,mmlu:mmlu_choice``: chosen models across
  benchmarks, with the radar of all of them (``format=svg`` returns the radar itself).
- ``GET /v1/leaderboards/{benchmark}?score_type=&item_set=&top=&benchmark_version=``: the ranked board of one
  item set (benchmark version × samples evaluated: only runs on the same items are ranked together; the
  board's other item sets are listed in ``item_sets``), tie groups. A/B arms are on no board unless created
  with ``release: true``. ``score_type`` may also be any set-level metric the benchmark's evaluations have
  (``f1_macro``, ``roc_auc``, ``ndcg@10``, ``mrr``…, listed in ``score_types``); the default is the board with
  most evaluations, which for a benchmark with a primary metric is that metric.
- ``GET /v1/leaderboards/{benchmark}/history?score_type=&limit=``: snapshots with rank changes.
- ``POST /v1/retention/run`` ``{"dry_run": bool, "keep_last": int | null, "benchmark"?, "model"?}`` and ``GET /v1/retention/runs/{id}``:
  a retention run executed by a reporter (which owns the artifact files); the POST waits up to ``wait_s``
  seconds for the result (200) and otherwise answers 202 with the run to poll. Site administration: a site admin
  acting across tenants (``X-UEP-Site-Admin: true``), since a run cleans every tenant's evaluations.

Whose entries a board shows: the caller's tenant's only, ranked among themselves; with the gateway setting
``leaderboards_site_wide`` every tenant's on the boards of benchmarks the caller may read (read through an
unscoped session, since row-level security would hide the other tenants' scores); a site admin acting
across tenants sees every board whole. History snapshots follow the same rule.

Ranking, scores and tie groups are defined in :mod:`uep_common.analytics.leaderboards`; retention in
:mod:`uep_reporter.retention_policy`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.analytics import leaderboards as lb
from uep_common.analytics.judge_standing import evaluation_judges
from uep_common.runtime.wakeups import RETENTION_CHANNEL, notify
from uep_common.tables.leaderboards import RetentionRun
from uep_common.tables.models import Benchmark, Model
from uep_gateway.deps import db_session, unscoped_session
from uep_gateway.errors import FieldError
from uep_gateway.tenancy import principal_of_session
from uep_gateway.validation import NUL_CHECK

router = APIRouter(tags=["leaderboards"], dependencies=NUL_CHECK)

MAX_COMPARE_MODELS = 12
MAX_COMPARE_BENCHMARKS = 24


class BoardInfo(BaseModel):
    """One board: benchmark slug × score type."""

    benchmark: str
    score_type: str
    models: int = Field(description="Model versions on the board.")
    evaluations: int = Field(description="Completed evaluations recorded on the board.")
    last_evaluated: datetime
    link: str


class Entry(BaseModel):
    """A model version's entry: its latest completed evaluation on the board."""

    position: int = Field(description="Strict display order within the item set, 1-based.")
    rank: int | None = Field(description="Competition rank of its tie group (1, 1, 3…); None when unrankable.")
    tie_group: int | None = Field(description="1-based group of entries whose 95 % intervals are not separable.")
    model: str
    model_version: str
    score: float | None
    ci_low: float | None
    ci_high: float | None
    method: str = Field(
        description="wilson (accuracy) | bootstrap (mean of a continuous score, or a set-level metric: F1, ROC-AUC, "
        "NDCG@k…) | none"
    )
    method_detail: str = Field(description="How the interval was computed, in words.")
    n: int = Field(description="Scored items of the evaluation.")
    evaluations: int = Field(description="Completed evaluations of this model version on the board.")
    last_evaluated: datetime
    evaluation_id: uuid.UUID
    benchmark_version: str
    samples: int | None = Field(description="Samples evaluated: the first N of the benchmark version.")
    item_set: str = Field(description="'<benchmark version>:<samples>': entries are ranked only against the same item set.")
    judges: list[dict[str, Any]] = Field(
        default_factory=list,
        description="The judges that judged the evaluation: judge_model, cost, verdicts, cost_per_verdict and their "
        "standing against people (agreement, flagged when under UEP_JUDGE_MIN_AGREEMENT; see GET /v1/judges).",
    )


class ItemSet(BaseModel):
    """One item set of a board: the entries evaluated on the same items (benchmark version, first N samples)."""

    key: str
    benchmark_version: str
    samples: int | None
    entries: int
    link: str


class Board(BaseModel):
    """A ranked board (see uep_common.analytics.leaderboards for the score, entry and tie-group rules)."""

    benchmark: str
    score_type: str | None
    score_types: list[str] = Field(
        description="Every score type this benchmark has a board for: the recorded ones, then the set-level metrics "
        "(f1_macro, roc_auc, ndcg@10, mrr…) its evaluations' summaries carry."
    )
    tie_rule: str
    item_set: str | None = Field(description="The item set ranked (default: the one with most entries, then most samples).")
    item_sets: list[ItemSet] = Field(description="Every item set of the board in the caller's view, the default first.")
    total: int = Field(description="Entries of the item set ranked (before top).")
    entries: list[Entry]


class HistoryItem(BaseModel):
    """The board as it stood after one evaluation was recorded, and the changes against the one before."""

    id: int
    created_at: datetime
    evaluation_id: uuid.UUID | None
    entries: list[dict[str, Any]]
    changes: list[dict[str, Any]]


class History(BaseModel):
    """Snapshots of a board, newest first."""

    benchmark: str
    score_type: str | None
    snapshots: list[HistoryItem]


class RetentionRequest(BaseModel):
    """A retention run: ``dry_run`` lists what would be cleaned and why the rest is kept; ``keep_last``
    overrides the reporter's setting (evaluations kept per benchmark and model)."""

    dry_run: bool = False
    keep_last: int | None = Field(None, ge=1, le=100_000)
    benchmark: str | None = Field(None, max_length=100, description="Clean only evaluations of this benchmark slug.")
    model: str | None = Field(None, max_length=200, description="Clean only evaluations of this model name.")


class RetentionRunView(BaseModel):
    """A retention run and, once finished, its result (see uep_reporter.retention_policy.run)."""

    id: uuid.UUID
    trigger: str
    dry_run: bool
    keep_last: int | None
    scope: dict[str, Any]
    status: str
    result: dict[str, Any] | None
    error: str | None
    requested_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


TIE_RULE = (
    "only entries evaluated on the same item set (benchmark version and samples) are ranked together; "
    "sorted by score (lowest first for log_loss, brier and ece, with the rule mirrored), then lower bound; an entry whose 95 % upper bound is below the current group leader's "
    "lower bound starts a new group, otherwise it shares the leader's group; rank = 1 + entries in better groups"
)


@dataclass(frozen=True)
class Boards:
    """Where the caller reads boards from: ``session`` (tenant-scoped, or unscoped when boards are site-wide)
    and ``scope`` (whose entries, on which benchmarks)."""

    session: AsyncSession
    scope: lb.BoardScope


async def boards_of(
    request: Request, session: AsyncSession = Depends(db_session), raw: AsyncSession = Depends(unscoped_session)
) -> Boards:
    """FastAPI dependency: the caller's :class:`Boards` (see the module docstring)."""
    principal = principal_of_session(session)
    if principal.site_act:
        return Boards(session, lb.SITE_SCOPE)
    if request.app.state.settings.leaderboards_site_wide:
        return Boards(raw, lb.BoardScope(viewer_tenant_id=principal.tenant.id))
    return Boards(session, lb.BoardScope(tenant_id=principal.tenant.id))


def _csv(value: str) -> list[str]:
    return [x.strip() for x in value.split(",") if x.strip()]


async def _benchmark_known(session: AsyncSession, slug: str) -> bool:
    return bool(await session.scalar(select(Benchmark.id).where(Benchmark.slug == slug).limit(1)))


async def _resolve_score_type(
    session: AsyncSession, boards: Boards, slug: str, score_type: str | None, loc: tuple[str, ...]
) -> tuple[str | None, list[str]]:
    """The board's score type (the requested one, else the one with most evaluations) and all of them.
    404 naming ``loc`` for a benchmark the caller cannot see or a score type it has no board for."""
    types = [t for t, _ in await lb.score_types(boards.session, slug, boards.scope)]  # only boards of visible benchmarks
    if not types and not await _benchmark_known(session, slug):
        raise FieldError("not_found", loc, f"unknown benchmark {slug!r}", "unknown_benchmark")
    if score_type is None:
        return (types[0] if types else None), sorted(types)
    if score_type not in types:
        have = ", ".join(sorted(types)) or "none yet"
        raise FieldError(
            "not_found",
            ("query", "score_type"),
            f"benchmark {slug!r} has no {score_type!r} board (has: {have})",
            "unknown_score_type",
        )
    return score_type, sorted(types)


@router.get("/v1/leaderboards", response_model=list[BoardInfo])
async def list_boards(boards: Boards = Depends(boards_of)) -> list[BoardInfo]:
    """Every leaderboard the caller sees: benchmark slug × score type (the automatic metric's name, judge,
    human, hybrid), counting the entries it sees."""
    return [
        BoardInfo(**b, link=f"/v1/leaderboards/{b['benchmark']}?score_type={b['score_type']}")
        for b in await lb.list_boards(boards.session, boards.scope)
    ]


def _render_radar(series: dict[str, Any], title: str) -> str | None:
    """The radar drawn by the shared matplotlib renderer (``uep_common.analytics.charts.radar_svg``, the one reports
    use). CPU-bound (and the first call imports matplotlib): call it in a worker thread, never on the event loop."""
    from uep_common.analytics.charts import radar_svg

    return radar_svg(series, title)


@router.get("/v1/leaderboards/compare", response_model=None)
async def compare(
    models: str = Query(..., max_length=2000, description="Comma-separated model names, each optionally name@version."),
    benchmarks: str | None = Query(
        None,
        max_length=4000,
        description="Comma-separated benchmark slugs, each optionally slug:score_type; default every benchmark "
        "on which one of the models has a score.",
    ),
    format: str = Query("json", pattern="^(json|svg)$", description="json, or svg for the radar alone."),
    session: AsyncSession = Depends(db_session),
    boards_in: Boards = Depends(boards_of),
) -> Response | dict[str, Any]:
    """Chosen models across benchmarks: each model's entry (score, interval, rank, tie group) per board and
    the radar of all of them (dimensions = boards; a missing score is a gap, never a zero)."""
    refs = list(dict.fromkeys(_csv(models)))
    if not refs:
        raise FieldError("invalid", ("query", "models"), "name at least one model", "empty")
    if len(refs) > MAX_COMPARE_MODELS:
        raise FieldError("invalid", ("query", "models"), f"at most {MAX_COMPARE_MODELS} models", "too_many")
    for ref in refs:
        name, _, version = ref.partition("@")
        q = select(Model.id).where(Model.name == name)
        if version:
            q = q.where(Model.version == version)
        if not await session.scalar(q.limit(1)):
            raise FieldError("invalid", ("query", "models"), f"unknown model {ref!r}", "unknown_model")
    boards: list[tuple[str, str]] = []
    if benchmarks:
        specs = list(dict.fromkeys(_csv(benchmarks)))
        if len(specs) > MAX_COMPARE_BENCHMARKS:
            raise FieldError("invalid", ("query", "benchmarks"), f"at most {MAX_COMPARE_BENCHMARKS} benchmarks", "too_many")
        for spec in specs:
            slug, _, st = spec.partition(":")
            types = [t for t, _ in await lb.score_types(boards_in.session, slug, boards_in.scope)]
            if not types and not await _benchmark_known(session, slug):
                raise FieldError("invalid", ("query", "benchmarks"), f"unknown benchmark {slug!r}", "unknown_benchmark")
            if st and st not in types:
                raise FieldError(
                    "invalid", ("query", "benchmarks"), f"benchmark {slug!r} has no {st!r} board", "unknown_score_type"
                )
            if st or types:
                boards.append((slug, st or types[0]))
    else:
        names = {r.partition("@")[0] for r in refs}
        seen: set[str] = set()
        for b in await lb.list_boards(boards_in.session, boards_in.scope):
            if b["benchmark"] in seen:
                continue
            entries = await lb.load_board(boards_in.session, b["benchmark"], b["score_type"], scope=boards_in.scope)
            if any(e.model in names for e in entries):
                types = [t for t, _ in await lb.score_types(boards_in.session, b["benchmark"], boards_in.scope)]
                boards.append((b["benchmark"], types[0]))
                seen.add(b["benchmark"])
    result = await lb.compare_models(boards_in.session, refs, boards, scope=boards_in.scope)
    if any(result["radar_series"].values()):
        result["radar_svg"] = await asyncio.to_thread(
            _render_radar, result["radar_series"], "Models compared: " + ", ".join(refs)
        )
    if format == "svg":
        if result["radar_svg"] is None:
            raise FieldError(
                "not_found", ("query", "format"), "no radar: none of the models has a score on these boards", "no_radar"
            )
        return Response(result["radar_svg"], media_type="image/svg+xml")
    return result


@router.get("/v1/leaderboards/{benchmark}", response_model=Board)
async def get_board(
    benchmark: str,
    request: Request,
    score_type: str | None = Query(
        None,
        max_length=100,
        description="Default: the benchmark's board with most evaluations (its primary metric); also a set-level "
        "metric such as f1_macro, roc_auc, ndcg@10 or mrr (see score_types).",
    ),
    top: int | None = Query(None, ge=1, le=10_000, description="Only the first N entries (by position)."),
    benchmark_version: str | None = Query(None, max_length=64, description="Only evaluations of this benchmark version."),
    item_set: str | None = Query(
        None, max_length=100, description="The item set to rank ('<benchmark version>:<samples>', see item_sets)."
    ),
    session: AsyncSession = Depends(db_session),
    boards: Boards = Depends(boards_of),
) -> Board:
    """The ranked board of a benchmark's item set: per model version its latest completed evaluation on those
    items, score with its 95 % interval, evaluation count, last evaluated, rank and tie group — over the
    entries the caller sees. 404 naming ``item_set`` when the board has no such item set."""
    st, types = await _resolve_score_type(session, boards, benchmark, score_type, ("path", "benchmark"))
    every = await lb.load_board(boards.session, benchmark, st, benchmark_version, boards.scope) if st else []
    order = lb.item_set_order(every)
    chosen = item_set if item_set is not None else (order[0] if order else None)
    if item_set is not None and item_set not in order:
        raise FieldError(
            "not_found",
            ("query", "item_set"),
            f"benchmark {benchmark!r} has no item set {item_set!r} on this board (has: {', '.join(order) or 'none'})",
            "unknown_item_set",
        )
    entries = [e for e in every if e.item_set == chosen]
    shown = entries[:top] if top else entries
    marks = await evaluation_judges(
        boards.session, [e.evaluation_id for e in shown], request.app.state.settings.judge_min_agreement
    )
    sets = []
    for key in order:
        members = [e for e in every if e.item_set == key]
        sets.append(
            ItemSet(
                key=key,
                benchmark_version=members[0].benchmark_version,
                samples=members[0].samples,
                entries=len(members),
                link=f"/v1/leaderboards/{benchmark}?score_type={st}&item_set={key}",
            )
        )
    return Board(
        benchmark=benchmark,
        score_type=st,
        score_types=types,
        tie_rule=TIE_RULE,
        item_set=chosen,
        item_sets=sets,
        total=len(entries),
        entries=[Entry(**e.as_dict(), judges=marks.get(e.evaluation_id, [])) for e in shown],
    )


@router.get("/v1/leaderboards/{benchmark}/history", response_model=History)
async def get_history(
    benchmark: str,
    score_type: str | None = Query(None, max_length=100),
    limit: int = Query(50, ge=1, le=1000),
    session: AsyncSession = Depends(db_session),
    boards: Boards = Depends(boards_of),
) -> History:
    """Snapshots of the board, newest first, each with the rank changes against the one before it (one
    snapshot per recorded evaluation the caller sees, cut down to the entries it sees)."""
    st, _ = await _resolve_score_type(session, boards, benchmark, score_type, ("path", "benchmark"))
    snaps = await lb.board_history(boards.session, benchmark, st, limit, boards.scope) if st else []
    return History(benchmark=benchmark, score_type=st, snapshots=[HistoryItem(**s) for s in snaps])


def _run_view(run: RetentionRun) -> RetentionRunView:
    return RetentionRunView.model_validate(run, from_attributes=True)


@router.post(
    "/v1/retention/run",
    response_model=RetentionRunView,
    tags=["retention"],
    responses={202: {"description": "requested; poll the run"}},
)
async def request_retention(
    body: RetentionRequest,
    response: Response,
    wait_s: float = Query(10.0, ge=0, le=60, description="Seconds to wait for a reporter to finish the run."),
    session: AsyncSession = Depends(db_session),
) -> RetentionRunView:
    """Request a retention run over every tenant (a reporter executes it; several requests queue). 200 with
    the result when it finished within ``wait_s``, else 202 with the run to poll at
    ``/v1/retention/runs/{id}``. Site administration (the role matrix refuses anyone else with 403)."""
    if body.benchmark is not None and not await _benchmark_known(session, body.benchmark):
        raise FieldError("invalid", ("body", "benchmark"), f"unknown benchmark {body.benchmark!r}", "unknown_benchmark")
    if body.model is not None and not await session.scalar(select(Model.id).where(Model.name == body.model).limit(1)):
        raise FieldError("invalid", ("body", "model"), f"unknown model {body.model!r}", "unknown_model")
    run = RetentionRun(
        id=uuid.uuid4(),
        trigger="api",
        dry_run=body.dry_run,
        keep_last=body.keep_last,
        status="requested",
        scope={k: v for k, v in (("benchmark", body.benchmark), ("model", body.model)) if v is not None},
    )
    session.add(run)
    await notify(session, RETENTION_CHANNEL, str(run.id))
    await session.commit()
    deadline = time.monotonic() + wait_s
    while True:
        await session.refresh(run)
        if run.status not in ("requested", "running"):
            return _run_view(run)
        if time.monotonic() >= deadline:
            response.status_code = 202
            response.headers["Location"] = f"/v1/retention/runs/{run.id}"
            return _run_view(run)
        await session.commit()  # end the read transaction so the next refresh sees the reporter's commit
        await asyncio.sleep(0.2)


@router.get("/v1/retention/runs/{run_id}", response_model=RetentionRunView, tags=["retention"])
async def get_retention_run(run_id: uuid.UUID, session: AsyncSession = Depends(db_session)) -> RetentionRunView:
    """A retention run: requested, running, completed (with its result), failed (with the error) or skipped."""
    run = await session.get(RetentionRun, run_id)
    if run is None:
        raise FieldError("not_found", ("path", "run_id"), f"unknown retention run {run_id}", "unknown_retention_run")
    return _run_view(run)
