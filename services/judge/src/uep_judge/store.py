"""What the judge reads from and writes to PostgreSQL.

Reads (:func:`load_context`): the evaluation's judge configuration snapshot (``evaluations.config["judge"]``,
else the benchmark's ``config.judge``), the judge models from the registry, the sample's reference
(reference mode), the baseline evaluation's output for the same sample (pairwise).

Writes (:func:`record`), in ONE transaction: the item's ``judge_items`` row (unique per item: a second
writer finds it and rolls back, so an item is judged, charged and scored once), a ``judge_verdicts`` row per
judge × order, one budget charge per judge call (``uep_common.records.settlement.charge``, role "judge"), the hybrid
routes, and the ScoreComputed in the outbox — or, for an item sent to humans, no ScoreComputed and its
lease released with its expiry moved out of the scheduler's reach (no sample_results row will exist until
the annotation completes, and an expired lease without a result would otherwise be dispatched again).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy import case, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.configs import parse_benchmark_config, parse_evaluation_config
from uep_common.contract.events import JudgeRequested, ModelTarget, ScoreComputed
from uep_common.contract.judge_config import JudgeConfig, merge_judge_config
from uep_common.records import settlement
from uep_common.registry.model_registry import model_query
from uep_common.registry.targets import model_target
from uep_common.runtime.outbox import add_to_outbox
from uep_common.tables.judging import HybridRoute, JudgeItem, JudgeVerdict
from uep_common.tables.models import Benchmark, Evaluation, Sample, SampleLease, SampleResult
from uep_judge.modes import Verdict
from uep_judge.templates import as_text

HUMAN_LEASE_HOLD = timedelta(days=36500)
"""How far a routed-to-human item's lease expiry is moved: it waits for annotators, not for a model."""


class ContextError(ValueError):
    """The item cannot be judged (``kind``: 'judge_not_configured', 'unknown_judge_model', 'reference_missing',
    'baseline_missing'); the message says why."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class Context:
    """Everything needed to judge one item."""

    evaluation: Evaluation
    evaluation_type: str
    cfg: JudgeConfig
    judges: list[ModelTarget]
    reference: str | None
    baseline: str | None
    opponent_model_id: uuid.UUID | None


async def load_context(session: AsyncSession, event: JudgeRequested) -> Context | None:
    """The item's judging context; None when its evaluation no longer exists. Raises :class:`ContextError`."""
    ev = await session.get(Evaluation, event.evaluation_id)
    if ev is None:
        return None
    bench = await session.get(Benchmark, event.benchmark_id)
    assert bench is not None  # the item's benchmark: its evaluation references it (a foreign key)
    try:
        snapshot = parse_evaluation_config(ev.config).judge
        cfg = snapshot or merge_judge_config(parse_benchmark_config(bench.config).judge_block, None)
    except ValidationError as exc:
        raise ContextError("judge_not_configured", f"no valid judge configuration: {exc.errors()[0]['msg']}") from None
    judges = []
    for name in cfg.judges:
        # the judge the evaluation's tenant means by this name: its own, a site model or a shared one (never
        # another tenant's private model, nor a newer one of another tenant taking the name)
        model = await session.scalar(model_query(name, None, ev.tenant_id))
        if model is None:
            raise ContextError("unknown_judge_model", f"judge model {name!r} is not registered")
        judges.append(model_target(model))
    reference = None
    if cfg.mode == "reference":
        ref = await session.scalar(select(Sample.reference).where(Sample.id == event.sample_id))
        if not ref or cfg.reference_field not in ref:
            raise ContextError("reference_missing", f"the sample has no reference field {cfg.reference_field!r}")
        reference = as_text(ref[cfg.reference_field])
    baseline, opponent = None, None
    if cfg.mode == "pairwise":
        if cfg.baseline_evaluation_id is None:
            raise ContextError("baseline_missing", "pairwise judging needs judge.baseline_evaluation_id")
        opponent = await session.scalar(select(Evaluation.model_id).where(Evaluation.id == cfg.baseline_evaluation_id))
        row = (
            await session.execute(
                select(SampleResult.output)
                .where(SampleResult.evaluation_id == cfg.baseline_evaluation_id, SampleResult.sample_id == event.sample_id)
                .order_by(case((SampleResult.repeat == event.repeat, 0), else_=1), SampleResult.repeat)
                .limit(1)
            )
        ).first()
        if row is None or row[0] is None:
            raise ContextError(
                "baseline_missing", f"baseline evaluation {cfg.baseline_evaluation_id} has no output for this sample"
            )
        baseline = row[0]
    return Context(ev, bench.evaluation_type, cfg, judges, reference, baseline, opponent)


def _item(event: JudgeRequested) -> dict[str, Any]:
    return {"evaluation_id": event.evaluation_id, "sample_id": event.sample_id, "repeat": event.repeat, "arm": event.arm}


async def already_judged(session: AsyncSession, event: JudgeRequested) -> bool:
    """Whether the item has a ``judge_items`` row (it was judged before: a redelivery)."""
    return (
        await session.scalar(select(JudgeItem.id).where(*(getattr(JudgeItem, k) == v for k, v in _item(event).items())))
    ) is not None


def verdict_rows(event: JudgeRequested, ctx: Context, template: tuple[str, str], verdicts: list[Verdict]) -> list[dict[str, Any]]:
    """``judge_verdicts`` rows of ``verdicts`` (one per judge × order)."""
    rows = []
    for v in verdicts:
        r = v.rubric
        p = v.pairwise
        outcome = None
        if p is not None:
            outcome = {"AB": {"A": "win", "B": "loss"}, "BA": {"A": "loss", "B": "win"}}[v.position].get(p.winner, "tie")
        rows.append(
            {
                **_item(event),
                "benchmark_id": event.benchmark_id,
                "candidate_model_id": event.model_id,
                "opponent_model_id": ctx.opponent_model_id,
                "judge_model_id": v.judge.model_id,
                "judge_model_name": v.judge.name,
                "mode": ctx.cfg.mode,
                "template": template[0],
                "template_version": template[1],
                "position": v.position,
                "valid": v.valid,
                "attempts": len(v.attempts),
                "overall": r.overall if r else None,
                "scores": r.scores if r else {},
                "winner": p.winner if p else None,
                "candidate_outcome": outcome,
                "reasoning": (r.reasoning if r else p.reasoning if p else None),
                "raw_text": v.raw_text,
                "attempts_log": [
                    {"raw": a.raw, "error": a.error, "status": a.status, "constrained": a.constrained} for a in v.attempts
                ],
                "error": v.error,
                "answer_chars": len(event.output or ""),
                "prompt_tokens": sum(a.prompt_tokens or 0 for a in v.attempts) or None,
                "completion_tokens": sum(a.completion_tokens or 0 for a in v.attempts) or None,
                "latency_ms": sum(a.latency_ms or 0.0 for a in v.attempts) or None,
            }
        )
    return rows


def human_item_details(event: JudgeRequested, ctx: Context | None, details: dict[str, Any]) -> dict[str, Any]:
    """What a ``hybrid_routes`` row of stage 'human' carries for the annotation task built from it: the
    judge's details plus the item itself — ``output``, ``prompt``, ``output_b`` (the pairwise baseline's
    answer, or None) and the model call's ``latency_ms``/``prompt_tokens``/``completion_tokens`` (the output
    is stored nowhere else until a human decides the item)."""
    return {
        **details,
        "output": event.output,
        "prompt": event.prompt,
        "output_b": ctx.baseline if ctx is not None else None,
        "latency_ms": event.latency_ms,
        "prompt_tokens": event.prompt_tokens,
        "completion_tokens": event.completion_tokens,
    }


async def record(
    session: AsyncSession,
    event: JudgeRequested,
    ctx: Context | None,
    template: tuple[str, str] | None,
    verdicts: list[Verdict],
    decision: str,
    details: dict[str, Any],
    score: ScoreComputed | None,
    human_reason: str | None = None,
) -> bool:
    """Write the item's outcome (see the module docstring); returns False, writing nothing, when another
    writer recorded the item first. Must run inside a transaction (the caller commits)."""
    inserted = await session.scalar(
        pg_insert(JudgeItem)
        .values(
            **_item(event),
            mode=ctx.cfg.mode if ctx else "-",
            decision=decision,
            details=details,
            score_event_id=score.event_id if score else None,
        )
        .on_conflict_do_nothing(constraint="uq_judge_items_item")
        .returning(JudgeItem.id)
    )
    if inserted is None:
        return False
    if ctx is not None and template is not None and verdicts:
        await session.execute(
            pg_insert(JudgeVerdict)
            .values(verdict_rows(event, ctx, template, verdicts))
            .on_conflict_do_nothing(constraint="uq_judge_verdicts_call")
        )
    for v in verdicts:
        for a in v.attempts:
            if not a.call_failed:
                await settlement.charge(
                    session, event.evaluation_id, "judge", a.prompt_tokens, a.completion_tokens, a.latency_ms, v.judge.model_id
                )
    if event.route_reason is not None:
        await session.execute(
            pg_insert(HybridRoute)
            .values(
                **_item(event),
                stage="judge",
                reason=event.route_reason,
                details=dict(event.automatic),
            )
            .on_conflict_do_nothing(constraint="uq_hybrid_routes_item_stage")
        )
    if human_reason is not None:
        await session.execute(
            pg_insert(HybridRoute)
            .values(
                **_item(event),
                stage="human",
                reason=human_reason,
                details=human_item_details(event, ctx, details),
            )
            .on_conflict_do_nothing(constraint="uq_hybrid_routes_item_stage")
        )
        now = datetime.now(UTC)
        await session.execute(
            update(SampleLease)
            .where(*(getattr(SampleLease, k) == v for k, v in _item(event).items()))
            .values(state="released", released_at=now, lease_expires_at=now + HUMAN_LEASE_HOLD)
        )
    if score is not None:
        add_to_outbox(session, score)
    return True
