"""What a per-item export of an evaluation reads: each stored result with its sample's input fields, reference
and the prompt the item was sent with, page by page in benchmark order (sample ordinal, repeat, arm).

The prompt is not stored with a result; it is rendered again here exactly as the scheduler and inference
rendered it: the template of :func:`uep_common.contract.configs.item_prompt` (the benchmark's, with the
evaluation's overrides) over the sample's input and the same few-shot demonstrations
(:func:`uep_common.prompting.fewshot.fewshot_examples`). Rendering runs in the gateway's bounded worker
processes (:func:`uep_gateway.uploads.render_previews`), never on the event loop. Items of a model that is
not a generator (a classifier, a ranker) were sent their input fields, not a prompt: their ``prompt`` is None.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select, text, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.configs import item_prompt
from uep_common.contract.events import PromptSpec
from uep_common.prompting.fewshot import fewshot_examples
from uep_common.tables.models import Benchmark, Evaluation, Model, Sample, SampleResult
from uep_gateway.exports import ItemRecord
from uep_gateway.upload_worker import BudgetExceeded, WorkerPool
from uep_gateway.uploads import render_previews

GENERATION_KIND = "generation"


@dataclass(frozen=True)
class ExportContext:
    """The evaluation being exported, its benchmark and model, and the prompt its items were rendered with
    (``generates``: the model is sent a rendered prompt; False for classifiers and rankers)."""

    evaluation: Evaluation
    benchmark: Benchmark
    model: Model
    prompt: PromptSpec
    generates: bool


@dataclass(frozen=True)
class ExportItem:
    """One stored result with its sample and its rendered ``prompt`` (None when the model takes no prompt, or
    when the template fails on the sample: ``prompt_error`` then says why)."""

    result: SampleResult
    sample: Sample
    prompt: str | None
    prompt_error: str | None = None


async def export_context(session: AsyncSession, ev: Evaluation) -> ExportContext:
    """The :class:`ExportContext` of the caller's evaluation ``ev`` (already checked to be the tenant's)."""
    bench = await session.get(Benchmark, ev.benchmark_id)
    model = await session.get(Model, ev.model_id)
    assert bench is not None and model is not None  # foreign keys
    prompt = item_prompt(bench.config, ev.config)
    return ExportContext(ev, bench, model, prompt, model.kind == GENERATION_KIND)


async def _render(
    session: AsyncSession,
    workers: WorkerPool,
    ctx: ExportContext,
    samples: Sequence[Sample],
    max_chars: int,
    timeout_s: float,
) -> list[tuple[str | None, str | None]]:
    """``(prompt, error)`` of each sample: rendered in a worker within ``timeout_s`` seconds; past it, every
    prompt of the page is None with the reason."""
    if not ctx.generates:
        return [(None, None)] * len(samples)
    pools: dict[tuple[Any, ...], Sequence[Any]] = {}
    shots = [await fewshot_examples(session, s, ctx.prompt.fewshot_k, pools) for s in samples]
    try:
        rendered = await workers.run(
            render_previews, ctx.prompt.template, [s.input for s in samples], max_chars, shots, timeout_s=timeout_s
        )
    except BudgetExceeded as exc:
        return [(None, f"rendering the prompt template {exc}")] * len(samples)
    return [(None, error) if error else (prompt, None) for prompt, _, error in rendered]


async def export_page(
    session: AsyncSession,
    workers: WorkerPool,
    ctx: ExportContext,
    after: tuple[int, int, str] | None,
    limit: int,
    max_chars: int,
    timeout_s: float,
) -> tuple[list[ExportItem], tuple[int, int, str] | None]:
    """Up to ``limit`` items after the key ``after`` (sample ordinal, repeat, arm; None = from the start) and the
    key of the last one when more follow (else None). Prompts longer than ``max_chars`` characters are cut."""
    key = tuple_(Sample.ordinal, SampleResult.repeat, SampleResult.arm)
    q = (
        select(SampleResult, Sample)
        .join(Sample, Sample.id == SampleResult.sample_id)
        .where(SampleResult.evaluation_id == ctx.evaluation.id)
        .order_by(Sample.ordinal, SampleResult.repeat, SampleResult.arm)
        .limit(limit + 1)
    )
    if after is not None:
        q = q.where(key > tuple(after))
    rows = (await session.execute(q)).all()
    page = rows[:limit]
    prompts = await _render(session, workers, ctx, [s for _, s in page], max_chars, timeout_s)
    items = [ExportItem(r, s, p, e) for (r, s), (p, e) in zip(page, prompts, strict=True)]
    nxt = None
    if len(rows) > limit:
        last_r, last_s = page[-1]
        nxt = (last_s.ordinal, last_r.repeat, last_r.arm)
    return items, nxt


async def export_items(
    session: AsyncSession, workers: WorkerPool, ctx: ExportContext, max_chars: int, timeout_s: float, page_size: int = 500
) -> AsyncIterator[ExportItem]:
    """Every stored item of the evaluation, in benchmark order, read ``page_size`` at a time."""
    after: tuple[int, int, str] | None = None
    while True:
        items, after = await export_page(session, workers, ctx, after, page_size, max_chars, timeout_s)
        for item in items:
            yield item
        if after is None:
            return


_METRIC_MEANS = text(
    """
    SELECT m.key, avg(CASE jsonb_typeof(m.value)
                      WHEN 'number' THEN (m.value #>> '{}')::float
                      WHEN 'boolean' THEN CASE WHEN (m.value #>> '{}') = 'true' THEN 1.0 ELSE 0.0 END END)
    FROM sample_results r CROSS JOIN LATERAL jsonb_each(r.metrics) m
    WHERE r.evaluation_id = :id AND jsonb_typeof(m.value) IN ('number', 'boolean')
    GROUP BY m.key ORDER BY m.key
    """
)


@dataclass(frozen=True)
class ExportTotals:
    """Aggregates of an evaluation's stored items: ``total``, ``completed`` (without an error), the mean of
    each numeric per-item metric over the items that have it (booleans as 0/1), and the token counts."""

    total: int
    completed: int
    means: dict[str, float]
    input_tokens: int
    output_tokens: int


async def export_totals(session: AsyncSession, evaluation_id: uuid.UUID) -> ExportTotals:
    """The :class:`ExportTotals` of an evaluation, aggregated in PostgreSQL."""
    total, ok, tin, tout = (
        await session.execute(
            select(
                func.count(),
                func.count().filter(SampleResult.error.is_(None)),
                func.coalesce(func.sum(SampleResult.prompt_tokens), 0),
                func.coalesce(func.sum(SampleResult.completion_tokens), 0),
            ).where(SampleResult.evaluation_id == evaluation_id)
        )
    ).one()
    means = {k: float(v) for k, v in (await session.execute(_METRIC_MEANS, {"id": evaluation_id})).all() if v is not None}
    return ExportTotals(int(total or 0), int(ok or 0), means, int(tin or 0), int(tout or 0))


def item_record(item: ExportItem) -> ItemRecord:
    """The :class:`uep_gateway.exports.ItemRecord` the export formats read of ``item``."""
    r, s = item.result, item.sample
    return ItemRecord(
        ordinal=s.ordinal,
        external_id=s.external_id,
        input=s.input,
        reference=s.reference,
        prompt=item.prompt,
        repeat=r.repeat,
        arm=r.arm,
        output=r.output,
        extracted=r.extracted,
        score=r.score,
        metric_name=r.metric_name,
        metrics=r.metrics or {},
        latency_ms=r.latency_ms,
        prompt_tokens=r.prompt_tokens,
        completion_tokens=r.completion_tokens,
        error=r.error,
        meta=s.meta or {},
    )
