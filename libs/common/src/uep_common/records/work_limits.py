"""Work limits, one place for the gateway's creations and the scheduler's scheduled runs.

:class:`WorkLimits` (site defaults from the ``UEP_MAX_*`` / ``UEP_MIN_SCHEDULE_INTERVAL_S`` settings, overridden
per tenant by the ``tenants`` columns), :func:`check_items` (items per evaluation), :func:`check_work_limits`
(that, items queued, evaluations per minute; under a per-tenant transaction lock) and
:func:`check_schedule_interval` (closest two runs of a cron). Each raises
:class:`uep_common.records.creation.WorkLimitRefused`, which names the request field and the numbers.

The per-minute rate is counted from the ``evaluations`` rows themselves (``created_at`` in the last 60 s,
index ``ix_evaluations_tenant_created``) rather than with a Redis counter (such as the ``limits`` library):
the count is read in the creating transaction under the tenant's lock, so it is exact across gateway replicas
and the scheduler, a request refused later (budget, bad field) or rolled back never uses up the quota, and
the scheduler, which creates scheduled runs without Redis, applies the very same rule.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from croniter import croniter
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.records.creation import WorkLimitRefused
from uep_common.records.lifecycle import UNFINISHED
from uep_common.tables.models import TENANT_LIMIT_COLUMNS, Benchmark, Evaluation, Tenant

if TYPE_CHECKING:
    from uep_common.runtime.settings import CommonSettings

UNFINISHED_STATUSES = UNFINISHED
"""Statuses whose items count as queued (:data:`uep_common.records.lifecycle.UNFINISHED`: ``interrupted`` ones resume
on retry)."""
RATE_WINDOW_S = 60


@dataclass(frozen=True)
class WorkLimits:
    """The work one tenant may ask for (all counts are items or evaluations; the interval is in seconds).

    ``max_items_per_evaluation``: items (samples × repeats) of one evaluation; ``max_queued_items``: items not
    yet finished across the tenant's unfinished evaluations (:data:`UNFINISHED_STATUSES`), the new ones
    included; ``max_evaluations_per_minute``: evaluations created in any 60 s; ``min_schedule_interval_s``:
    the closest two runs of one schedule."""

    max_items_per_evaluation: int
    max_queued_items: int
    max_evaluations_per_minute: int
    min_schedule_interval_s: int

    @classmethod
    def from_settings(cls, settings: CommonSettings) -> WorkLimits:
        """The site defaults from a :class:`uep_common.runtime.settings.CommonSettings` (or any subclass)."""
        return cls(**{c: int(getattr(settings, c)) for c in TENANT_LIMIT_COLUMNS})

    def for_tenant(self, tenant: Tenant | None) -> WorkLimits:
        """These limits with ``tenant``'s own values (its non-null ``tenants`` columns) applied."""
        if tenant is None:
            return self
        return replace(self, **{c: int(v) for c in TENANT_LIMIT_COLUMNS if (v := getattr(tenant, c, None)) is not None})


def _n(x: int) -> str:
    return f"{x:,}"


def check_items(
    sample_count: int, sample_limit: int | None, repeats: int, limits: WorkLimits, what: str = "the evaluation"
) -> int:
    """Items of one evaluation (min(sample_limit, sample_count) × repeats); raises :class:`WorkLimitRefused`
    422 naming ``sample_limit`` (when one repeat alone is too many) or ``repeats`` when over
    ``limits.max_items_per_evaluation``."""
    samples = min(sample_limit or sample_count, sample_count)
    items = samples * repeats
    cap = limits.max_items_per_evaluation
    if items > cap:
        field = "sample_limit" if samples > cap else "repeats"
        hint = (
            f"set sample_limit to at most {_n(cap // repeats)}"
            if field == "sample_limit"
            else f"at most {_n(cap // samples)} repeats of {_n(samples)} samples"
        )
        raise WorkLimitRefused(
            422,
            field,
            f"{what} would have {_n(items)} items ({_n(samples)} samples × {_n(repeats)} repeats); at most {_n(cap)} items "
            f"per evaluation ({hint})",
            "too_many_items",
        )
    return items


async def lock_tenant_creations(session: AsyncSession, tenant_id: uuid.UUID) -> None:
    """Serialize the creations of one tenant until the transaction ends (``pg_advisory_xact_lock``), so that
    the queued-items and per-minute counts, and an ``Idempotency-Key`` lookup, see every earlier creation."""
    await session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": f"uep-create:{tenant_id}"})


async def check_work_limits(
    session: AsyncSession,
    tenant: Tenant,
    evaluations: list[Evaluation],
    limits: WorkLimits,
    many_field: str | None = None,
) -> None:
    """Before new ``evaluations`` of ``tenant`` (one request, or one scheduled run) are committed: take the
    tenant's creation lock, then check each one's items, the tenant's queued items with these, and the
    evaluations created in the last 60 s with these. ``limits`` are the site's (the tenant's columns are
    applied here). ``many_field`` names the request field that made several evaluations (``models``/``arms``).
    Raises :class:`WorkLimitRefused`; reads only, so nothing is written either way."""
    limits = limits.for_tenant(tenant)
    await lock_tenant_creations(session, tenant.id)
    for ev in evaluations:
        if ev.total_items > limits.max_items_per_evaluation:
            bench = await session.get(Benchmark, ev.benchmark_id)
            check_items(bench.sample_count if bench else ev.total_items, ev.sample_limit, ev.repeats, limits)
    with session.no_autoflush:
        queued = await session.scalar(
            select(func.coalesce(func.sum(func.greatest(Evaluation.total_items - Evaluation.completed_items, 0)), 0)).where(
                Evaluation.tenant_id == tenant.id, Evaluation.status.in_(UNFINISHED_STATUSES)
            )
        )
        assert queued is not None  # coalesce(..., 0)
        new_items = sum(ev.total_items for ev in evaluations)
        if int(queued) + new_items > limits.max_queued_items:
            raise WorkLimitRefused(
                409,
                "sample_limit",
                f"tenant {tenant.slug!r} has {_n(int(queued))} items queued (not yet finished); {_n(new_items)} more would "
                f"exceed its limit of {_n(limits.max_queued_items)} queued items: wait for evaluations to finish, cancel "
                "some, or evaluate fewer items",
                "too_many_queued_items",
            )
        cap = limits.max_evaluations_per_minute
        if len(evaluations) > cap:
            raise WorkLimitRefused(
                422,
                many_field or "models",
                f"{len(evaluations)} evaluations in one request; tenant {tenant.slug!r} may create at most {cap} per minute",
                "too_many_evaluations",
            )
        window = text(f"now() - interval '{RATE_WINDOW_S} seconds'")
        recent = list(
            await session.scalars(
                select(Evaluation.created_at)
                .where(Evaluation.tenant_id == tenant.id, Evaluation.created_at > window)
                .order_by(Evaluation.created_at)
            )
        )
        if len(recent) + len(evaluations) > cap:
            # the creation that must leave the window before these fit
            oldest = recent[len(recent) + len(evaluations) - cap - 1]
            db_now = await session.scalar(select(func.now()))
            assert db_now is not None  # now() is never NULL
            retry = max(1, math.ceil((oldest + timedelta(seconds=RATE_WINDOW_S) - db_now).total_seconds()))
            raise WorkLimitRefused(
                429,
                "X-UEP-Tenant",
                f"tenant {tenant.slug!r} created {len(recent)} evaluations in the last {RATE_WINDOW_S} s; at most {cap} per "
                f"{RATE_WINDOW_S} s: retry in {retry} s",
                "rate_limited",
                retry_after_s=retry,
            )


SCHEDULE_INTERVAL_PROBE_RUNS = 500
SCHEDULE_INTERVAL_PROBE_DAYS = 400


def min_cron_gap(cron: str, start: datetime | None = None, below_s: float | None = None) -> float:
    """The smallest gap, seconds, between consecutive runs of ``cron`` (UTC; croniter) over its next
    :data:`SCHEDULE_INTERVAL_PROBE_RUNS` runs or :data:`SCHEDULE_INTERVAL_PROBE_DAYS` days from ``start``
    (default now), whichever ends first; stops early at the first gap under ``below_s``. A cron's times are
    a product of its fields, so a close pair shows up within its first matching days. ``math.inf`` when it
    runs at most once."""
    start = (start or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    it = croniter(cron, start)
    end = start + timedelta(days=SCHEDULE_INTERVAL_PROBE_DAYS)
    prev = it.get_next(datetime)
    gap = math.inf
    for _ in range(SCHEDULE_INTERVAL_PROBE_RUNS):
        nxt = it.get_next(datetime)
        gap = min(gap, (nxt - prev).total_seconds())
        if (below_s is not None and gap < below_s) or nxt > end:
            break
        prev = nxt
    return gap


def check_schedule_interval(cron: str, limits: WorkLimits, start: datetime | None = None) -> None:
    """Raise :class:`WorkLimitRefused` 422 naming ``cron`` when two consecutive runs of ``cron`` are closer
    than ``limits.min_schedule_interval_s`` (see :func:`min_cron_gap`). ``cron`` must be valid."""
    interval = limits.min_schedule_interval_s
    gap = min_cron_gap(cron, start, below_s=interval)
    if gap < interval:
        raise WorkLimitRefused(
            422,
            "cron",
            f"cron {cron!r} runs {gap:g} s apart; schedules may run at most once every {interval} s",
            "schedule_too_frequent",
        )


def next_allowed_run(cron: str, last_run: datetime, limits: WorkLimits) -> datetime:
    """The first time of ``cron`` at least ``limits.min_schedule_interval_s`` after ``last_run`` (cron times are
    whole seconds)."""
    after = last_run.astimezone(UTC) + timedelta(seconds=limits.min_schedule_interval_s - 1)
    nxt: datetime = croniter(cron, after).get_next(datetime)
    return nxt.astimezone(UTC)
