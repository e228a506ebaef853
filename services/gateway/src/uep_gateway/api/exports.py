"""``GET /v1/evaluations/{id}/export``: every stored item of an evaluation in the format of another tool —
lm-evaluation-harness's ``samples_<task>.jsonl`` (``format=lm-eval``) or Inspect AI's JSON eval log
(``format=inspect``); the shapes are :mod:`uep_gateway.exports`'. Streamed page by page, so an evaluation of any
size is exported in bounded memory; another tenant's evaluation is 404 as an unknown one."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from sqlalchemy.ext.asyncio import AsyncSession

from uep_gateway.benchmark_store import workers_of
from uep_gateway.deps import db_session
from uep_gateway.errors import FieldError
from uep_gateway.exports import EXPORT_FORMATS, RunRecord, inspect_header, inspect_sample, lm_eval_sample
from uep_gateway.usecases.evaluations import owned_evaluation
from uep_gateway.usecases.exports import ExportContext, export_context, export_items, export_totals, item_record

router = APIRouter(prefix="/v1/evaluations", tags=["evaluations"])


def _max_tokens(ctx: ExportContext) -> int | None:
    """The generation bound the items were sent: the benchmark's, else the model's default."""
    if ctx.prompt.max_tokens is not None:
        return ctx.prompt.max_tokens
    value = (ctx.model.decoding_defaults or {}).get("max_tokens")
    return value if isinstance(value, int) else None


def _model_name(ctx: ExportContext) -> str:
    return f"{ctx.model.name}@{ctx.model.version}"


async def _lm_eval_lines(request: Request, session: AsyncSession, ctx: ExportContext) -> AsyncIterator[bytes]:
    settings = request.app.state.settings
    max_tokens = _max_tokens(ctx)
    async for item in export_items(session, workers_of(request.app), ctx, settings.max_prompt_chars, settings.preview_timeout_s):
        yield (json.dumps(lm_eval_sample(item_record(item), ctx.prompt, max_tokens), ensure_ascii=False) + "\n").encode()


async def _inspect_log(request: Request, session: AsyncSession, ctx: ExportContext) -> AsyncIterator[bytes]:
    settings = request.app.state.settings
    ev, bench = ctx.evaluation, ctx.benchmark
    totals = await export_totals(session, ev.id)
    run = RunRecord(
        evaluation_id=str(ev.id),
        status=ev.status,
        created=ev.created_at,
        started=ev.started_at,
        completed=ev.completed_at,
        task=bench.slug,
        task_id=str(bench.id),
        task_version=bench.version,
        dataset_samples=bench.sample_count,
        model=_model_name(ctx),
        repeats=ev.repeats,
        sample_limit=ev.sample_limit,
        arm=ev.arm,
        error=ev.error,
        metric=(bench.config.get("metric") or {}).get("name", "score"),
        total_samples=totals.total,
        completed_samples=totals.completed,
        metric_means=totals.means,
        input_tokens=totals.input_tokens,
        output_tokens=totals.output_tokens,
    )
    header = json.dumps(inspect_header(run, ctx.prompt, _max_tokens(ctx)), ensure_ascii=False)
    yield (header[:-1] + ', "samples": [').encode()
    first = True
    async for item in export_items(session, workers_of(request.app), ctx, settings.max_prompt_chars, settings.preview_timeout_s):
        sample = json.dumps(inspect_sample(item_record(item), ctx.prompt, run.model), ensure_ascii=False)
        yield (sample if first else ", " + sample).encode()
        first = False
    yield b"]}"


@router.get("/{evaluation_id}/export")
async def export_evaluation(
    evaluation_id: uuid.UUID,
    request: Request,
    format: str = Query(..., description="lm-eval (samples_<task>.jsonl lines) | inspect (Inspect AI eval log JSON)"),
    session: AsyncSession = Depends(db_session),
) -> StreamingResponse:
    """Every stored item of the evaluation, with its prompt, input fields and reference, in benchmark order:
    ``lm-eval`` answers ``application/x-ndjson`` named ``samples_<benchmark>.jsonl``, ``inspect`` one JSON
    document named ``<benchmark>.json``. 422 naming ``format`` for another value; 404 naming ``evaluation_id``
    when it is unknown or another tenant's."""
    if format not in EXPORT_FORMATS:
        raise FieldError(
            "invalid", ("query", "format"), f"format is one of {', '.join(EXPORT_FORMATS)}, not {format!r}", "bad_value"
        )
    ev = await owned_evaluation(session, evaluation_id)
    ctx = await export_context(session, ev)
    slug = ctx.benchmark.slug
    if format == "lm-eval":
        return StreamingResponse(
            _lm_eval_lines(request, session, ctx),
            media_type="application/x-ndjson",
            headers={"Content-Disposition": f'attachment; filename="samples_{slug}.jsonl"'},
        )
    return StreamingResponse(
        _inspect_log(request, session, ctx),
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="{slug}.json"'},
    )
