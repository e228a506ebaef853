"""Evaluations: create (202 + transactional outbox), list the tenant's (filters, keyset pages), read one with
live progress, page through its results, cancel it.

Every evaluation a route fetches by id is the caller's tenant's (:func:`owned_evaluation`): another tenant's
answers 404 with the body of an unknown one."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from pydantic import BaseModel, ConfigDict
from sqlalchemy import func, select, tuple_
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.analytics.stats import wilson_interval
from uep_common.analytics.summary import Headline, headline_of
from uep_common.contract.configs import (
    EvaluationType,
    check_evaluation_config,
    item_prompt,
    parse_benchmark_config,
    parse_evaluation_config,
)
from uep_common.contract.events import EvaluationRequested, EvaluationStatus, EvaluationSummary
from uep_common.prompting.fewshot import fewshot_examples
from uep_common.prompting.prompts import PromptRenderError, check_prompt_template, render_prompt
from uep_common.records import budget, lifecycle
from uep_common.records.creation import (
    ModelUnusableError,
    WorkLimitRefused,
    WorkLimits,
    check_model_fits,
    check_work_limits,
    evaluation_config,
    lock_tenant_creations,
    new_evaluation,
    usable_model,
)
from uep_common.records.sampling import MAX_SAMPLED, choose_ordinals
from uep_common.runtime.outbox import add_to_outbox
from uep_common.runtime.progress import progress_key
from uep_common.runtime.telemetry import tracer
from uep_common.runtime.wakeups import notify_waiting
from uep_common.tables.models import EVALUATION_STATUSES, Benchmark, Evaluation, Model, Sample, SampleResult, Tenant
from uep_gateway.api.judges import evaluation_judge_config
from uep_gateway.auth import Principal, current_principal
from uep_gateway.cursors import bad_cursor, cursor_values, decode_time_id, encode_cursor, encode_time_id
from uep_gateway.deps import db_session
from uep_gateway.errors import FieldError, work_limit_error
from uep_gateway.schemas import (
    EvaluationAccepted,
    EvaluationCreate,
    EvaluationOptions,
    EvaluationRef,
    EvaluationView,
    Progress,
    ResultItem,
    ResultsPage,
)
from uep_gateway.settings import GatewaySettings
from uep_gateway.tenancy import caller_tenant_id, owned, tenant_filter
from uep_gateway.validation import INT32_MAX, NUL_CHECK

router = APIRouter(prefix="/v1/evaluations", tags=["evaluations"], dependencies=NUL_CHECK)
_tracer = tracer("uep.gateway")


def _as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


async def owned_evaluation(
    session: AsyncSession, evaluation_id: uuid.UUID, loc: tuple[str, ...] = ("path", "evaluation_id"), lock: bool = False
) -> Evaluation:
    """The evaluation ``evaluation_id`` of the caller's tenant (locked ``FOR UPDATE`` until the transaction
    ends when ``lock``). Raises 404 ``unknown_evaluation`` naming ``loc`` when there is none or it is another
    tenant's (the same body either way)."""
    return await owned(session, Evaluation, evaluation_id, loc, "evaluation", lock=lock)


async def resolve_benchmark(session: AsyncSession, ref: str, version: str | None) -> Benchmark:
    """Benchmark by slug or id (newest active version unless ``version``). Raises 422 naming the field."""
    q = select(Benchmark)
    as_id = _as_uuid(ref)
    q = q.where(Benchmark.id == as_id) if as_id else q.where(Benchmark.slug == ref)
    if version:
        q = q.where(Benchmark.version == version)
    bench = await session.scalar(q.where(Benchmark.status != "draft").order_by(Benchmark.created_at.desc()).limit(1))
    if bench is None:
        if version and await session.scalar(select(Benchmark.id).where(Benchmark.slug == ref).limit(1)):
            raise FieldError(
                422, ("body", "benchmark_version"), f"benchmark {ref!r} has no version {version!r}", "unknown_benchmark_version"
            )
        raise FieldError(422, ("body", "benchmark"), f"unknown benchmark {ref!r}", "unknown_benchmark")
    if bench.evaluation_type not in (EvaluationType.automatic, EvaluationType.llm_judge, EvaluationType.hybrid):
        raise FieldError(
            422,
            ("body", "benchmark"),
            f"benchmark {ref!r} needs evaluation type {bench.evaluation_type!r}, which is not available yet",
            "unsupported_evaluation_type",
        )
    if bench.sample_count == 0:
        raise FieldError(422, ("body", "benchmark"), f"benchmark {ref!r} has no samples", "empty_benchmark")
    return bench


async def resolve_model(session: AsyncSession, ref: str, version: str | None, loc: tuple[Any, ...] | None = None) -> Model:
    """The model the caller means by ``ref`` (name, ``name@version`` or id) among the models its tenant may see
    and evaluate (:func:`uep_common.records.creation.usable_model`: its own, then site, then shared; the newest active
    version unless ``version``). Raises 422 naming the field (``loc``, default ``body.model`` /
    ``body.model_version``): ``unknown_model``, ``model_inactive`` (deactivated), ``conflicting_fields``."""
    try:
        return await usable_model(session, ref, version, caller_tenant_id(session))
    except ModelUnusableError as exc:
        where = ("body", exc.field) if loc in (None, ("body", "model")) else loc
        raise FieldError(422, where, exc.reason, exc.kind) from exc


@router.post("", status_code=202, response_model=EvaluationAccepted)
async def create_evaluation(
    body: EvaluationCreate,
    request: Request,
    response: Response,
    session: AsyncSession = Depends(db_session),
    principal: Principal = Depends(current_principal),
    idempotency_key: str | None = Header(None, alias="Idempotency-Key", max_length=200),
) -> EvaluationAccepted:
    """Accept an evaluation — or a batch (``models``: one evaluation per model, one ``batch_id``), or an A/B
    experiment (``arms``: one evaluation per arm, one ``experiment_id``). Every row and its
    EvaluationRequested event are committed in one transaction (transactional outbox), after one budget
    check over all of them; the relay publishes the events. A repeated ``Idempotency-Key`` returns what was
    created the first time (of the caller's tenant: keys of two tenants never meet)."""
    settings = request.app.state.settings
    check_options(body, settings)
    tenant = principal.tenant
    limits = WorkLimits.from_settings(settings)
    if idempotency_key:
        # one creation of this tenant at a time until commit (check_work_limits takes the same lock otherwise): a
        # concurrent request with the same key waits here, then finds the first one's rows
        await lock_tenant_creations(session, tenant.id)
        existing = await session.scalar(
            select(Evaluation).where(Evaluation.tenant_id == tenant.id, Evaluation.idempotency_key == idempotency_key)
        )
        if existing is not None:
            return await _accepted_group(session, existing)
    evaluations, events = await plan_evaluations(session, tenant, body, idempotency_key)
    try:
        await check_work_limits(session, tenant, evaluations, limits, many_field="arms" if body.arms is not None else "models")
    except WorkLimitRefused as exc:
        raise work_limit_error(exc) from exc
    session.add_all(evaluations)
    try:
        await budget.check_creation(session, tenant, evaluations)
    except budget.BudgetRefused as exc:
        raise FieldError(exc.status_code, ("body", exc.field), exc.reason, exc.kind) from exc
    for ev, event in zip(evaluations, events, strict=True):
        add_to_outbox(session, event, ev.trace_context)
    await notify_waiting(session, [ev.id for ev in evaluations])  # the scheduler admits on commit, not after Kafka
    try:
        await session.commit()
    except IntegrityError as exc:
        # another creation with this Idempotency-Key won (one that did not take the lock above, e.g. an older
        # gateway during a rolling upgrade): nothing of this one was written; answer with the winner's rows
        await session.rollback()
        if idempotency_key and "uq_evaluations_idempotency_key" in str(exc.orig):
            winner = await session.scalar(
                select(Evaluation).where(Evaluation.tenant_id == tenant.id, Evaluation.idempotency_key == idempotency_key)
            )
            if winner is not None:
                return await _accepted_group(session, winner)
        raise
    request.app.state.relay.kick()
    response.headers["Location"] = f"/v1/evaluations/{evaluations[0].id}"
    return await _accepted_group(session, evaluations[0], evaluations)


async def plan_evaluations(
    session: AsyncSession, tenant: Tenant, body: EvaluationCreate, idempotency_key: str | None = None
) -> tuple[list[Evaluation], list[EvaluationRequested]]:
    """The evaluations a create request asks for (not added to the session) and their events: one; one per
    model of ``models`` (same ``batch_id``); or one per arm of ``arms`` (same ``experiment_id``). Raises
    422 naming the field (``model``, ``models[i]``, ``arms[i].model``, ``arms[i].prompt_template``…)."""
    if sum(x is not None for x in (body.models, body.arms)) > 1:
        raise FieldError(
            422, ("body", "arms"), "give either models (a batch) or arms (an A/B experiment), not both", "conflicting_fields"
        )
    if body.models is not None and body.model is not None:
        raise FieldError(422, ("body", "models"), "give either model or models, not both", "conflicting_fields")
    if body.models is None and body.model is None and not (body.arms and all(a.model for a in body.arms)):
        raise FieldError(422, ("body", "model"), "model is required (or models, or a model in every arm)", "missing")
    bench = await resolve_benchmark(session, body.benchmark, body.benchmark_version)
    judge_config = await evaluation_judge_config(session, bench, body.judge)  # {"judge": snapshot} or {}
    base: dict[str, Any] = {
        "max_parallel": body.max_parallel,
        "fewshot_k": body.fewshot_k,
        "chat_template": body.chat_template,
        "sample_timeout_s": body.sample_timeout_s,
        **await _sampling(session, bench, body),  # one choice of samples for every evaluation of the request
    }
    plans: list[tuple[Model, str, dict[str, Any]]] = []  # (model, arm, config)
    batch_id = experiment_id = None
    if body.arms is not None:
        experiment_id = uuid.uuid4()
        names = [a.name for a in body.arms]
        for i, arm in enumerate(body.arms):
            if names.index(arm.name) != i:
                raise FieldError(422, ("body", "arms", i, "name"), f"arm name {arm.name!r} used twice", "duplicate_arm")
            ref = arm.model or body.model
            assert ref is not None  # checked above: without body.model, every arm names its model
            model = await resolve_model(
                session,
                ref,
                arm.model_version or (None if arm.model else body.model_version),
                loc=("body", "arms", i, "model") if arm.model else ("body", "model"),
            )
            over: dict[str, Any] = {
                k: v for k, v in (("fewshot_k", arm.fewshot_k), ("chat_template", arm.chat_template)) if v is not None
            }
            config = evaluation_config(**(base | over), prompt_template=arm.prompt_template)
            if arm.prompt_template is not None:
                try:
                    await _trial_render(session, bench, config)
                except PromptRenderError as exc:
                    raise FieldError(422, ("body", "arms", i, "prompt_template"), str(exc), "bad_template") from exc
            plans.append((model, arm.name, config | ({"release": True} if arm.release else {})))
    elif body.models is not None:
        batch_id = uuid.uuid4()
        for i, ref in enumerate(body.models):
            model = await resolve_model(session, ref, body.model_version, loc=("body", "models", i))
            plans.append((model, "main", evaluation_config(**base)))
    else:
        assert body.model is not None  # checked above: neither models nor arms, so model is given
        plans.append((await resolve_model(session, body.model, body.model_version), "main", evaluation_config(**base)))
    # the identity map holds rows weakly: keep the resolved ones for the request, so budget planning's
    # session.get finds them without a query
    session.info.setdefault("resolved_rows", []).extend([bench, *(m for m, _a, _c in plans)])
    for i, (model, _a, _c) in enumerate(plans):  # a model that cannot answer the benchmark's requests: 422
        try:
            check_model_fits(bench, model)
        except WorkLimitRefused as exc:
            loc = ("models", i) if body.models is not None else ("arms", i, "model") if body.arms is not None else ("model",)
            raise FieldError(exc.status_code, ("body", *loc), exc.reason, exc.kind) from exc
    evaluations, events = [], []
    for i, (model, arm_name, config) in enumerate(plans):
        evaluation_id = uuid.uuid4()
        with _tracer.start_as_current_span(
            "evaluation",
            attributes={
                "uep.evaluation_id": str(evaluation_id),
                "uep.benchmark": bench.slug,
                "uep.model": model.name,
                "uep.arm": arm_name,
            },
        ):
            ev, event = new_evaluation(
                tenant_id=tenant.id,
                bench=bench,
                model=model,
                sample_limit=body.sample_limit,
                repeats=body.repeats,
                priority=body.priority,
                config=config | judge_config | ({"group_index": i} if batch_id or experiment_id else {}),
                arm=arm_name,
                batch_id=batch_id,
                experiment_id=experiment_id,
                idempotency_key=idempotency_key if i == 0 else None,
                evaluation_id=evaluation_id,
            )
        evaluations.append(ev)
        events.append(event)
    if body.max_cost is not None:  # each evaluation's own cap (uep_common.records.budget records it at check_creation)
        for ev in evaluations:
            ev.config = check_evaluation_config({**ev.config, "max_cost": body.max_cost})
    return evaluations, events


async def _sampling(session: AsyncSession, bench: Benchmark, body: EvaluationOptions) -> dict[str, Any]:
    """The sampling options of a request on ``bench`` (:mod:`uep_common.records.sampling`): method (the request's,
    else the benchmark's ``default_sampling``, else ``first``), seed and the chosen ordinals. 422 naming
    ``sampling`` when a random or stratified run would take more than :data:`MAX_SAMPLED` samples."""
    method = body.sampling or parse_benchmark_config(bench.config).default_sampling or "first"
    n = min(body.sample_limit or bench.sample_count, bench.sample_count)
    if method != "first" and n < bench.sample_count and n > MAX_SAMPLED:
        raise FieldError(
            422,
            ("body", "sampling"),
            f"{method} sampling takes at most {MAX_SAMPLED:,} samples ({n:,} asked): use first, or run the whole benchmark",
            "too_many_sampled",
        )
    ordinals = await choose_ordinals(session, bench.id, bench.sample_count, n, method, body.sampling_seed)
    return {"sampling": method, "sampling_seed": body.sampling_seed, "sample_ordinals": ordinals}


def check_options(options: EvaluationOptions, settings: GatewaySettings, loc: tuple[Any, ...] = ("body",)) -> None:
    """The site's rules on evaluation options beyond their schema, for a create and a schedule alike:
    ``repeats`` at most ``UEP_MAX_REPEATS``. Raises 422 naming the field under ``loc``."""
    if options.repeats > settings.max_repeats:
        raise FieldError(
            422, (*loc, "repeats"), f"at most {settings.max_repeats} repeats, not {options.repeats:,}", "too_many_repeats"
        )


async def _trial_render(session: AsyncSession, bench: Benchmark, config: dict[str, Any]) -> None:
    """Render the prompt the items of an evaluation with ``config`` get (an arm's template, few-shot and chat
    overrides applied: :func:`uep_common.contract.configs.item_prompt`) once, on its first sample with that sample's
    demonstrations, as the inference service will: a template that fails there is refused at creation rather
    than stored and failed item by item as ``prompt_render_error``.

    Raises:
        PromptRenderError: syntax, a variable the sample lacks, a sandbox violation or a work/size limit.
    """
    prompt = item_prompt(bench.config, config)
    check_prompt_template(prompt.template)  # syntax first: needs no sample
    ordinals = config.get("sample_ordinals") or [0]
    sample = await session.scalar(select(Sample).where(Sample.benchmark_id == bench.id, Sample.ordinal == ordinals[0]))
    if sample is None:  # a benchmark without samples has nothing to render
        return
    render_prompt(prompt.template, sample.input, await fewshot_examples(session, sample, prompt.fewshot_k, {}))


async def _accepted_group(session: AsyncSession, first: Evaluation, group: list[Evaluation] | None = None) -> EvaluationAccepted:
    """The 202 body: ``first``'s fields and, for a batch or A/B request, every evaluation of its group."""
    if group is None:
        group = [first]
        if first.batch_id or first.experiment_id:
            col = Evaluation.batch_id if first.batch_id else Evaluation.experiment_id
            group = list(
                await session.scalars(
                    select(Evaluation)
                    .where(col == (first.batch_id or first.experiment_id), Evaluation.tenant_id == first.tenant_id)
                    .order_by(Evaluation.created_at, Evaluation.arm)
                )
            )
    names = {}
    for model_id in {e.model_id for e in group}:  # the models resolved by the request are in the identity map: no query
        model = await session.get(Model, model_id)
        names[model_id] = model.name if model else ""
    accepted = _accepted(first)
    return accepted.model_copy(
        update={
            "batch_id": first.batch_id,
            "experiment_id": first.experiment_id,
            "arm": first.arm,
            "estimated_cost": budget.combined_estimate([parse_evaluation_config(e.config).estimate_dict for e in group]),
            "evaluations": [
                EvaluationRef(
                    id=e.id,
                    status=e.status,
                    total_items=e.total_items,
                    model=names.get(e.model_id, ""),
                    arm=e.arm,
                    links=_accepted(e).links,
                )
                for e in group
            ]
            if len(group) > 1 or first.batch_id or first.experiment_id
            else [],
        }
    )


def _accepted(ev: Evaluation) -> EvaluationAccepted:
    return EvaluationAccepted(
        id=ev.id,
        status=ev.status,
        total_items=ev.total_items,
        links={"self": f"/v1/evaluations/{ev.id}", "results": f"/v1/evaluations/{ev.id}/results"},
        estimated_cost=parse_evaluation_config(ev.config).estimate_dict,
    )


class EvaluationListItem(BaseModel):
    """One evaluation of ``GET /v1/evaluations``: what it runs, where it stands (counters from PostgreSQL), its
    accuracy and its ``headline`` (:func:`uep_common.analytics.summary.headline_of`: a ranker's ``ndcg@10``, a
    classifier's primary metric, an LLM's accuracy); ``links.self`` is its full view."""

    model_config = ConfigDict(protected_namespaces=())

    id: uuid.UUID
    status: str
    priority: str
    benchmark: dict[str, Any]
    model: dict[str, Any]
    sample_limit: int | None
    repeats: int
    batch_id: uuid.UUID | None
    experiment_id: uuid.UUID | None
    arm: str
    schedule_id: uuid.UUID | None
    progress: Progress
    accuracy: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    headline: Headline | None = None
    error: str | None
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    links: dict[str, str]


class EvaluationPage(BaseModel):
    """A page of evaluations, newest first; pass ``next_cursor`` back as ``cursor`` (null: the last page)."""

    items: list[EvaluationListItem]
    next_cursor: str | None


def _list_item(ev: Evaluation, bench: Benchmark | None, model: Model | None) -> EvaluationListItem:
    summary = ev.summary or {}
    return EvaluationListItem(
        id=ev.id,
        status=ev.status,
        priority=ev.priority,
        benchmark={"id": str(ev.benchmark_id)}
        | ({"slug": bench.slug, "name": bench.name, "version": bench.version} if bench else {}),
        model={"id": str(ev.model_id)} | ({"name": model.name, "version": model.version} if model else {}),
        sample_limit=ev.sample_limit,
        repeats=ev.repeats,
        batch_id=ev.batch_id,
        experiment_id=ev.experiment_id,
        arm=ev.arm,
        schedule_id=ev.schedule_id,
        progress=Progress(
            completed=ev.completed_items,
            errors=ev.error_items,
            total=ev.total_items,
            fraction=ev.completed_items / ev.total_items if ev.total_items else 1.0,
            discarded=ev.discarded_items,
        ),
        accuracy=summary.get("accuracy"),
        ci_low=summary.get("ci_low"),
        ci_high=summary.get("ci_high"),
        headline=headline_of(summary),
        error=ev.error,
        created_at=ev.created_at,
        started_at=ev.started_at,
        completed_at=ev.completed_at,
        links={"self": f"/v1/evaluations/{ev.id}", "results": f"/v1/evaluations/{ev.id}/results"},
    )


def _statuses(values: list[str] | None) -> list[str]:
    """The statuses of ``status`` filters (repeated and/or comma-separated). Raises 422 naming ``status``."""
    out: list[str] = []
    for value in values or []:
        for part in value.split(","):
            name = part.strip()
            if not name:
                continue
            if name not in EVALUATION_STATUSES:
                raise FieldError(
                    422,
                    ("query", "status"),
                    f"unknown status {name[:50]!r}; one of {', '.join(EVALUATION_STATUSES)}",
                    "bad_status",
                )
            out.append(name)
    return out


def _aware(value: datetime | None) -> datetime | None:
    """``value`` with a time zone (a naive datetime is taken as UTC)."""
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


@router.get("", response_model=EvaluationPage)
async def list_evaluations(
    status: list[str] | None = Query(
        None, max_length=500, description="Only these statuses: repeat the parameter or give a comma-separated list."
    ),
    benchmark: str | None = Query(None, min_length=1, max_length=100, description="Only evaluations of this benchmark slug."),
    model: str | None = Query(None, min_length=1, max_length=200, description="Only evaluations of this model name."),
    batch_id: uuid.UUID | None = Query(None, description="Only the evaluations of this batch."),
    experiment_id: uuid.UUID | None = Query(None, description="Only the arms of this A/B experiment."),
    created_after: datetime | None = Query(None, description="Created at or after this instant (ISO 8601; naive = UTC)."),
    created_before: datetime | None = Query(None, description="Created before this instant (ISO 8601; naive = UTC)."),
    limit: int = Query(50, ge=1, le=200),
    cursor: str | None = Query(None, max_length=500, description="The previous page's next_cursor."),
    session: AsyncSession = Depends(db_session),
) -> EvaluationPage:
    """The caller's tenant's evaluations, newest first (``created_at``, then ``id``, descending), keyset-
    paginated. Filters combine with AND; an unknown benchmark or model name matches nothing. 422 naming the
    query field for an unknown status, a malformed id, date or cursor, or ``created_before`` not after
    ``created_after``."""
    statuses = _statuses(status)
    after, before = _aware(created_after), _aware(created_before)
    if after is not None and before is not None and before <= after:
        raise FieldError(422, ("query", "created_before"), "created_before must be after created_after", "bad_range")
    q = (
        select(Evaluation, Benchmark, Model)
        .outerjoin(Benchmark, Benchmark.id == Evaluation.benchmark_id)
        .outerjoin(Model, Model.id == Evaluation.model_id)
        .where(tenant_filter(session, Evaluation))
    )
    if statuses:
        q = q.where(Evaluation.status.in_(statuses))
    if benchmark is not None:
        q = q.where(Evaluation.benchmark_id.in_(select(Benchmark.id).where(Benchmark.slug == benchmark)))
    if model is not None:
        q = q.where(Evaluation.model_id.in_(select(Model.id).where(Model.name == model)))
    if batch_id is not None:
        q = q.where(Evaluation.batch_id == batch_id)
    if experiment_id is not None:
        q = q.where(Evaluation.experiment_id == experiment_id)
    if after is not None:
        q = q.where(Evaluation.created_at >= after)
    if before is not None:
        q = q.where(Evaluation.created_at < before)
    if cursor:
        q = q.where(tuple_(Evaluation.created_at, Evaluation.id) < tuple_(*decode_time_id(cursor)))
    rows = (await session.execute(q.order_by(Evaluation.created_at.desc(), Evaluation.id.desc()).limit(limit + 1))).all()
    items = [_list_item(ev, bench, m) for ev, bench, m in rows[:limit]]
    nxt = encode_time_id(items[-1].created_at, items[-1].id) if len(rows) > limit else None
    return EvaluationPage(items=items, next_cursor=nxt)


@router.get("/{evaluation_id}", response_model=EvaluationView)
async def get_evaluation(
    evaluation_id: uuid.UUID, request: Request, session: AsyncSession = Depends(db_session)
) -> EvaluationView:
    """Status, progress (live from Redis while running, else from PostgreSQL) and summary. 404 naming
    ``evaluation_id`` when it is unknown or another tenant's."""
    ev = await owned_evaluation(session, evaluation_id)
    bench = await session.get(Benchmark, ev.benchmark_id)
    model = await session.get(Model, ev.model_id)
    # evaluations.benchmark_id and .model_id: NOT NULL foreign keys (no ON DELETE)
    assert bench is not None and model is not None
    completed, errors = ev.completed_items, ev.error_items
    so_far: dict[str, Any] = {}
    if ev.status == EvaluationStatus.running:
        so_far = await accuracy_so_far(session, ev.id)
    elif ev.summary:  # ended (or a partial summary): the summary's figures
        so_far = {k: ev.summary.get(k) for k in ("correct", "scored", "accuracy", "ci_low", "ci_high")}
        try:
            live = await request.app.state.redis.hgetall(progress_key(ev.id))
            if live:
                completed = max(completed, int(live.get(b"completed", 0)))
                errors = max(errors, int(live.get(b"errors", 0)))
        except Exception:  # noqa: BLE001 - Redis is a cache; fall back to PostgreSQL
            pass
    return EvaluationView(
        id=ev.id,
        status=ev.status,
        priority=ev.priority,
        benchmark={"id": str(bench.id), "slug": bench.slug, "name": bench.name, "version": bench.version},
        model={"id": str(model.id), "name": model.name, "version": model.version},
        sample_limit=ev.sample_limit,
        repeats=ev.repeats,
        max_parallel=parse_evaluation_config(ev.config).max_parallel,
        batch_id=ev.batch_id,
        experiment_id=ev.experiment_id,
        arm=ev.arm,
        schedule_id=ev.schedule_id,
        progress=Progress(
            completed=completed,
            errors=errors,
            total=ev.total_items,
            fraction=completed / ev.total_items if ev.total_items else 1.0,
            discarded=ev.discarded_items,
            **so_far,
        ),
        summary=EvaluationSummary.model_validate(ev.summary) if ev.summary else None,
        headline=headline_of(ev.summary),
        error=ev.error,
        created_at=ev.created_at,
        started_at=ev.started_at,
        completed_at=ev.completed_at,
    )


async def accuracy_so_far(session: AsyncSession, evaluation_id: uuid.UUID) -> dict[str, Any]:
    """The running accuracy of an evaluation over its stored verdicts: ``correct``, ``scored`` (items with a
    true/false verdict; errors and graded items have none), ``accuracy`` = correct / scored and its 95 %
    Wilson score interval ``ci_low``/``ci_high`` (None while nothing is scored) — the rule of the final
    summary (``uep_common.analytics.summary``), applied to the results stored so far. One aggregate over the
    evaluation's ``sample_results`` rows (their ``evaluation_id`` index)."""
    correct, scored = (
        await session.execute(
            select(func.count().filter(SampleResult.is_correct.is_(True)), func.count(SampleResult.is_correct)).where(
                SampleResult.evaluation_id == evaluation_id
            )
        )
    ).one()
    ci = wilson_interval(correct, scored)
    return {
        "correct": correct,
        "scored": scored,
        "accuracy": correct / scored if scored else None,
        "ci_low": ci[0] if ci else None,
        "ci_high": ci[1] if ci else None,
    }


def _decode_cursor(cursor: str) -> tuple[int, int, str]:
    """The (sample ordinal, repeat, arm) of a results cursor. Raises 422 naming ``cursor``."""
    ordinal, repeat, arm = cursor_values(cursor, 3)
    if not (type(ordinal) is int and type(repeat) is int and isinstance(arm, str)):
        raise bad_cursor()
    if not (-INT32_MAX <= ordinal <= INT32_MAX and -INT32_MAX <= repeat <= INT32_MAX and len(arm) <= 64 and "\x00" not in arm):
        raise bad_cursor()  # the columns are INTEGER and VARCHAR(64), and PostgreSQL refuses NUL
    return ordinal, repeat, arm


@router.get("/{evaluation_id}/results", response_model=ResultsPage)
async def list_results(
    evaluation_id: uuid.UUID,
    limit: int = Query(100, ge=1, le=1000),
    cursor: str | None = Query(None, max_length=500),
    session: AsyncSession = Depends(db_session),
) -> ResultsPage:
    """Stored results in benchmark order (sample ordinal, repeat, arm), keyset-paginated. 404 naming
    ``evaluation_id`` when it is unknown or another tenant's."""
    await owned_evaluation(session, evaluation_id)
    key = tuple_(Sample.ordinal, SampleResult.repeat, SampleResult.arm)
    q = (
        select(SampleResult, Sample.ordinal, Sample.external_id)
        .join(Sample, Sample.id == SampleResult.sample_id)
        .where(SampleResult.evaluation_id == evaluation_id)
        .order_by(Sample.ordinal, SampleResult.repeat, SampleResult.arm)
        .limit(limit + 1)
    )
    if cursor:
        q = q.where(key > tuple(_decode_cursor(cursor)))
    rows = (await session.execute(q)).all()
    items = [
        ResultItem(
            sample_ordinal=ordinal,
            external_id=external_id,
            **{k: getattr(r, k) for k in ResultItem.model_fields if k not in ("sample_ordinal", "external_id")},
        )
        for r, ordinal, external_id in rows[:limit]
    ]
    nxt = None
    if len(rows) > limit:
        last = items[-1]
        nxt = encode_cursor(last.sample_ordinal, last.repeat, last.arm)
    return ResultsPage(items=items, next_cursor=nxt)


@router.post("/{evaluation_id}/cancel", response_model=EvaluationView)
async def cancel_evaluation(
    evaluation_id: uuid.UUID, request: Request, session: AsyncSession = Depends(db_session)
) -> EvaluationView:
    """Cancel a pending or running evaluation: nothing more is dispatched, results already stored stay, results
    still in flight are discarded when they arrive (counted in ``progress.discarded``). An EvaluationCompleted
    with status ``cancelled`` is published. 404 when unknown or another tenant's; 409 when the evaluation has
    already finished."""
    ev = await owned_evaluation(session, evaluation_id, lock=True)
    try:
        await lifecycle.end(session, ev, lifecycle.Transition.cancel, EvaluationStatus.cancelled, "cancelled by request", None)
    except lifecycle.IllegalTransition as exc:
        raise FieldError(409, ("path", "evaluation_id"), str(exc), exc.kind) from exc
    await session.commit()
    request.app.state.relay.kick()
    return await get_evaluation(evaluation_id, request, session)
