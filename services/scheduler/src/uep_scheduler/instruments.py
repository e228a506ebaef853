"""The scheduler's Prometheus metrics (:mod:`uep_common.runtime.metrics`): dispatches and allocation passes as they
happen, and gauges sampled from PostgreSQL every ``UEP_METRICS_SAMPLE_S`` (:func:`sample_database`).

The sampled gauges describe the shared database, so every scheduler replica reports the same values:
aggregate them with ``max`` across replicas, not ``sum``. Tenants are labelled by slug, the 50 with the
largest values each, the rest summed as ``other`` (:func:`uep_common.runtime.metrics.fold_top`); models by name.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from uep_common.runtime import metrics
from uep_common.runtime.metrics import SampleFn

TENANT_LABELS = 50
"""Most tenants a sampled gauge names (the rest are ``other``)."""

DISPATCHED = metrics.counter(
    "uep_scheduler_dispatched_total",
    "Items dispatched by committed allocation passes: new leases (new) and expired leases sent again (redispatch).",
    ("kind",),
)
PASS_SECONDS = metrics.histogram(
    "uep_scheduler_pass_seconds", "Duration of one allocation pass and its transaction (reconcile: true|false).", ("reconcile",)
)
QUEUE_DEPTH = metrics.gauge(
    "uep_scheduler_queue_depth",
    "Items not yet dispatched of pending and running evaluations, by priority and tenant slug.",
    ("priority", "tenant"),
)
OPEN_LEASES = metrics.gauge("uep_scheduler_open_leases", "Items leased (dispatched) and not yet scored, all evaluations.")
MODEL_LIMIT = metrics.gauge(
    "uep_scheduler_model_limit",
    "Adaptive (AIMD) concurrency limit of each model that has been overloaded, and its registry capacity.",
    ("model", "kind"),
)
INSTANCES_ALIVE = metrics.gauge(
    "uep_scheduler_instances_alive", "Scheduler replicas whose heartbeat is younger than 30 s (scheduler_instances)."
)
OUTBOX_UNPUBLISHED = metrics.gauge("uep_outbox_unpublished", "Outbox rows not yet published, of every service's relay.")
OUTBOX_OLDEST_AGE = metrics.gauge(
    "uep_outbox_oldest_age_seconds", "Age of the oldest unpublished outbox row, seconds (0 when none is waiting)."
)
BUDGET_RESERVED = metrics.gauge(
    "uep_budget_reserved_open",
    "Budget reserved for dispatched items not yet settled, site currency, of pending and running evaluations, per tenant.",
    ("tenant",),
)
BUDGET_SETTLED = metrics.gauge(
    "uep_budget_settled",
    "Spend settled so far, site currency, of pending and running evaluations, per tenant.",
    ("tenant",),
)
END_TO_END = "end_to_end"


def observe_pass(dispatched_new: int, redispatched: int, reconcile: bool, seconds: float) -> None:
    """Count a committed pass's dispatches and observe its duration."""
    if dispatched_new:
        DISPATCHED.labels("new").inc(dispatched_new)
    if redispatched:
        DISPATCHED.labels("redispatch").inc(redispatched)
    PASS_SECONDS.labels("true" if reconcile else "false").observe(seconds)


def observe_released(leased_at: Iterable[datetime]) -> None:
    """End-to-end latency of each released lease: from its lease to its score back at the scheduler."""
    now = datetime.now(UTC)
    for at in leased_at:
        metrics.observe_stage(END_TO_END, max(0.0, (now - at).total_seconds()))


_QUEUE = text(
    "SELECT e.priority, t.slug, SUM(GREATEST(e.total_items - e.dispatched_items, 0)) FROM evaluations e "
    "JOIN tenants t ON t.id = e.tenant_id WHERE e.status IN ('pending', 'running') GROUP BY e.priority, t.slug"
)
_BUDGET = text(
    "SELECT t.slug, SUM(a.reserved_open), SUM(a.settled_total) FROM budget_accounts a "
    "JOIN evaluations e ON e.id = a.evaluation_id JOIN tenants t ON t.id = a.tenant_id "
    "WHERE e.status IN ('pending', 'running') GROUP BY t.slug"
)
_LIMITS = text(
    'SELECT m.name, MAX(s."limit"), MAX(m.max_in_flight) FROM sched_models s JOIN models m ON m.id = s.model_id GROUP BY m.name'
)
_SCALARS = text(
    "SELECT (SELECT COUNT(*) FROM sample_leases WHERE state = 'leased'), "
    "(SELECT COUNT(*) FROM outbox WHERE published_at IS NULL), "
    "(SELECT COALESCE(EXTRACT(EPOCH FROM now() - MIN(created_at)), 0) FROM outbox WHERE published_at IS NULL), "
    "(SELECT COUNT(*) FROM scheduler_instances WHERE heartbeat_at > now() - interval '30 seconds')"
)


async def _sample(session: AsyncSession) -> None:
    await session.execute(text("SET LOCAL statement_timeout = '5s'"))
    queue: dict[tuple[str, ...], float] = {(str(p), str(slug)): float(n or 0) for p, slug, n in await session.execute(_QUEUE)}
    QUEUE_DEPTH.replace(metrics.fold_top(queue, 1, TENANT_LABELS))
    reserved: dict[tuple[str, ...], float] = {}
    settled: dict[tuple[str, ...], float] = {}
    for slug, open_, total in await session.execute(_BUDGET):
        reserved[(str(slug),)] = float(open_ or 0)
        settled[(str(slug),)] = float(total or 0)
    BUDGET_RESERVED.replace(metrics.fold_top(reserved, 0, TENANT_LABELS))
    BUDGET_SETTLED.replace(metrics.fold_top(settled, 0, TENANT_LABELS))
    limits: dict[tuple[str, ...], float] = {}
    for name, limit, capacity in await session.execute(_LIMITS):
        limits[(str(name), "adaptive")] = float(limit)
        if capacity:
            limits[(str(name), "capacity")] = float(capacity)
    MODEL_LIMIT.replace(limits)
    leases, unpublished, age, alive = (await session.execute(_SCALARS)).one()
    OPEN_LEASES.set(float(leases))
    OUTBOX_UNPUBLISHED.set(float(unpublished))
    OUTBOX_OLDEST_AGE.set(float(age))
    INSTANCES_ALIVE.set(float(alive))


def sample_database(sessionmaker: async_sessionmaker[AsyncSession]) -> SampleFn:
    """A sample function (for :func:`uep_common.runtime.service.build_app`) setting the gauges above from PostgreSQL:
    four short read-only queries in one transaction, each bounded by a 5 s statement timeout."""

    async def sample() -> None:
        async with sessionmaker() as session, session.begin():
            await _sample(session)

    return sample
