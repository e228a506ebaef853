"""Storing an uploaded benchmark version: the checks of its metrics and slug, the bounded worker job that reads,
validates and renders every row, and the one-transaction write (used by ``POST /v1/benchmarks`` and the
lm-evaluation-harness import ``POST /v1/benchmarks/lm-eval``).

Parsing, validating and rendering run in the gateway's bounded worker processes (:mod:`uep_gateway.upload_worker`,
started with the app), never on the event loop: a file or template past its time or memory budget is refused
(422 naming ``["body", "file"]`` or ``["body", "spec", "prompt", "template"]``) while the gateway keeps answering.
"""

from __future__ import annotations

import hashlib
import uuid
from collections import OrderedDict
from typing import Any

from fastapi import FastAPI, Request, Response, UploadFile
from pydantic import ValidationError
from sqlalchemy import insert, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.configs import check_benchmark_config, is_set_metric
from uep_common.tables.models import Benchmark, MetricCatalogEntry, Sample
from uep_gateway.errors import DomainError, FieldError
from uep_gateway.lm_eval_docs import check_lm_eval_upload
from uep_gateway.lm_eval_tasks import LmEvalTask
from uep_gateway.schemas import BenchmarkSpec, CatalogBenchmarkView
from uep_gateway.tenancy import caller_tenant_id
from uep_gateway.upload_worker import BudgetExceeded, WorkerPool
from uep_gateway.uploads import (
    FILE_LOC,
    TEMPLATE_LOC,
    UploadInvalid,
    UploadLimits,
    check_upload,
    detect_format,
    metric_params_problems,
    metric_set_problems,
    value_problem,
    with_class_names,
)
from uep_gateway.usecases.catalog import benchmark_view
from uep_gateway.usecases.judging import benchmark_judge_config

# Templates (SHA-256 of the text) that ran past a worker's budget while rendering: refused again at once,
# so that repeating a bomb (an upload, or the preview of one stored earlier) does not tie up a worker.
COSTLY_TEMPLATES: OrderedDict[str, str] = OrderedDict()
_COSTLY_MAX = 1024


def workers_of(app: FastAPI) -> WorkerPool:
    """The app's upload worker pool (``app.state.upload_workers``), made from its settings on first use."""
    pool = getattr(app.state, "upload_workers", None)
    if pool is None:
        s = app.state.settings
        pool = WorkerPool(s.upload_workers, s.upload_worker_timeout_s, s.upload_worker_memory_bytes)
        app.state.upload_workers = pool
    return pool


def spec_errors(exc: ValidationError) -> DomainError:
    """422 naming each problem of the spec under ``["body", "spec", ...]``."""
    return DomainError(
        "invalid", [{"loc": ["body", "spec", *map(str, e["loc"])], "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
    )


def invalid_upload(exc: UploadInvalid) -> DomainError:
    """422 naming each problem of ``exc`` where it is (``loc``)."""
    return DomainError("invalid", [{"loc": p.loc, "msg": p.msg, "type": p.type} for p in exc.problems])


def template_key(template: str) -> str:
    """The key of ``template`` in :data:`COSTLY_TEMPLATES` (SHA-256 hex of its text)."""
    return hashlib.sha256(template.encode("utf-8", "surrogatepass")).hexdigest()


def remember_costly(template: str, reason: str) -> None:
    """Refuse ``template`` at once from now on, saying ``reason`` (the oldest of :data:`COSTLY_TEMPLATES` go
    past ``_COSTLY_MAX``)."""
    COSTLY_TEMPLATES[template_key(template)] = reason
    while len(COSTLY_TEMPLATES) > _COSTLY_MAX:
        COSTLY_TEMPLATES.popitem(last=False)


def _budget_refusal(exc: BudgetExceeded, template: str) -> FieldError:
    """422 naming the template (the job was rendering) or the file (reading it, or not told)."""
    if exc.phase == "render":
        reason = f"rendering the prompt template {exc}"
        remember_costly(template, reason)
        return FieldError("invalid", tuple(TEMPLATE_LOC), reason, "template_too_costly")
    return FieldError("invalid", tuple(FILE_LOC), f"reading the file {exc}", "file_too_costly")


VISIBILITIES = ("private", "shared")
SLUG_LOC = ("body", "spec", "slug")


def check_visibility(visibility: str | None) -> None:
    """Refuse (422 naming ``visibility``) a value other than None or one of :data:`VISIBILITIES`."""
    if visibility is not None and visibility not in VISIBILITIES:
        raise FieldError(
            "invalid", ("body", "visibility"), f"visibility is one of {', '.join(VISIBILITIES)}, not {visibility!r}", "bad_value"
        )


async def _check_slug_owner(raw: AsyncSession, slug: str, tenant_id: uuid.UUID, *, visible_only: bool = False) -> None:
    """Refuse (409 naming ``spec.slug``) a slug that is a built-in, in the site catalogue or another tenant's.

    ``raw`` is an unscoped session: another tenant's private versions are invisible to the caller's own
    session, and this check must see them. Only the existence of such a version is read (no content).
    ``visible_only``: refuse only for what the caller can see anyway (built-ins, the site catalogue, other
    tenants' shared versions); the check made before the upload is validated, so that an invalid upload under
    another tenant's private slug answers exactly as under a free slug. The check after validation refuses
    every other owner with one message, whichever it is."""
    rows = (
        await raw.execute(
            select(Benchmark.owner_tenant_id, Benchmark.is_builtin, Benchmark.visibility)
            .where(Benchmark.slug == slug)
            .distinct()
            .limit(10)
        )
    ).all()
    await raw.rollback()
    if any(builtin for _, builtin, _ in rows):
        raise FieldError("conflict", SLUG_LOC, f"{slug!r} is a built-in benchmark; choose another slug", "builtin_slug")
    others = [
        (owner, visibility)
        for owner, _, visibility in rows
        if owner != tenant_id and (not visible_only or owner is None or visibility == "shared")
    ]
    if others:
        raise FieldError("conflict", SLUG_LOC, f"the slug {slug!r} is not available; choose another slug", "slug_taken")


async def _lock_slug(session: AsyncSession, slug: str) -> None:
    """Serialise uploads of one slug (transaction-scoped advisory lock), so that two tenants racing to create
    the same new slug are told apart by :func:`_check_slug_owner` run after it."""
    await session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": f"uep.benchmark-slug:{slug}"})


async def _extra_metrics(session: AsyncSession, spec: BenchmarkSpec) -> list[MetricCatalogEntry]:
    """The catalogue rows of the per-item metrics ``spec.metrics`` names besides ``spec.metric``. Raises 422
    naming each bad entry (:func:`uep_gateway.uploads.metric_set_problems`)."""
    if not spec.metrics:
        return []
    names = {m.name for m in spec.metrics if not is_set_metric(m.name)}
    rows = list(await session.scalars(select(MetricCatalogEntry).where(MetricCatalogEntry.name.in_(names)))) if names else []
    known = set(await session.scalars(select(MetricCatalogEntry.name)))
    problems = metric_set_problems(
        spec.metric.name, spec.metric.params, [(m.name, m.params, m.primary) for m in spec.metrics], known
    )
    if problems:
        raise invalid_upload(UploadInvalid(problems))
    return [r for r in rows if r.name != spec.metric.name]


async def store_upload(
    request: Request,
    response: Response,
    session: AsyncSession,
    raw: AsyncSession,
    spec_obj: BenchmarkSpec,
    file: UploadFile,
    format: str | None,
    visibility: str | None,
    lm_eval_task: LmEvalTask | None = None,
) -> CatalogBenchmarkView:
    """Check the metrics and slug of ``spec_obj``, read ``file``, validate and render every row in a worker
    (:func:`uep_gateway.uploads.check_upload`, or for an imported lm-eval task
    :func:`uep_gateway.lm_eval_docs.check_lm_eval_upload`, which first renders each document through the
    task) and store the version (201), or answer the identical stored one (200)."""
    settings = request.app.state.settings
    if file.filename and (name_problem := value_problem(file.filename)):
        raise FieldError("invalid", ("body", "file", "filename"), f"the file name {name_problem[1]}", "bad_value")
    metric = await session.get(MetricCatalogEntry, spec_obj.metric.name)
    if metric is None:
        known = list(await session.scalars(select(MetricCatalogEntry.name).order_by(MetricCatalogEntry.name)))
        if not known:
            raise FieldError(
                "unavailable",
                ("body", "spec", "metric", "name"),
                "the metric catalogue is empty: no scorer has started yet",
                "no_metric_catalogue",
            )
        raise FieldError(
            "invalid",
            ("body", "spec", "metric", "name"),
            f"unknown metric {spec_obj.metric.name!r}; known: {', '.join(known)}",
            "unknown_metric",
        )
    problems = metric_params_problems(metric.name, spec_obj.metric.params, ["body", "spec", "metric"])
    if problems:
        raise invalid_upload(UploadInvalid(problems))
    extra_metrics = await _extra_metrics(session, spec_obj)
    tenant_id = caller_tenant_id(session)
    await _check_slug_owner(raw, spec_obj.slug, tenant_id, visible_only=True)
    data = await file.read(settings.max_upload_bytes + 1)
    if len(data) > settings.max_upload_bytes:
        raise FieldError("too_large", ("body", "file"), f"file larger than {settings.max_upload_bytes} bytes", "too_large")
    try:
        fmt = detect_format(file.filename, format)
    except UploadInvalid as exc:
        raise invalid_upload(exc) from None
    template = spec_obj.prompt.template
    config: dict[str, Any] = {
        "prompt": spec_obj.prompt.model_dump(),
        "metric": spec_obj.metric.model_dump(),
        "language": spec_obj.language,
    }
    if spec_obj.metrics:
        config["metrics"] = [m.model_dump() for m in spec_obj.metrics]
    if spec_obj.class_names:
        config["class_names"] = spec_obj.class_names
    if spec_obj.positive_class is not None:
        config["positive_class"] = spec_obj.positive_class
    judge = await benchmark_judge_config(session, spec_obj.evaluation_type, spec_obj.judge)
    if judge is not None:
        config["judge"] = judge
    try:
        config = check_benchmark_config(config)
    except ValidationError as exc:  # BenchmarkSpec checked these fields already; a problem left is named the same way
        raise spec_errors(exc) from None
    if (costly := COSTLY_TEMPLATES.get(template_key(template))) is not None:
        raise FieldError("invalid", tuple(TEMPLATE_LOC), costly, "template_too_costly")
    limits = UploadLimits(
        max_rows=settings.max_upload_rows,
        max_columns=settings.max_upload_columns,
        max_decoded_bytes=settings.max_upload_decoded_bytes,
        max_row_bytes=settings.max_upload_row_bytes,
        max_prompt_chars=settings.max_prompt_chars,
    )
    try:
        schemas = {m.name: with_class_names(m.reference_schema or {}, spec_obj.class_names) for m in [metric, *extra_metrics]}
        if lm_eval_task is None:
            rows, version = await workers_of(request.app).run(check_upload, data, fmt, template, limits, config, schemas)
        else:
            rows, version = await workers_of(request.app).run(
                check_lm_eval_upload, data, fmt, lm_eval_task, limits, config, schemas
            )
    except UploadInvalid as exc:
        raise invalid_upload(exc) from None
    except BudgetExceeded as exc:
        raise _budget_refusal(exc, template) from None
    del data
    await _lock_slug(session, spec_obj.slug)
    await _check_slug_owner(raw, spec_obj.slug, tenant_id)
    existing = await session.scalar(select(Benchmark).where(Benchmark.slug == spec_obj.slug, Benchmark.version == version))
    if existing is not None:
        response.status_code = 200
        return benchmark_view(session, existing)
    if visibility is None:
        latest = await session.scalar(
            select(Benchmark.visibility)
            .where(Benchmark.slug == spec_obj.slug, Benchmark.owner_tenant_id == tenant_id)
            .order_by(Benchmark.created_at.desc())
            .limit(1)
        )
        visibility = latest or "private"
    bench = Benchmark(
        id=uuid.uuid4(),
        slug=spec_obj.slug,
        name=spec_obj.name,
        description=spec_obj.description,
        version=version,
        category=spec_obj.category,
        status=spec_obj.status,
        is_builtin=False,
        evaluation_type=spec_obj.evaluation_type.value,
        capability_dimensions=spec_obj.capability_dimensions,
        config=config,
        license=spec_obj.license,
        source=spec_obj.source or f"upload: {file.filename} ({fmt})",
        sample_count=len(rows),
        owner_tenant_id=tenant_id,
        visibility=visibility,
    )
    session.add(bench)
    try:
        await session.flush()
    except IntegrityError:  # (slug, version) is unique site-wide: another tenant's identical upload won the race
        await session.rollback()
        raise FieldError(
            "conflict", SLUG_LOC, f"the slug {spec_obj.slug!r} is not available; choose another slug", "slug_taken"
        ) from None
    values = [
        {
            "benchmark_id": bench.id,
            "ordinal": r.ordinal,
            "external_id": r.external_id,
            "input": r.input,
            "reference": r.reference,
            "meta": r.meta,
        }
        for r in rows
    ]
    for i in range(0, len(values), 2000):
        await session.execute(insert(Sample), values[i : i + 2000])
    await session.commit()
    await session.refresh(bench)
    response.headers["Location"] = f"/v1/benchmarks/{bench.id}"
    return benchmark_view(session, bench)
