"""Rescoring in the scorer: read an evaluation's stored outputs and score them again with the current
metric versions, publishing one ScoreComputed (``rescore_id`` set) per item. The model is not called; the
reporter applies the new scores, keeps the replaced ones and records what changed.

A classifier's or ranker's stored ``prediction`` is its answer and is scored again as it is; an LLM's stored
prediction is what the metric read from its text, so its text is read again (the metric's rule may have
changed), never the stored reading. An agent item's stored trajectory is its run and is scored again as it is."""

from __future__ import annotations

import logging

from faststream.kafka import KafkaBroker
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from uep_common.contract.agents import Trajectory
from uep_common.contract.events import ModelKind, OutputGenerated, Prediction, RescoreRequested, ScoreComputed
from uep_common.runtime.messaging import publish_event
from uep_common.tables.models import Model, SampleResult
from uep_scorer.references import ReferenceStore
from uep_scorer.scoring import score_output

log = logging.getLogger(__name__)
CHUNK = 500


async def rescore(
    request: RescoreRequested, sessionmaker: async_sessionmaker[AsyncSession], refs: ReferenceStore, broker: KafkaBroker
) -> int:
    """Publish a re-computed ScoreComputed for every stored result of ``request.evaluation_id`` that has an
    output (rows that only carry an inference error have nothing to score). Returns the number published."""
    published, last_id = 0, 0
    async with sessionmaker() as s:
        kind = await s.scalar(select(Model.kind).where(Model.id == request.model_id))
    structured = kind not in (None, ModelKind.generation)  # the model's own answer, not a reading of text
    while True:
        async with sessionmaker() as s:
            rows = (
                await s.scalars(
                    select(SampleResult)
                    .where(
                        SampleResult.evaluation_id == request.evaluation_id,
                        SampleResult.output.is_not(None),
                        SampleResult.id > last_id,
                    )
                    .order_by(SampleResult.id)
                    .limit(CHUNK)
                )
            ).all()
        if not rows:
            return published
        for row in rows:
            output = OutputGenerated(
                evaluation_id=request.evaluation_id,
                tenant_id=request.tenant_id,
                sample_id=row.sample_id,
                repeat=row.repeat,
                arm=row.arm,
                attempt=row.attempt,
                benchmark_id=request.benchmark_id,
                model_id=request.model_id,
                prompt="",
                output=row.output,
                latency_ms=row.latency_ms,
                prompt_tokens=row.prompt_tokens,
                completion_tokens=row.completion_tokens,
                prediction=Prediction.model_validate(row.prediction) if structured and row.prediction else None,
                trajectory=Trajectory.model_validate(row.trajectory) if row.trajectory else None,
            )
            score = await score_output(output, refs)
            if not isinstance(score, ScoreComputed):  # judge-graded items are re-judged by the judge, not here
                continue
            await publish_event(broker, score.model_copy(update={"rescore_id": request.rescore_id}))
            published += 1
        last_id = rows[-1].id
