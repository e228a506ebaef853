"""``POST /v1/benchmarks`` (custom benchmark upload), ``GET /v1/benchmarks/{ref}/samples`` (preview) and
``GET /v1/metrics`` (the scorer's metric catalogue)."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Depends, File, Form, Query, Request, Response, UploadFile
from pydantic import ValidationError
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.benchmarks import content_hash
from uep_common.db.models import Benchmark, MetricCatalogEntry, Sample
from uep_common.params import param_problems
from uep_common.prompts import render_prompt
from uep_gateway.api.catalog import benchmark_view
from uep_gateway.api.judges import benchmark_judge_config
from uep_gateway.deps import db_session
from uep_gateway.errors import FieldError, FieldErrors
from uep_gateway.schemas import BenchmarkSpec, BenchmarkView, MetricView, SampleView
from uep_gateway.uploads import UploadInvalid, detect_format, read_records, validate_rows

router = APIRouter(prefix="/v1", tags=["catalogue"])


def _invalid(exc: UploadInvalid) -> FieldErrors:
    return FieldErrors(422, [{"loc": p.loc, "msg": p.msg, "type": p.type} for p in exc.problems])


@router.get("/metrics", response_model=list[MetricView])
async def list_metrics(session: AsyncSession = Depends(db_session)) -> list[MetricView]:
    """The metrics the scorer registered (name, version, parameters, source)."""
    rows = await session.scalars(select(MetricCatalogEntry).order_by(MetricCatalogEntry.name))
    return [MetricView.model_validate(r, from_attributes=True) for r in rows]


@router.post("/benchmarks", status_code=201, response_model=BenchmarkView)
async def upload_benchmark(
    request: Request,
    response: Response,
    spec: str = Form(
        ...,
        description='BenchmarkSpec as JSON: {"slug", "name", "prompt": {"template", "max_tokens"?, "stop"?}, '
        '"metric": {"name", "params"?}, "description"?, "category"?, "status"?, "capability_dimensions"?, '
        '"language"?, "license"?, "source"?} (README, "Custom benchmarks")',
    ),
    file: UploadFile = File(..., description="JSONL, CSV or Parquet rows"),
    format: str | None = Form(None, description="jsonl | csv | parquet (default: from the file name)"),
    session: AsyncSession = Depends(db_session),
) -> BenchmarkView:
    """Upload a custom benchmark version. 201 when new; 200 with the existing version when the same
    content was uploaded before (a version is the content hash). Every problem names the field (and, for
    rows, the line); nothing is stored unless the whole upload is valid."""
    settings = request.app.state.settings
    try:
        spec_obj = BenchmarkSpec.model_validate_json(spec)
    except ValidationError as exc:
        raise FieldErrors(
            422, [{"loc": ["body", "spec", *map(str, e["loc"])], "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        ) from None
    metric = await session.get(MetricCatalogEntry, spec_obj.metric.name)
    if metric is None:
        known = list(await session.scalars(select(MetricCatalogEntry.name).order_by(MetricCatalogEntry.name)))
        if not known:
            raise FieldError(503, ("body", "spec", "metric", "name"), "the metric catalogue is empty: no scorer has started yet", "no_metric_catalogue")
        raise FieldError(422, ("body", "spec", "metric", "name"),
                         f"unknown metric {spec_obj.metric.name!r}; known: {', '.join(known)}", "unknown_metric")
    problems = param_problems(spec_obj.metric.params, metric.param_types or {k: "any" for k in metric.params},
                              metric.required_params)
    if problems:
        raise FieldErrors(422, [
            {"loc": ["body", "spec", "metric", "params", name], "msg": f"{metric.name} parameter {name!r} {reason}",
             "type": "unknown_param" if reason.startswith("unknown") else "bad_param"}
            for name, reason in problems
        ])
    builtin = await session.scalar(select(Benchmark.id).where(Benchmark.slug == spec_obj.slug, Benchmark.is_builtin.is_(True)).limit(1))
    if builtin:
        raise FieldError(409, ("body", "spec", "slug"), f"{spec_obj.slug!r} is a built-in benchmark; choose another slug", "builtin_slug")
    data = await file.read(settings.max_upload_bytes + 1)
    if len(data) > settings.max_upload_bytes:
        raise FieldError(413, ("body", "file"), f"file larger than {settings.max_upload_bytes} bytes", "too_large")
    try:
        fmt = detect_format(file.filename, format)
        rows = validate_rows(read_records(data, fmt), spec_obj.prompt.template, settings.max_upload_rows)
    except UploadInvalid as exc:
        raise _invalid(exc) from None
    config = {
        "prompt": spec_obj.prompt.model_dump(),
        "metric": spec_obj.metric.model_dump(),
        "language": spec_obj.language,
    }
    judge = await benchmark_judge_config(session, spec_obj.evaluation_type, spec_obj.judge)
    if judge is not None:
        config["judge"] = judge
    version = content_hash(config, rows)
    existing = await session.scalar(select(Benchmark).where(Benchmark.slug == spec_obj.slug, Benchmark.version == version))
    if existing is not None:
        response.status_code = 200
        return benchmark_view(existing)
    bench = Benchmark(
        id=uuid.uuid4(), slug=spec_obj.slug, name=spec_obj.name, description=spec_obj.description, version=version,
        category=spec_obj.category, status=spec_obj.status, is_builtin=False, evaluation_type=spec_obj.evaluation_type,
        capability_dimensions=spec_obj.capability_dimensions, config=config, license=spec_obj.license,
        source=spec_obj.source or f"upload: {file.filename} ({fmt})", sample_count=len(rows),
    )
    session.add(bench)
    await session.flush()
    values = [
        {"benchmark_id": bench.id, "ordinal": r.ordinal, "external_id": r.external_id, "input": r.input,
         "reference": r.reference, "meta": r.meta}
        for r in rows
    ]
    for i in range(0, len(values), 2000):
        await session.execute(insert(Sample), values[i : i + 2000])
    await session.commit()
    await session.refresh(bench)
    response.headers["Location"] = f"/v1/benchmarks/{bench.id}"
    return benchmark_view(bench)


@router.get("/benchmarks/{ref}/samples", response_model=list[SampleView])
async def preview_samples(
    ref: str,
    version: str | None = Query(None, max_length=64),
    limit: int = Query(5, ge=1, le=100),
    offset: int = Query(0, ge=0),
    session: AsyncSession = Depends(db_session),
) -> list[SampleView]:
    """Samples of a benchmark (slug or id; newest version unless ``version``) with their rendered prompts."""
    try:
        as_id = uuid.UUID(ref)
    except ValueError:
        as_id = None
    q = select(Benchmark).where(Benchmark.id == as_id) if as_id else select(Benchmark).where(Benchmark.slug == ref)
    if version:
        q = q.where(Benchmark.version == version)
    bench = await session.scalar(q.order_by(Benchmark.created_at.desc()).limit(1))
    if bench is None:
        raise FieldError(404, ("path", "ref"), f"unknown benchmark {ref!r}" + (f" version {version!r}" if version else ""), "unknown_benchmark")
    samples = await session.scalars(
        select(Sample).where(Sample.benchmark_id == bench.id).order_by(Sample.ordinal).offset(offset).limit(limit)
    )
    template = (bench.config.get("prompt") or {}).get("template", "")
    return [
        SampleView(ordinal=s.ordinal, external_id=s.external_id, input=s.input, reference=s.reference,
                   prompt=render_prompt(template, s.input))
        for s in samples
    ]
