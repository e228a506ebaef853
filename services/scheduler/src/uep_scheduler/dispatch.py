"""Dispatch events and lease release, with leases in PostgreSQL.

Items of an evaluation are numbered ``i = ordinal × repeats + repeat`` (arm ``evaluations.arm``) and leased
in that order; ``evaluations.dispatched_items`` is the cursor. Which evaluation gets the next slots, and how
many, is decided by the allocation pass (:mod:`uep_scheduler.allocation`, fair queuing and capacity); this
module builds the SampleDispatched events of new and re-dispatched leases, and releases leases when scores
arrive. Admission (pending → running) is :func:`uep_common.records.lifecycle.admit`. A lease that expires with no
stored result is dispatched again with ``attempt + 1``; the reporter's idempotent insert makes a late
duplicate harmless.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast

from sqlalchemy import Table, and_, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.configs import item_prompt, parse_evaluation_config
from uep_common.contract.events import ModelTarget, SampleDispatched
from uep_common.prompting.fewshot import fewshot_examples
from uep_common.runtime.outbox import StagedMessage, stage_in_outbox
from uep_common.runtime.telemetry import context_from_headers, current_trace_headers, tracer
from uep_common.tables.bulk import ITEM_KEY, key_arrays, rows_from_arrays
from uep_common.tables.models import Benchmark, Evaluation, Sample, SampleLease, SampleResult

if TYPE_CHECKING:
    from sqlalchemy.orm.util import AliasedClass
    from sqlalchemy.sql.expression import Exists

_tracer = tracer("uep.scheduler")


class Leased(Protocol):
    """What :func:`dispatch_events` reads of a lease: a ``SampleLease`` row or a :class:`LeaseRef`."""

    @property
    def sample_id(self) -> uuid.UUID:
        """The leased item's sample."""

    @property
    def repeat(self) -> int:
        """The leased item's repeat, from 0."""

    @property
    def arm(self) -> str:
        """The leased item's A/B arm (``main`` without A/B)."""

    @property
    def attempt(self) -> int:
        """The attempt this lease is, from 1."""


class LeaseRef(NamedTuple):
    """A lease inserted without an ORM object (new leases of a pass, one executemany INSERT)."""

    sample_id: uuid.UUID
    repeat: int
    arm: str
    attempt: int


async def dispatch_events(
    session: AsyncSession,
    ev: Evaluation,
    benchmark: Benchmark,
    target: ModelTarget,
    samples: dict[uuid.UUID, Sample],
    leases: Sequence[Leased],
    expires: datetime,
    claim_until: datetime | None = None,
) -> list[StagedMessage]:
    """Stage one SampleDispatched per lease in the outbox (the caller's transaction, one INSERT for all of
    them: :func:`uep_common.runtime.outbox.stage_in_outbox`); returns the rows. ``claim_until``: the caller publishes
    them itself after its commit (see :func:`uep_common.runtime.outbox.add_to_outbox`)."""
    cfg = parse_evaluation_config(ev.config)
    prompt = item_prompt(benchmark.config, cfg)  # an A/B arm's template, chat and few-shot overrides applied
    k = prompt.fewshot_k
    pools: dict[tuple[Any, ...], Sequence[Any]] = {}
    parent = context_from_headers(ev.trace_context)
    staged: list[tuple[SampleDispatched, dict[str, str]]] = []
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
                timeout_s=cfg.sample_timeout_s,  # per-sample timeout (lifecycle); None = inference default
            )
            staged.append((event, current_trace_headers()))
    return await stage_in_outbox(session, staged, claim_until)


def stored_result(lease: type[SampleLease] | AliasedClass[SampleLease] = SampleLease) -> Exists:
    """SQL condition: the item of ``lease`` has a stored result."""
    return exists().where(
        and_(
            SampleResult.evaluation_id == lease.evaluation_id,
            SampleResult.sample_id == lease.sample_id,
            SampleResult.repeat == lease.repeat,
            SampleResult.arm == lease.arm,
        )
    )


_LEASES = cast(Table, SampleLease.__table__)
_SCORED = rows_from_arrays(_LEASES, ITEM_KEY, name="scored")
_RELEASE_LEASES = (
    update(_LEASES)
    .where(_LEASES.c.state == "leased", *(_LEASES.c[c] == _SCORED.c[c] for c in ITEM_KEY))
    .values(state="released", released_at=func.now())
    .returning(_LEASES.c.leased_at)
)
"""Release the open leases of a batch of items: one short statement for any number (``UPDATE … FROM unnest``,
:mod:`uep_common.tables.bulk`), which psycopg caches and prepares."""


async def release(
    session: AsyncSession, items: list[tuple[uuid.UUID, uuid.UUID, int, str]], leased_at: list[datetime] | None = None
) -> set[uuid.UUID]:
    """Release the open leases of scored items ``(evaluation_id, sample_id, repeat, arm)``; when ``leased_at`` is
    given, the lease time of each lease released is appended to it (for the end-to-end latency metric).

    Returns the evaluations concerned (to top up). Must run inside a transaction.
    """
    if not items:
        return set()
    released = await session.execute(_RELEASE_LEASES, key_arrays(items))
    if leased_at is not None:
        leased_at.extend(released.scalars())
    return {i[0] for i in items}


async def evaluations_to_reconcile(session: AsyncSession, admit_after_s: float) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    """``(running, stale_pending)``: running evaluations, and pending ones older than ``admit_after_s``
    (their EvaluationRequested may have been lost; PostgreSQL is the record, so admit them anyway)."""
    running = list(await session.scalars(select(Evaluation.id).where(Evaluation.status == "running")))
    cutoff = datetime.now(UTC) - timedelta(seconds=admit_after_s)
    pending = list(
        await session.scalars(select(Evaluation.id).where(Evaluation.status == "pending", Evaluation.created_at < cutoff))
    )
    return running, pending
