"""``POST /v1/benchmarks`` (custom benchmark upload), ``GET /v1/benchmarks/{ref}/samples`` (preview) and
``GET /v1/metrics`` (the scorer's metric catalogue).

Parsing, validating and rendering an upload, and rendering a preview, run in the gateway's bounded worker
processes (:mod:`uep_gateway.upload_worker`, started with the app), never on the event loop: a file or
template past its time or memory budget is refused (422 naming ``["body", "file"]`` or
``["body", "spec", "prompt", "template"]``) while the gateway keeps answering.
"""

from __future__ import annotations

import gc
import hashlib
import json
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, File, Form, Query, Request, Response, UploadFile
from pydantic import ValidationError
from sqlalchemy import insert, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.configs import check_benchmark_config, is_set_metric, parse_benchmark_config
from uep_common.contract.params import param_problems
from uep_common.tables.models import Benchmark, MetricCatalogEntry, Sample
from uep_gateway.deps import db_session, unscoped_session
from uep_gateway.errors import DomainError, FieldError
from uep_gateway.schemas import BenchmarkSpec, CatalogBenchmarkView, MetricView, SampleView
from uep_gateway.tenancy import caller_tenant_id
from uep_gateway.upload_worker import BudgetExceeded, WorkerPool
from uep_gateway.uploads import (
    FILE_LOC,
    TEMPLATE_LOC,
    UploadInvalid,
    UploadLimits,
    check_upload,
    detect_format,
    metric_set_problems,
    render_previews,
    spec_problems,
    value_problem,
    with_class_names,
)
from uep_gateway.usecases.catalog import benchmark_view, visible_benchmark
from uep_gateway.usecases.judging import benchmark_judge_config
from uep_gateway.validation import NUL_CHECK

# Templates (SHA-256 of the text) that ran past a worker's budget while rendering: refused again at once,
# so that repeating a bomb (an upload, or the preview of one stored earlier) does not tie up a worker.
_COSTLY_TEMPLATES: OrderedDict[str, str] = OrderedDict()
_COSTLY_MAX = 1024


def workers_of(app: FastAPI) -> WorkerPool:
    """The app's upload worker pool (``app.state.upload_workers``), made from its settings on first use."""
    pool = getattr(app.state, "upload_workers", None)
    if pool is None:
        s = app.state.settings
        pool = WorkerPool(s.upload_workers, s.upload_worker_timeout_s, s.upload_worker_memory_bytes)
        app.state.upload_workers = pool
    return pool


@asynccontextmanager
async def _workers_lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Start the upload workers with the app (stop them with it), then ``gc.freeze()`` what startup made:
    a full collection over the gateway's ~200,000 startup objects pauses the event loop ~130 ms (more on a
    busy machine); frozen, they are never scanned again."""
    pool = workers_of(app)
    await pool.start()
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        await pool.close()


router = APIRouter(prefix="/v1", tags=["catalogue"], lifespan=_workers_lifespan, dependencies=NUL_CHECK)


def _spec_errors(exc: ValidationError) -> DomainError:
    """422 naming each problem of the spec under ``["body", "spec", ...]``."""
    return DomainError(
        "invalid", [{"loc": ["body", "spec", *map(str, e["loc"])], "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
    )


def _invalid(exc: UploadInvalid) -> DomainError:
    return DomainError("invalid", [{"loc": p.loc, "msg": p.msg, "type": p.type} for p in exc.problems])


def _template_key(template: str) -> str:
    return hashlib.sha256(template.encode("utf-8", "surrogatepass")).hexdigest()


def _remember_costly(template: str, reason: str) -> None:
    _COSTLY_TEMPLATES[_template_key(template)] = reason
    while len(_COSTLY_TEMPLATES) > _COSTLY_MAX:
        _COSTLY_TEMPLATES.popitem(last=False)


def _budget_refusal(exc: BudgetExceeded, template: str) -> FieldError:
    """422 naming the template (the job was rendering) or the file (reading it, or not told)."""
    if exc.phase == "render":
        reason = f"rendering the prompt template {exc}"
        _remember_costly(template, reason)
        return FieldError("invalid", tuple(TEMPLATE_LOC), reason, "template_too_costly")
    return FieldError("invalid", tuple(FILE_LOC), f"reading the file {exc}", "file_too_costly")


class PreviewSample(SampleView):
    """A sample in a preview: ``prompt`` is cut to the gateway's ``preview_prompt_chars`` characters
    (``prompt_truncated`` then true); ``prompt_error`` says why the template could not render it."""

    prompt_truncated: bool = False
    prompt_error: str | None = None


VISIBILITIES = ("private", "shared")
SLUG_LOC = ("body", "spec", "slug")


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


@router.get("/metrics", response_model=list[MetricView])
async def list_metrics(session: AsyncSession = Depends(db_session)) -> list[MetricView]:
    """The metrics the scorer registered (name, version, parameters, source, and the JSON Schema of the reference
    each reads, which every uploaded row must fit)."""
    rows = await session.scalars(select(MetricCatalogEntry).order_by(MetricCatalogEntry.name))
    return [MetricView.model_validate(r, from_attributes=True) for r in rows]


async def _extra_metrics(session: AsyncSession, spec: BenchmarkSpec) -> list[MetricCatalogEntry]:
    """The catalogue rows of the per-item metrics ``spec.metrics`` names besides ``spec.metric``. Raises 422
    naming each bad entry (:func:`uep_gateway.uploads.metric_set_problems`)."""
    if not spec.metrics:
        return []
    names = {m.name for m in spec.metrics if not is_set_metric(m.name)}
    rows = list(await session.scalars(select(MetricCatalogEntry).where(MetricCatalogEntry.name.in_(names)))) if names else []
    known = {r.name: (r.param_types or dict.fromkeys(r.params, "any"), list(r.required_params or [])) for r in rows} | {
        n: ({}, []) for n in await session.scalars(select(MetricCatalogEntry.name)) if n not in names
    }
    problems = metric_set_problems(
        spec.metric.name, spec.metric.params, [(m.name, m.params, m.primary) for m in spec.metrics], known
    )
    if problems:
        raise _invalid(UploadInvalid(problems))
    return [r for r in rows if r.name != spec.metric.name]


@router.post("/benchmarks", status_code=201, response_model=CatalogBenchmarkView)
async def upload_benchmark(
    request: Request,
    response: Response,
    spec: str = Form(
        ...,
        description='BenchmarkSpec as JSON: {"slug", "name", "prompt": {"template", "max_tokens"?, "stop"?}, '
        '"metric": {"name", "params"?}, "metrics"?: [{"name", "params"?, "primary"?}], "class_names"?, '
        '"positive_class"?, "description"?, "category"?, "status"?, "capability_dimensions"?, '
        '"language"?, "license"?, "source"?} (README, "Custom benchmarks")',
    ),
    file: UploadFile = File(..., description="JSONL, CSV or Parquet rows"),
    format: str | None = Form(None, description="jsonl | csv | parquet (default: from the file name)"),
    visibility: str | None = Form(
        None,
        description="private (only the caller's tenant sees it) | shared (every tenant may read and evaluate it); "
        "default: the visibility of the slug's latest version, private for a new slug",
    ),
    session: AsyncSession = Depends(db_session),
    raw: AsyncSession = Depends(unscoped_session),
) -> CatalogBenchmarkView:
    """Upload a custom benchmark version, owned by the caller's tenant. 201 when new; 200 with the existing
    version when the same content was uploaded before (a version is the content hash). A slug is one
    tenant's: a built-in's, the site catalogue's or another tenant's slug is 409 naming ``spec.slug`` (another
    tenant's private slug only once the rest of the upload is valid, so an invalid upload answers as it would
    under a free slug and the refusal does not tell a private slug from a shared one).
    Every problem names the field (and, for rows, the line); nothing is stored unless the whole upload is
    valid."""
    settings = request.app.state.settings
    if visibility is not None and visibility not in VISIBILITIES:
        raise FieldError(
            "invalid", ("body", "visibility"), f"visibility is one of {', '.join(VISIBILITIES)}, not {visibility!r}", "bad_value"
        )
    try:
        spec_obj = BenchmarkSpec.model_validate_json(spec)
    except ValidationError as exc:
        raise _spec_errors(exc) from None
    bad_spec = spec_problems(json.loads(spec))
    if bad_spec:
        raise _invalid(UploadInvalid(bad_spec))
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
    problems = param_problems(
        spec_obj.metric.params, metric.param_types or dict.fromkeys(metric.params, "any"), metric.required_params
    )
    if problems:
        raise DomainError(
            "invalid",
            [
                {
                    "loc": ["body", "spec", "metric", "params", name],
                    "msg": f"{metric.name} parameter {name!r} {reason}",
                    "type": "unknown_param" if reason.startswith("unknown") else "bad_param",
                }
                for name, reason in problems
            ],
        )
    extra_metrics = await _extra_metrics(session, spec_obj)
    tenant_id = caller_tenant_id(session)
    await _check_slug_owner(raw, spec_obj.slug, tenant_id, visible_only=True)
    data = await file.read(settings.max_upload_bytes + 1)
    if len(data) > settings.max_upload_bytes:
        raise FieldError("too_large", ("body", "file"), f"file larger than {settings.max_upload_bytes} bytes", "too_large")
    try:
        fmt = detect_format(file.filename, format)
    except UploadInvalid as exc:
        raise _invalid(exc) from None
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
        raise _spec_errors(exc) from None
    if (costly := _COSTLY_TEMPLATES.get(_template_key(template))) is not None:
        raise FieldError("invalid", tuple(TEMPLATE_LOC), costly, "template_too_costly")
    limits = UploadLimits(
        max_rows=settings.max_upload_rows,
        max_columns=settings.max_upload_columns,
        max_decoded_bytes=settings.max_upload_decoded_bytes,
        max_row_bytes=settings.max_upload_row_bytes,
        max_prompt_chars=settings.max_prompt_chars,
    )
    try:
        rows, version = await workers_of(request.app).run(
            check_upload,
            data,
            fmt,
            template,
            limits,
            config,
            {m.name: with_class_names(m.reference_schema or {}, spec_obj.class_names) for m in [metric, *extra_metrics]},
        )
    except UploadInvalid as exc:
        raise _invalid(exc) from None
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


@router.get("/benchmarks/{ref}/samples", response_model=list[PreviewSample])
async def preview_samples(
    request: Request,
    response: Response,
    ref: str,
    version: str | None = Query(None, max_length=64),
    limit: int = Query(5, ge=1, le=100),
    offset: int = Query(0, ge=0),
    session: AsyncSession = Depends(db_session),
) -> list[PreviewSample]:
    """Samples of a benchmark (slug or id; newest version unless ``version``) with their rendered prompts.

    Bounded: the prompts are rendered in a worker process within ``preview_timeout_s`` seconds (past it,
    or when the template fails on a sample, ``prompt`` is ``""`` and ``prompt_error`` says why); each
    prompt is cut to ``preview_prompt_chars`` characters (``prompt_truncated``); and the page ends before
    the first sample that would take the response (JSON) past ``preview_max_bytes`` bytes; it then carries
    ``X-Uep-Preview-Truncated: true`` and ``X-Uep-Preview-Next-Offset`` (the offset of that sample).
    Uploads bound each row to ``max_upload_row_bytes``, well under the response bound."""
    settings = request.app.state.settings
    try:
        as_id = uuid.UUID(ref)
    except ValueError:
        as_id = None
    q = select(Benchmark).where(Benchmark.id == as_id) if as_id else select(Benchmark).where(Benchmark.slug == ref)
    q = q.where(visible_benchmark(session))
    if version:
        q = q.where(Benchmark.version == version)
    bench = await session.scalar(q.order_by(Benchmark.created_at.desc()).limit(1))
    if bench is None:
        raise FieldError(
            "not_found",
            ("path", "ref"),
            f"unknown benchmark {ref!r}" + (f" version {version!r}" if version else ""),
            "unknown_benchmark",
        )
    samples = list(
        await session.scalars(
            select(Sample).where(Sample.benchmark_id == bench.id).order_by(Sample.ordinal).offset(offset).limit(limit)
        )
    )
    template = parse_benchmark_config(bench.config).template or ""
    known = _COSTLY_TEMPLATES.get(_template_key(template))
    rendered: list[tuple[str, bool, str | None]] | None = None
    if known is None and samples:
        try:
            rendered = await workers_of(request.app).run(
                render_previews,
                template,
                [s.input for s in samples],
                settings.preview_prompt_chars,
                timeout_s=settings.preview_timeout_s,
            )
        except BudgetExceeded as exc:
            known = f"rendering the prompt template {exc}"
            _remember_costly(template, known)
    if rendered is None:
        rendered = [("", False, known)] * len(samples)
    out: list[PreviewSample] = []
    size = 2  # the list's brackets
    for i, (s, (prompt, truncated, error)) in enumerate(zip(samples, rendered, strict=True)):
        view = PreviewSample(
            ordinal=s.ordinal,
            external_id=s.external_id,
            input=s.input,
            reference=s.reference,
            prompt=prompt,
            prompt_truncated=truncated,
            prompt_error=error,
        )
        size += len(view.model_dump_json().encode()) + (1 if out else 0)
        if size > settings.preview_max_bytes:
            response.headers["X-Uep-Preview-Truncated"] = "true"
            response.headers["X-Uep-Preview-Next-Offset"] = str(offset + i)
            break
        out.append(view)
    return out
