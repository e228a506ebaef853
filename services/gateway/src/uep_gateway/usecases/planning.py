"""Planning the evaluations of a create request: resolve the benchmark and the models the caller means,
check the options, choose the samples, trial-render custom templates, and build the rows and their
EvaluationRequested events (not yet added to the session) — for one model, a batch (``models``) or an A/B
experiment (``arms``). Creating (``POST /v1/evaluations``), estimating (``POST /v1/evaluations/estimate``) and
schedules share it.

Every refusal is a :class:`uep_gateway.errors.FieldError` naming the body field (kind ``invalid``, or the
kind of a work-limit refusal).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.configs import EvaluationType, check_evaluation_config, item_prompt, parse_benchmark_config
from uep_common.contract.events import EvaluationRequested
from uep_common.prompting.fewshot import fewshot_examples
from uep_common.prompting.prompts import PromptRenderError, check_prompt_template, render_prompt
from uep_common.records.creation import (
    ModelUnusableError,
    WorkLimitRefused,
    check_model_fits,
    evaluation_config,
    new_evaluation,
    usable_model,
)
from uep_common.records.sampling import MAX_SAMPLED, choose_ordinals
from uep_common.runtime.telemetry import tracer
from uep_common.tables.models import Benchmark, Evaluation, Model, Sample, Tenant
from uep_gateway.errors import FieldError, refusal_kind
from uep_gateway.model_health import ModelHealth
from uep_gateway.schemas import EvaluationCreate, EvaluationOptions
from uep_gateway.settings import GatewaySettings
from uep_gateway.tenancy import caller_tenant_id
from uep_gateway.usecases.judging import evaluation_judge_config

_tracer = tracer("uep.gateway")


def _as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


async def resolve_benchmark(session: AsyncSession, ref: str, version: str | None) -> Benchmark:
    """Benchmark by slug or id (newest active version unless ``version``). Raises ``invalid`` naming the field."""
    q = select(Benchmark)
    as_id = _as_uuid(ref)
    q = q.where(Benchmark.id == as_id) if as_id else q.where(Benchmark.slug == ref)
    if version:
        q = q.where(Benchmark.version == version)
    bench = await session.scalar(q.where(Benchmark.status != "draft").order_by(Benchmark.created_at.desc()).limit(1))
    if bench is None:
        if version and await session.scalar(select(Benchmark.id).where(Benchmark.slug == ref).limit(1)):
            raise FieldError(
                "invalid",
                ("body", "benchmark_version"),
                f"benchmark {ref!r} has no version {version!r}",
                "unknown_benchmark_version",
            )
        raise FieldError("invalid", ("body", "benchmark"), f"unknown benchmark {ref!r}", "unknown_benchmark")
    if bench.evaluation_type not in (EvaluationType.automatic, EvaluationType.llm_judge, EvaluationType.hybrid):
        raise FieldError(
            "invalid",
            ("body", "benchmark"),
            f"benchmark {ref!r} needs evaluation type {bench.evaluation_type!r}, which is not available yet",
            "unsupported_evaluation_type",
        )
    if bench.sample_count == 0:
        raise FieldError("invalid", ("body", "benchmark"), f"benchmark {ref!r} has no samples", "empty_benchmark")
    return bench


async def resolve_model(session: AsyncSession, ref: str, version: str | None, loc: tuple[Any, ...] | None = None) -> Model:
    """The model the caller means by ``ref`` (name, ``name@version`` or id) among the models its tenant may see
    and evaluate (:func:`uep_common.records.creation.usable_model`: its own, then site, then shared; the newest active
    version unless ``version``). Raises ``invalid`` naming the field (``loc``, default ``body.model`` /
    ``body.model_version``): ``unknown_model``, ``model_inactive`` (deactivated), ``conflicting_fields``."""
    try:
        return await usable_model(session, ref, version, caller_tenant_id(session))
    except ModelUnusableError as exc:
        where = ("body", exc.field) if loc in (None, ("body", "model")) else loc
        raise FieldError("invalid", where, exc.reason, exc.kind) from exc


async def plan_evaluations(
    session: AsyncSession, tenant: Tenant, body: EvaluationCreate, idempotency_key: str | None = None
) -> tuple[list[Evaluation], list[EvaluationRequested]]:
    """The evaluations a create request asks for (not added to the session) and their events: one; one per
    model of ``models`` (same ``batch_id``); or one per arm of ``arms`` (same ``experiment_id``). Raises
    ``invalid`` naming the field (``model``, ``models[i]``, ``arms[i].model``, ``arms[i].prompt_template``…)."""
    if sum(x is not None for x in (body.models, body.arms)) > 1:
        raise FieldError(
            "invalid",
            ("body", "arms"),
            "give either models (a batch) or arms (an A/B experiment), not both",
            "conflicting_fields",
        )
    if body.models is not None and body.model is not None:
        raise FieldError("invalid", ("body", "models"), "give either model or models, not both", "conflicting_fields")
    if body.models is None and body.model is None and not (body.arms and all(a.model for a in body.arms)):
        raise FieldError("invalid", ("body", "model"), "model is required (or models, or a model in every arm)", "missing")
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
                raise FieldError("invalid", ("body", "arms", i, "name"), f"arm name {arm.name!r} used twice", "duplicate_arm")
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
                    raise FieldError("invalid", ("body", "arms", i, "prompt_template"), str(exc), "bad_template") from exc
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
    for i, (model, _a, _c) in enumerate(plans):  # a model that cannot answer the benchmark's requests: invalid
        try:
            check_model_fits(bench, model)
        except WorkLimitRefused as exc:
            loc = ("models", i) if body.models is not None else ("arms", i, "model") if body.arms is not None else ("model",)
            raise FieldError(refusal_kind(exc.status_code), ("body", *loc), exc.reason, exc.kind) from exc
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
    else the benchmark's ``default_sampling``, else ``first``), seed and the chosen ordinals. ``invalid`` naming
    ``sampling`` when a random or stratified run would take more than :data:`MAX_SAMPLED` samples."""
    method = body.sampling or parse_benchmark_config(bench.config).default_sampling or "first"
    n = min(body.sample_limit or bench.sample_count, bench.sample_count)
    if method != "first" and n < bench.sample_count and n > MAX_SAMPLED:
        raise FieldError(
            "invalid",
            ("body", "sampling"),
            f"{method} sampling takes at most {MAX_SAMPLED:,} samples ({n:,} asked): use first, or run the whole benchmark",
            "too_many_sampled",
        )
    ordinals = await choose_ordinals(session, bench.id, bench.sample_count, n, method, body.sampling_seed)
    return {"sampling": method, "sampling_seed": body.sampling_seed, "sample_ordinals": ordinals}


def check_options(options: EvaluationOptions, settings: GatewaySettings, loc: tuple[Any, ...] = ("body",)) -> None:
    """The site's rules on evaluation options beyond their schema, for a create and a schedule alike:
    ``repeats`` at most ``UEP_MAX_REPEATS``. Raises ``invalid`` naming the field under ``loc``."""
    if options.repeats > settings.max_repeats:
        raise FieldError(
            "invalid", (*loc, "repeats"), f"at most {settings.max_repeats} repeats, not {options.repeats:,}", "too_many_repeats"
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


def _model_loc(body: EvaluationCreate, i: int) -> tuple[Any, ...]:
    """The field that named the model of the ``i``-th planned evaluation."""
    if body.models is not None:
        return ("body", "models", i)
    if body.arms is not None and body.arms[i].model:
        return ("body", "arms", i, "model")
    return ("body", "model")


async def check_models_answer(
    health: ModelHealth, session: AsyncSession, body: EvaluationCreate, evaluations: list[Evaluation]
) -> None:
    """Refuse (409 naming the field that named it, kind ``model_unavailable``) a planned evaluation whose
    model's endpoint does not answer its readiness check (:mod:`uep_gateway.model_health`); each distinct
    model is asked once, all of them side by side."""
    models: dict[uuid.UUID, tuple[Model, tuple[Any, ...]]] = {}
    for i, ev in enumerate(evaluations):
        model = await session.get(Model, ev.model_id)
        if model is not None and model.id not in models:
            models[model.id] = (model, _model_loc(body, i))
    problems = await asyncio.gather(*(health.problem(m) for m, _loc in models.values()))
    for (model, loc), problem in zip(models.values(), problems, strict=True):
        if problem is not None:
            raise FieldError(
                "conflict",
                loc,
                f"model {model.name}@{model.version} cannot be evaluated now: {problem}",
                "model_unavailable",
            )
