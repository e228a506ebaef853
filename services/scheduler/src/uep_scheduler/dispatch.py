"""Admission and bounded dispatch, with leases in PostgreSQL.

Items of an evaluation are numbered ``i = ordinal × repeats + repeat`` (arm ``main``) and leased in that
order; ``evaluations.dispatched_items`` is the cursor. At most ``max_in_flight`` items of an evaluation
hold an open lease (dispatched, no ScoreComputed seen yet). Each lease row and its SampleDispatched
outbox row are written in one transaction, under a row lock on the evaluation (``SELECT … FOR UPDATE``),
so several scheduler replicas never lease one item twice. A lease that expires with no stored result is
dispatched again with ``attempt + 1``; the reporter's idempotent insert makes a late duplicate harmless.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import and_, exists, func, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common import budget
from uep_common.db.models import Benchmark, Evaluation, Model, Sample, SampleLease, SampleResult
from uep_common.events import ModelTarget, PromptSpec, SampleDispatched
from uep_common.outbox import add_to_outbox
from uep_common.telemetry import context_from_headers, current_trace_headers, tracer

_tracer = tracer("uep.scheduler")
ARM = "main"


def model_target(model: Model) -> ModelTarget:
    """The registry row of ``model`` as the ModelTarget carried by SampleDispatched."""
    d = model.decoding_defaults or {}
    return ModelTarget(
        model_id=model.id,
        name=model.name,
        backend=model.backend,
        endpoint=model.endpoint,
        triton_model_name=model.triton_model_name,
        triton_model_version=model.triton_model_version,
        max_tokens=d.get("max_tokens", 256),
        temperature=d.get("temperature", 0.0),
        stop=d.get("stop", []),
        max_concurrency=model.max_in_flight,
    )


async def admit(session: AsyncSession, evaluation_id: uuid.UUID) -> bool:
    """pending → running (idempotent). Returns True if the evaluation is running afterwards."""
    ev = await session.scalar(select(Evaluation).where(Evaluation.id == evaluation_id).with_for_update())
    if ev is None:
        return False
    if ev.status == "pending":
        ev.status = "running"
        ev.started_at = datetime.now(UTC)
    return ev.status == "running"


MAX_FEWSHOT = 16


async def fewshot_examples(
    session: AsyncSession, sample: Sample, k: int, pools: dict[tuple, list]
) -> list[dict]:
    """``k`` demonstrations for ``sample``: the first samples of its benchmark in benchmark order — of the
    same ``subject`` when samples have one (as MMLU's per-subject few-shot prompts) — excluding the sample
    itself. Each is ``{"input": …, "reference": …}``. ``pools`` caches candidates per (benchmark, subject)."""
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


async def _dispatch(
    session: AsyncSession,
    ev: Evaluation,
    benchmark: Benchmark,
    target: ModelTarget,
    samples: dict[uuid.UUID, Sample],
    leases: list[SampleLease],
    expires: datetime,
) -> None:
    prompt = PromptSpec.model_validate(benchmark.config.get("prompt") or {"template": "{{ prompt }}"})
    if ev.config.get("chat_template") is not None:
        prompt = prompt.model_copy(update={"chat": bool(ev.config["chat_template"])})
    k = int(ev.config.get("fewshot_k", prompt.fewshot_k))
    pools: dict[tuple, list] = {}
    parent = context_from_headers(ev.trace_context)
    for lease in leases:
        sample = samples[lease.sample_id]
        fewshot = await fewshot_examples(session, sample, k, pools)
        with _tracer.start_as_current_span(
            "dispatch sample", context=parent, attributes={"uep.sample_ordinal": sample.ordinal, "uep.attempt": lease.attempt}
        ):
            event = SampleDispatched(
                evaluation_id=ev.id,
                tenant_id=ev.tenant_id,
                sample_id=sample.id,
                repeat=lease.repeat,
                arm=lease.arm,
                attempt=lease.attempt,
                benchmark_id=benchmark.id,
                sample_ordinal=sample.ordinal,
                input=sample.input,
                fewshot=fewshot,
                prompt=prompt,
                target=target,
                lease_expires_at=expires,
            )
            add_to_outbox(session, event, current_trace_headers())


CAPACITY_HEADROOM = 2
"""Items leased per evaluation at most this many times the model's serving capacity: enough to keep the
model busy while results travel back, few enough that a cancel wastes little model time."""


def in_flight_bound(ev: Evaluation, model: Model, default: int) -> int:
    """Open leases allowed for ``ev``: its explicit ``max_in_flight``, else the scheduler's default capped at
    :data:`CAPACITY_HEADROOM` × the model's registered capacity (``models.max_in_flight``)."""
    if ev.config.get("max_in_flight"):
        return int(ev.config["max_in_flight"])
    capacity = model.max_in_flight
    return min(default, CAPACITY_HEADROOM * capacity) if capacity else default


async def _expired_leases(session: AsyncSession, evaluation_id: uuid.UUID, now: datetime, limit: int) -> list[SampleLease]:
    """Leases of ``evaluation_id`` past their expiry whose item has no stored result (lost or stuck)."""
    stored = exists().where(
        and_(
            SampleResult.evaluation_id == SampleLease.evaluation_id,
            SampleResult.sample_id == SampleLease.sample_id,
            SampleResult.repeat == SampleLease.repeat,
            SampleResult.arm == SampleLease.arm,
        )
    )
    rows = await session.scalars(
        select(SampleLease)
        .where(SampleLease.evaluation_id == evaluation_id, SampleLease.lease_expires_at < now, ~stored)
        .limit(limit)
    )
    return list(rows)


async def top_up(
    session: AsyncSession,
    evaluation_id: uuid.UUID,
    max_in_flight: int,
    lease_seconds: float,
    redispatch_expired: bool = True,
) -> int:
    """Re-dispatch expired leases (unless ``redispatch_expired`` is False: the hot path after a score leaves
    that scan to the reconcile loop), then lease new items up to the in-flight bound. Returns items dispatched.

    Must run inside a transaction; locks the evaluation row until commit.
    """
    ev = await session.scalar(select(Evaluation).where(Evaluation.id == evaluation_id).with_for_update())
    if ev is None or ev.status != "running":
        return 0
    now = datetime.now(UTC)
    expires = now + timedelta(seconds=lease_seconds)
    model = await session.get(Model, ev.model_id)
    bound = in_flight_bound(ev, model, max_in_flight)

    expired = await _expired_leases(session, ev.id, now, bound) if redispatch_expired else []
    for lease in expired:
        lease.attempt += 1
        lease.state = "leased"
        lease.leased_at = now
        lease.lease_expires_at = expires
        lease.released_at = None

    in_flight = await session.scalar(
        select(func.count()).where(SampleLease.evaluation_id == ev.id, SampleLease.state == "leased")
    )
    room = max(0, bound - int(in_flight or 0))
    room = await budget.reserve_for_dispatch(session, ev, model, min(room, ev.total_items - ev.dispatched_items)) if room else 0
    start, end = ev.dispatched_items, min(ev.dispatched_items + room, ev.total_items)
    fresh: list[SampleLease] = []
    for i in range(start, end):
        fresh.append(
            SampleLease(
                evaluation_id=ev.id, sample_id=None, repeat=i % ev.repeats, arm=ARM, state="leased",
                attempt=1, leased_at=now, lease_expires_at=expires,
            )
        )
    if not expired and not fresh:
        return 0
    benchmark = await session.get(Benchmark, ev.benchmark_id)
    wanted_ordinals = {i // ev.repeats for i in range(start, end)}
    by_ordinal: dict[int, Sample] = {}
    if wanted_ordinals:
        rows = await session.scalars(
            select(Sample).where(
                Sample.benchmark_id == ev.benchmark_id,
                Sample.ordinal >= min(wanted_ordinals),
                Sample.ordinal <= max(wanted_ordinals),
            )
        )
        by_ordinal = {s.ordinal: s for s in rows}
    for i, lease in zip(range(start, end), fresh, strict=True):
        lease.sample_id = by_ordinal[i // ev.repeats].id
    session.add_all(fresh)
    ev.dispatched_items = end
    samples = {s.id: s for s in by_ordinal.values()}
    missing = {lease.sample_id for lease in expired} - samples.keys()
    if missing:
        samples.update({s.id: s for s in await session.scalars(select(Sample).where(Sample.id.in_(missing)))})
    await _dispatch(session, ev, benchmark, model_target(model), samples, [*expired, *fresh], expires)
    return len(expired) + len(fresh)


async def release(session: AsyncSession, items: list[tuple[uuid.UUID, uuid.UUID, int, str]]) -> set[uuid.UUID]:
    """Release the open leases of scored items ``(evaluation_id, sample_id, repeat, arm)``.

    Returns the evaluations concerned (to top up). Must run inside a transaction.
    """
    if not items:
        return set()
    await session.execute(
        update(SampleLease)
        .where(
            SampleLease.state == "leased",
            tuple_(SampleLease.evaluation_id, SampleLease.sample_id, SampleLease.repeat, SampleLease.arm).in_(items),
        )
        .values(state="released", released_at=func.now())
        .execution_options(synchronize_session=False)
    )
    return {i[0] for i in items}


async def evaluations_to_reconcile(session: AsyncSession, admit_after_s: float) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    """``(running, stale_pending)``: running evaluations, and pending ones older than ``admit_after_s``
    (their EvaluationRequested may have been lost; PostgreSQL is the record, so admit them anyway)."""
    running = list(await session.scalars(select(Evaluation.id).where(Evaluation.status == "running")))
    cutoff = datetime.now(UTC) - timedelta(seconds=admit_after_s)
    pending = list(
        await session.scalars(
            select(Evaluation.id).where(Evaluation.status == "pending", Evaluation.created_at < cutoff)
        )
    )
    return running, pending
