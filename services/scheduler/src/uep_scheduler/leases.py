"""Queries of the allocation pass over ``sample_leases``: the open leases counted per evaluation and per model,
and which leases are lost (expired, or released without a stored result past the orphan grace) and so
dispatched again (:mod:`uep_scheduler.allocation`, step 2)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.tables.models import Evaluation, SampleLease


async def in_flight_counts(session: AsyncSession, now: datetime) -> tuple[dict[uuid.UUID, int], dict[uuid.UUID, int], int]:
    """Open leases ``(per evaluation, per model, total)``. A lease of an evaluation that is not running any
    more counts only until it expires (it will never be dispatched again)."""
    live = func.count().filter(SampleLease.lease_expires_at > now)
    rows = await session.execute(
        select(SampleLease.evaluation_id, Evaluation.model_id, Evaluation.status, func.count(), live)
        .join(Evaluation, Evaluation.id == SampleLease.evaluation_id)
        .where(SampleLease.state == "leased")
        .group_by(SampleLease.evaluation_id, Evaluation.model_id, Evaluation.status)
    )
    per_ev: dict[uuid.UUID, int] = {}
    per_model: dict[uuid.UUID, int] = defaultdict(int)
    total = 0
    for ev_id, model_id, status, n_all, n_live in rows:
        n = n_all if status == "running" else n_live
        per_ev[ev_id] = n
        per_model[model_id] += n
        total += n
    return per_ev, per_model, total


LATE_RELEASE_SLACK = timedelta(seconds=60)
"""How long after its expiry a lease may still be released by its score (an expired lease of a running
evaluation is dispatched again by the next reconcile pass, within a tick), for the orphan window."""


def lost_condition(now: datetime, orphans_before: datetime | None, orphans_since: datetime | None = None) -> ColumnElement[bool]:
    """Leases to dispatch again: expired open ones; with ``orphans_before``, released ones past their expiry and
    released before it (no stored result is checked by the caller).

    With ``orphans_since`` (the previous sweep's clock), only released leases that became candidates since then:
    a lease becomes one at ``max(released_at + grace, lease_expires_at)`` (``grace = now - orphans_before``), so
    ``lease_expires_at >= since`` or ``released_at >= since - grace``; the second is bounded below on the
    indexed expiry by :data:`LATE_RELEASE_SLACK`. The candidates are then the leases released in about one sweep
    period, not every lease of the evaluation."""
    expired = and_(SampleLease.state == "leased", SampleLease.lease_expires_at < now)
    if orphans_before is None:
        return expired
    # lease_expires_at < now as well: an item routed to human annotators is released with its expiry moved far
    # out (uep_judge.store.HUMAN_LEASE_HOLD) and has no result until annotated; it is not lost
    orphaned = and_(SampleLease.state == "released", SampleLease.released_at < orphans_before, SampleLease.lease_expires_at < now)
    if orphans_since is not None:
        grace = now - orphans_before
        orphaned = and_(
            orphaned,
            or_(
                SampleLease.lease_expires_at >= orphans_since,
                and_(
                    SampleLease.released_at >= orphans_since - grace,
                    SampleLease.lease_expires_at >= orphans_since - grace - LATE_RELEASE_SLACK,
                ),
            ),
        )
    return or_(expired, orphaned)
