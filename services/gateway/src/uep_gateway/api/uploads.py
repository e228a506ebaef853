"""``POST /v1/benchmarks`` (custom benchmark upload), ``GET /v1/benchmarks/{ref}/samples`` (preview) and
``GET /v1/metrics`` (the scorer's metric catalogue).

Parsing, validating and rendering an upload, and rendering a preview, run in the gateway's bounded worker
processes (:mod:`uep_gateway.upload_worker`, started with the app), never on the event loop: a file or
template past its time or memory budget is refused (422 naming ``["body", "file"]`` or
``["body", "spec", "prompt", "template"]``) while the gateway keeps answering.
"""

from __future__ import annotations

import gc
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, Depends, FastAPI, File, Form, Query, Request, Response, UploadFile
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.configs import parse_benchmark_config
from uep_common.tables.models import Benchmark, MetricCatalogEntry, Sample
from uep_gateway.benchmark_store import (
    COSTLY_TEMPLATES,
    check_visibility,
    invalid_upload,
    remember_costly,
    spec_errors,
    store_upload,
    template_key,
    workers_of,
)
from uep_gateway.deps import db_session, unscoped_session
from uep_gateway.errors import FieldError
from uep_gateway.schemas import BenchmarkSpec, CatalogBenchmarkView, MetricView, SampleView
from uep_gateway.upload_worker import BudgetExceeded
from uep_gateway.uploads import (
    UploadInvalid,
    render_previews,
    spec_problems,
)
from uep_gateway.usecases.catalog import visible_benchmark
from uep_gateway.validation import NUL_CHECK


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


class PreviewSample(SampleView):
    """A sample in a preview: ``prompt`` is cut to the gateway's ``preview_prompt_chars`` characters
    (``prompt_truncated`` then true); ``prompt_error`` says why the template could not render it."""

    prompt_truncated: bool = False
    prompt_error: str | None = None


@router.get("/metrics", response_model=list[MetricView])
async def list_metrics(session: AsyncSession = Depends(db_session)) -> list[MetricView]:
    """The metrics the scorer registered: name, version, source, ``params_schema`` (the JSON Schema of the
    metric's typed parameters, which a benchmark's ``metric.params`` must fit) and ``reference_schema`` (the JSON
    Schema of the reference it reads, which every uploaded row must fit)."""
    rows = await session.scalars(select(MetricCatalogEntry).order_by(MetricCatalogEntry.name))
    return [MetricView.model_validate(r, from_attributes=True) for r in rows]


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
    check_visibility(visibility)
    try:
        spec_obj = BenchmarkSpec.model_validate_json(spec)
    except ValidationError as exc:
        raise spec_errors(exc) from None
    bad_spec = spec_problems(json.loads(spec))
    if bad_spec:
        raise invalid_upload(UploadInvalid(bad_spec))
    return await store_upload(request, response, session, raw, spec_obj, file, format, visibility)


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
    known = COSTLY_TEMPLATES.get(template_key(template))
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
            remember_costly(template, known)
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
