"""Few-shot demonstrations: which samples precede an item's question when its prompt asks for ``fewshot_k`` of
them. The scheduler puts them in every SampleDispatched; the gateway uses the same choice to trial-render an
A/B arm's template at creation, so the render it checks is the one the first item gets."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.tables.models import Sample

MAX_FEWSHOT = 16
"""Most demonstrations one prompt may ask for (``fewshot_k``'s upper bound)."""


async def fewshot_examples(
    session: AsyncSession, sample: Sample, k: int, pools: dict[tuple[Any, ...], Sequence[Any]]
) -> list[dict[str, Any]]:
    """``k`` demonstrations for ``sample``: the first samples of its benchmark in benchmark order — of the
    same ``subject`` when samples have one (as MMLU's per-subject few-shot prompts) — excluding the sample
    itself. Each is ``{"input": …, "reference": …}``; at most ``k`` (fewer when the benchmark has fewer).
    ``pools`` caches candidates per (benchmark, subject) across calls."""
    if k <= 0:
        return []
    subject = sample.input.get("subject") if isinstance(sample.input, dict) else None
    key = (sample.benchmark_id, subject)
    if key not in pools:
        q = select(Sample.id, Sample.input, Sample.reference).where(Sample.benchmark_id == sample.benchmark_id)
        if subject is not None:
            q = q.where(Sample.input["subject"].astext == subject)
        pools[key] = (await session.execute(q.order_by(Sample.ordinal).limit(MAX_FEWSHOT + 1))).all()
    return [{"input": i, "reference": r} for sid, i, r in pools[key] if sid != sample.id][:k]
