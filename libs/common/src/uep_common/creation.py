"""Build an evaluation row and its EvaluationRequested event.

Shared by the gateway's ``POST /v1/evaluations`` (single, batch over several models, A/B arms) and the
scheduler's scheduled (cron) runs, so that both create exactly the same rows. The caller adds the row and
stages the event in the outbox in one transaction (after the budget hook ``check_creation``).
"""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.db.models import Benchmark, Evaluation, Model
from uep_common.events import EvaluationRequested, Priority
from uep_common.telemetry import current_trace_headers


def _as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


async def find_benchmark(session: AsyncSession, ref: str, version: str | None = None) -> Benchmark | None:
    """Benchmark by slug or id, the newest non-draft version unless ``version`` (content hash); None if none."""
    as_id = _as_uuid(ref)
    q = select(Benchmark).where(Benchmark.id == as_id) if as_id else select(Benchmark).where(Benchmark.slug == ref)
    if version:
        q = q.where(Benchmark.version == version)
    return await session.scalar(q.where(Benchmark.status != "draft").order_by(Benchmark.created_at.desc()).limit(1))


async def find_model(session: AsyncSession, ref: str, version: str | None = None) -> Model | None:
    """Model by name or id, the most recently registered version unless ``version``; None if none."""
    as_id = _as_uuid(ref)
    q = select(Model).where(Model.id == as_id) if as_id else select(Model).where(Model.name == ref)
    if version:
        q = q.where(Model.version == version)
    return await session.scalar(q.order_by(Model.created_at.desc()).limit(1))


def evaluation_config(
    max_parallel: int | None = None, fewshot_k: int | None = None, chat_template: bool | None = None,
    prompt_template: str | None = None, sample_timeout_s: float | None = None,
) -> dict:
    """``evaluations.config`` from the create options (None = not set). ``max_parallel`` is stored as
    ``max_in_flight`` (the scheduler's per-evaluation bound); ``sample_timeout_s`` bounds each model call."""
    pairs = (("max_in_flight", max_parallel), ("fewshot_k", fewshot_k), ("chat_template", chat_template),
             ("prompt_template", prompt_template), ("sample_timeout_s", sample_timeout_s))
    return {k: v for k, v in pairs if v is not None}


def new_evaluation(
    *,
    tenant_id: uuid.UUID,
    bench: Benchmark,
    model: Model,
    sample_limit: int | None,
    repeats: int,
    priority: Priority | str,
    config: dict,
    arm: str = "main",
    batch_id: uuid.UUID | None = None,
    experiment_id: uuid.UUID | None = None,
    schedule_id: uuid.UUID | None = None,
    idempotency_key: str | None = None,
    evaluation_id: uuid.UUID | None = None,
) -> tuple[Evaluation, EvaluationRequested]:
    """A pending evaluation of ``model`` on ``bench`` (``total_items`` = min(sample_limit, samples) ×
    repeats; one arm per evaluation) and the EvaluationRequested announcing it. The trace context is the
    current span's (call inside the evaluation's root span). Nothing is added to a session."""
    priority = Priority(priority)
    n_samples = min(sample_limit or bench.sample_count, bench.sample_count)
    evaluation_id = evaluation_id or uuid.uuid4()
    ev = Evaluation(
        id=evaluation_id,
        tenant_id=tenant_id,
        benchmark_id=bench.id,
        model_id=model.id,
        status="pending",
        priority=priority.value,
        sample_limit=sample_limit,
        repeats=repeats,
        total_items=n_samples * repeats,
        config=dict(config),
        trace_context=current_trace_headers(),
        idempotency_key=idempotency_key,
        arm=arm,
        batch_id=batch_id,
        experiment_id=experiment_id,
        schedule_id=schedule_id,
    )
    event = EvaluationRequested(
        evaluation_id=evaluation_id,
        tenant_id=tenant_id,
        benchmark_id=bench.id,
        benchmark_slug=bench.slug,
        benchmark_version=bench.version,
        model_id=model.id,
        model_name=model.name,
        sample_limit=sample_limit,
        repeats=repeats,
        priority=priority,
        total_items=ev.total_items,
        arm=arm,
        batch_id=batch_id,
        experiment_id=experiment_id,
        schedule_id=schedule_id,
    )
    return ev, event
