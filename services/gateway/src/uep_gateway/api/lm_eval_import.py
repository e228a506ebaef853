"""``POST /v1/benchmarks/lm-eval``: an lm-evaluation-harness task YAML over the documents the caller uploads
becomes a benchmark version (:mod:`uep_gateway.lm_eval_tasks` says what each key means and which are
supported). The version is stored as any upload is (:func:`uep_gateway.benchmark_store.store_upload`): owned by the
caller's tenant, every document checked, nothing stored unless every one is valid."""

from __future__ import annotations

from fastapi import APIRouter, Depends, File, Form, Request, Response, UploadFile
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from uep_gateway.benchmark_store import check_visibility, store_upload
from uep_gateway.deps import db_session, unscoped_session
from uep_gateway.errors import DomainError, FieldError
from uep_gateway.lm_eval_tasks import MAX_TASK_BYTES, TASK_LOC, parse_task
from uep_gateway.schemas import BenchmarkSpec, CatalogBenchmarkView
from uep_gateway.uploads import UploadInvalid
from uep_gateway.validation import NUL_CHECK

router = APIRouter(prefix="/v1", tags=["catalogue"], dependencies=NUL_CHECK)


@router.post("/benchmarks/lm-eval", status_code=201, response_model=CatalogBenchmarkView)
async def import_lm_eval_task(
    request: Request,
    response: Response,
    task: UploadFile = File(..., description="The lm-evaluation-harness task YAML"),
    file: UploadFile = File(..., description="The documents: JSONL, CSV or Parquet, one document a row"),
    format: str | None = Form(None, description="jsonl | csv | parquet (default: from the file name)"),
    slug: str | None = Form(None, description="The benchmark's slug (default: the task's `task` name)"),
    name: str | None = Form(None, description="The benchmark's name (default: the task's `task` name)"),
    visibility: str | None = Form(None, description="private | shared (as POST /v1/benchmarks)"),
    session: AsyncSession = Depends(db_session),
    raw: AsyncSession = Depends(unscoped_session),
) -> CatalogBenchmarkView:
    """Import an lm-eval task over uploaded documents: 201 with the new version, 200 with the identical one
    stored before. A key or value the import does not support is 422 naming it under ``["body", "task", key]``
    (``unsupported_key``); a document a rule fails on is 422 naming its line; the rest as
    ``POST /v1/benchmarks``."""
    check_visibility(visibility)
    body = await task.read(MAX_TASK_BYTES + 1)
    try:
        parsed = parse_task(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise FieldError("invalid", TASK_LOC, "the task YAML is not UTF-8 text", "bad_encoding") from None
    except UploadInvalid as exc:
        raise DomainError("invalid", [{"loc": p.loc, "msg": p.msg, "type": p.type} for p in exc.problems]) from None
    try:
        spec = BenchmarkSpec.model_validate(parsed.spec(slug or parsed.name, name))
    except ValidationError as exc:
        raise DomainError(
            "invalid",
            [{"loc": ["body", *map(str, e["loc"])], "msg": e["msg"], "type": e["type"]} for e in exc.errors()],
        ) from None
    return await store_upload(request, response, session, raw, spec, file, format, visibility, parsed)
