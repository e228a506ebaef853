"""An evaluation's summary computed from its stored results (PostgreSQL), shared by the reporter (on completion),
the gateway (``POST …/stop``: the partial summary) and the scheduler (an evaluation interrupted by a restart).

Definitions are :class:`uep_common.events.EvaluationSummary`'s; the interval is Wilson's at 95 %
(:func:`uep_common.stats.wilson_interval`).
"""

from __future__ import annotations

import uuid

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.db.models import SampleResult
from uep_common.events import EvaluationSummary
from uep_common.stats import wilson_interval


async def compute_summary(session: AsyncSession, evaluation_id: uuid.UUID) -> EvaluationSummary:
    """Aggregate the stored results of one evaluation (see :class:`EvaluationSummary` for definitions).

    Latency percentiles are ``percentile_cont`` (linear interpolation) over items with a latency.
    """
    sr = SampleResult
    agg = (
        await session.execute(
            select(
                func.count(),
                func.count(sr.is_correct),
                func.count().filter(sr.is_correct.is_(True)),
                func.count(sr.error),
                func.percentile_cont(0.5).within_group(sr.latency_ms),
                func.percentile_cont(0.9).within_group(sr.latency_ms),
                func.coalesce(func.sum(sr.prompt_tokens), 0),
                func.coalesce(func.sum(sr.completion_tokens), 0),
                func.mode().within_group(sr.metric_name),
                func.count().filter(sr.metrics.has_key("extraction")),
                func.count().filter(sr.metrics["extraction"].astext == "no_answer"),
            ).where(sr.evaluation_id == evaluation_id)
        )
    ).one()
    n, scored, correct, errors, p50, p90, ptok, ctok, metric_name, extracting, no_answer = agg
    means = (
        await session.execute(
            text(
                "SELECT m.key, avg(m.value::text::float8) FROM sample_results r, jsonb_each(r.metrics) m "
                "WHERE r.evaluation_id = :e AND jsonb_typeof(m.value) = 'number' GROUP BY m.key ORDER BY m.key"
            ),
            {"e": evaluation_id},
        )
    ).all()
    ci = wilson_interval(correct, scored)
    return EvaluationSummary(
        n=n,
        scored=scored,
        correct=correct,
        errors=errors,
        accuracy=correct / scored if scored else None,
        ci_low=ci[0] if ci else None,
        ci_high=ci[1] if ci else None,
        latency_ms_p50=p50,
        latency_ms_p90=p90,
        prompt_tokens=int(ptok),
        completion_tokens=int(ctok),
        metric_name=metric_name,
        metric_means=dict(means),
        extraction_failure_rate=no_answer / extracting if extracting else None,
    )
