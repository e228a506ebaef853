"""The allocation pass: which items are leased next, under fair queuing and capacity, in PostgreSQL.

One pass runs in one transaction:

1. ``pg_advisory_xact_lock(ALLOCATION_LOCK)``: a PostgreSQL transaction-level advisory lock serialises
   allocation passes across every scheduler replica (released at commit or rollback). A pass reads the
   open leases after taking the lock, so two replicas never both see the same free slot, never lease one
   item twice (``sample_leases`` is also unique per item) and never exceed a capacity bound. The
   evaluations that get items are then locked with ``SELECT … FOR UPDATE`` (in id order) and their status
   re-checked, so a cancel or stop that commits meanwhile is honoured.
2. With ``reconcile``: expired leases whose item has no stored result are dispatched again (attempt + 1,
   no new slot: they were counted as in flight), and open leases whose item is stored are released. With
   ``orphans_before`` also released leases whose item has no stored result, released before it and past
   their expiry: the scheduler saw the item's ScoreComputed but the reporter never stored it (the message
   was lost between the two consumers, e.g. by a broker that lost its log), so the item is dispatched again
   as if its lease had expired unscored.
3. Free slots are given one at a time by two-level start-time fair queuing (:mod:`uep_scheduler.fairness`):
   tenants, then flows (evaluations; the arms of an A/B experiment as one flow), urgent class first, aging,
   under the bounds of :mod:`uep_scheduler.capacity`. An experiment's packet is the next item of each arm
   that is furthest behind (:func:`arm_packet`): item ``i`` of every arm together when the slots and bounds
   allow, else as many of those arms as fit, so arms take turns and never drift more than one item apart.
   No rule needs more free slots at once than one: a packet never waits for room it may never get (a
   capacity-1 model, a global bound below the number of arms, or slots that free one at a time).
4. The budget hook ``reserve_for_dispatch`` is asked once per evaluation for its planned items; the fair
   queuing tags are then charged for what was allowed, in the order the slots were given.
5. Leases and their SampleDispatched events (outbox) are written, evaluation by evaluation in the order of
   each one's first slot (an urgent evaluation's items are staged and published first); the tags are stored.
   The outbox rows are claimed (``outbox.claimed_until``) and returned: the caller publishes them right after
   its commit (:meth:`uep_common.runtime.outbox.OutboxRelay.publish_claimed`), and relays take over any left when the
   claim ends.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Table, and_, func, insert, literal, or_, select, text, true, update
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.configs import parse_evaluation_config
from uep_common.records import budget
from uep_common.records.lifecycle import admit
from uep_common.registry.targets import model_target
from uep_common.runtime.outbox import StagedMessage
from uep_common.tables.models import Benchmark, Evaluation, Model, Sample, SampleLease, SampleResult
from uep_common.tables.scheduling import SchedModel
from uep_scheduler.capacity import evaluation_bound, model_bound
from uep_scheduler.dispatch import LeaseRef, dispatch_events, stored_result
from uep_scheduler.flows import arm_packet, fair_queue, flow_id_of, load_tags, store_tags
from uep_scheduler.leases import in_flight_counts, lost_condition
from uep_scheduler.settings import SchedulerSettings

if TYPE_CHECKING:
    from sqlalchemy.engine import CursorResult

    from uep_scheduler.fairness import FlowTag

ALLOCATION_LOCK = 0x7565_7073
"""Key of the transaction-level advisory lock held by an allocation pass (``'ueps'``)."""

MAX_REDISPATCH_PER_PASS = 1000


@dataclass
class PassResult:
    """What one pass did: new items leased and expired leases re-dispatched, per evaluation; ``order`` lists
    the evaluations of each slot given, in order (for tests and metrics)."""

    leased: dict[uuid.UUID, int] = field(default_factory=dict)
    redispatched: dict[uuid.UUID, int] = field(default_factory=dict)
    released_stale: int = 0
    order: list[uuid.UUID] = field(default_factory=list)
    admitted: list[uuid.UUID] = field(default_factory=list)
    outbox: list[StagedMessage] = field(default_factory=list)
    """The SampleDispatched rows staged, claimed for the caller to publish after commit."""
    exhausted: list[uuid.UUID] = field(default_factory=list)
    """Evaluations whose budget ran out in the pass with every kept item stored: the pass only allocates, the
    caller ends them after its commit (:func:`uep_common.records.exhaustion.finish_exhausted`)."""
    redispatch_capped: bool = False
    """The reconcile found MAX_REDISPATCH_PER_PASS leases to dispatch again: more may be left for the next."""
    in_flight: int = 0
    """Open leases after the pass (those found open, plus the new ones); 0 when the pass stopped before counting."""

    @property
    def dispatched(self) -> int:
        """Events staged: new leases plus re-dispatches."""
        return sum(self.leased.values()) + sum(self.redispatched.values())


async def _samples_for(session: AsyncSession, wanted: list[tuple[uuid.UUID, list[int]]]) -> dict[tuple[uuid.UUID, int], Sample]:
    """Samples of ``(benchmark_id, distinct ordinals)`` pairs, by ``(benchmark_id, ordinal)`` (one query; a
    contiguous run of ordinals, the first-N case, as a range)."""
    conds = []
    for b, ordinals in wanted:
        if not ordinals:
            continue
        lo, hi = min(ordinals), max(ordinals)
        contiguous = hi - lo + 1 == len(ordinals)
        conds.append(
            and_(Sample.benchmark_id == b, Sample.ordinal.between(lo, hi) if contiguous else Sample.ordinal.in_(ordinals))
        )
    if not conds:
        return {}
    return {(s.benchmark_id, s.ordinal): s for s in await session.scalars(select(Sample).where(or_(*conds)))}


async def _reconcile_leases(
    session: AsyncSession,
    running: dict[uuid.UUID, Evaluation],
    models: dict[uuid.UUID, Model],
    now: datetime,
    expires: datetime,
    result: PassResult,
    orphans_before: datetime | None = None,
    claim: datetime | None = None,
    orphans_since: datetime | None = None,
    default_capacity: int = 0,
) -> None:
    """Release open leases whose item is stored; dispatch expired ones again (attempt + 1), and released ones
    without a stored result released before ``orphans_before`` — with ``orphans_since``, only those that became
    such orphans since then (:func:`lost_condition`)."""
    stale = await session.execute(
        update(SampleLease)
        .where(SampleLease.state == "leased", SampleLease.lease_expires_at < now, stored_result())
        .values(state="released", released_at=now)
        .execution_options(synchronize_session=False)
    )
    result.released_stale = cast("CursorResult[Any]", stale).rowcount or 0
    if not running:
        return
    query = select(SampleLease).where(
        lost_condition(now, orphans_before, orphans_since), SampleLease.evaluation_id.in_(list(running))
    )
    if orphans_since is None:  # every released lease is a candidate: one anti-join over the results
        query = query.where(~stored_result())
    else:
        # few candidates (the window): one index probe each, never a pass over every stored result (the
        # planner would choose a hash anti-join over all of an evaluation's results, O(its size))
        hit = (
            select(literal(1).label("hit"))
            .where(
                SampleResult.evaluation_id == SampleLease.evaluation_id,
                SampleResult.sample_id == SampleLease.sample_id,
                SampleResult.repeat == SampleLease.repeat,
                SampleResult.arm == SampleLease.arm,
            )
            .limit(1)
            .lateral("stored")
        )
        query = query.outerjoin(hit, true()).where(hit.c.hit.is_(None))
        await session.execute(text("SET LOCAL jit = off"))  # compiling the probe loop costs more than running it
    expired = list(
        await session.scalars(
            query.order_by(SampleLease.id).limit(MAX_REDISPATCH_PER_PASS).with_for_update(skip_locked=True, of=SampleLease)
        )
    )
    result.redispatch_capped = len(expired) >= MAX_REDISPATCH_PER_PASS
    by_ev: dict[uuid.UUID, list[SampleLease]] = defaultdict(list)
    for lease in expired:
        lease.attempt += 1
        lease.state = "leased"
        lease.leased_at = now
        lease.lease_expires_at = expires
        lease.released_at = None
        by_ev[lease.evaluation_id].append(lease)
    for ev_id, leases in by_ev.items():
        ev = running[ev_id]
        samples = {s.id: s for s in await session.scalars(select(Sample).where(Sample.id.in_([x.sample_id for x in leases])))}
        benchmark = await session.get(Benchmark, ev.benchmark_id)
        assert benchmark is not None  # evaluations.benchmark_id is a foreign key
        result.outbox += await dispatch_events(
            session, ev, benchmark, model_target(models[ev.model_id], default_capacity), samples, leases, expires, claim
        )
        result.redispatched[ev_id] = len(leases)


async def allocate(
    session: AsyncSession,
    settings: SchedulerSettings,
    *,
    reconcile: bool = False,
    now: datetime | None = None,
    orphans_before: datetime | None = None,
    admit_first: list[uuid.UUID] | None = None,
    call_seconds: Mapping[uuid.UUID, float] | None = None,
    orphans_since: datetime | None = None,
) -> PassResult:
    """Run one allocation pass inside the caller's transaction (see the module docstring).

    Args:
        session: an open transaction on the system of record.
        settings: capacity bounds, aging and lease duration.
        reconcile: also re-dispatch expired leases and release stale ones.
        orphans_before: with ``reconcile``, also re-dispatch items released before this time that have no
            stored result (step 2 of the module docstring); None skips that sweep.
        orphans_since: with ``orphans_before``, look only at leases that became orphans since this time (the
            previous sweep's clock); None looks at every released lease of the running evaluations.
        admit_first: evaluations to admit (pending → running, :func:`uep_common.records.lifecycle.admit`) in this
            transaction before the pass, so a new evaluation's admission and first dispatch commit together.
        now: the pass's clock (tests pass a simulated one); default the current UTC time.
        call_seconds: recent call time per model (:class:`uep_scheduler.capacity.CallTimes`), for the items kept
            queued at inference; a model without one gets no queue.

    Returns:
        What was leased and re-dispatched.
    """
    now = now or datetime.now(UTC)
    expires = now + timedelta(seconds=settings.lease_seconds)
    claim = now + timedelta(seconds=settings.outbox_claim_seconds)
    result = PassResult()
    await session.execute(select(func.pg_advisory_xact_lock(ALLOCATION_LOCK)))
    result.admitted = await admit(session, list(admit_first or ()))

    # the running evaluations with their model, benchmark and adaptive limit, in one round trip
    rows = (
        await session.execute(
            select(Evaluation, Model, Benchmark, SchedModel.limit)
            .join(Model, Model.id == Evaluation.model_id)
            .join(Benchmark, Benchmark.id == Evaluation.benchmark_id)
            .outerjoin(SchedModel, SchedModel.model_id == Evaluation.model_id)
            .where(Evaluation.status == "running")
        )
    ).all()
    running = {e.id: e for e, _m, _b, _lim in rows}
    models = {m.id: m for _e, m, _b, _lim in rows}
    benchmarks = {b.id: b for _e, _m, b, _lim in rows}
    aimd = {m.id: lim for _e, m, _b, lim in rows if lim is not None}
    if reconcile:
        await _reconcile_leases(
            session, running, models, now, expires, result, orphans_before, claim, orphans_since, settings.default_model_capacity
        )

    per_ev, per_model, total = await in_flight_counts(session, now)
    result.in_flight = total
    free = settings.max_in_flight_global - total
    waiting = {i: e for i, e in running.items() if e.dispatched_items < e.total_items}
    if free <= 0 or not waiting:
        return result

    limits = aimd if settings.adaptive_concurrency else {}
    calls = call_seconds or {}
    model_cap = {
        m: model_bound(
            models[m],
            settings.model_lease_factor,
            limits.get(m),
            calls.get(m),
            settings.model_queue_seconds,
            settings.default_model_capacity,
        )
        for m in {e.model_id for e in waiting.values()}
    }
    ev_cap = {
        i: evaluation_bound(
            e,
            settings.max_in_flight_per_evaluation,
            settings.max_in_flight_global,
            settings.max_evaluation_share,
            model_cap[e.model_id],
        )
        for i, e in waiting.items()
    }
    groups: dict[uuid.UUID, list[Evaluation]] = defaultdict(list)
    for e in waiting.values():
        groups[flow_id_of(e)].append(e)
    clock, tenant_rows, flow_rows = await load_tags(session, {e.tenant_id for e in waiting.values()}, set(groups))

    # plan: give free slots one flow-packet at a time
    planned: dict[uuid.UUID, int] = defaultdict(int)
    ev_used = {i: per_ev.get(i, 0) for i in waiting}
    model_used = dict(per_model)

    def packet(flow: FlowTag) -> list[Evaluation]:
        evs = cast("list[Evaluation]", flow.payload)  # fair_queue puts each flow's evaluations there
        return arm_packet(evs, planned, free, ev_used, ev_cap, model_used, model_cap)

    queue = fair_queue(clock, tenant_rows, flow_rows, groups, now, settings.aging_seconds)
    slots: list[tuple[uuid.UUID, list[uuid.UUID]]] = []
    while free > 0:
        flow = queue.pick(lambda f: bool(packet(f)))
        if flow is None:
            break
        arms = packet(flow)
        for e in arms:
            planned[e.id] += 1
            ev_used[e.id] += 1
            model_used[e.model_id] = model_used.get(e.model_id, 0) + 1
        free -= len(arms)
        queue.charge(flow, len(arms), now)
        slots.append((flow.flow_id, [e.id for e in arms]))
    if not slots:
        return result

    # lock what gets items, re-check, ask the budget
    locked = {
        e.id: e
        for e in await session.scalars(
            select(Evaluation)
            .where(Evaluation.id.in_(list(planned)))
            .order_by(Evaluation.id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    }
    allowed: dict[uuid.UUID, int] = {}
    for ev_id in sorted(planned):
        ev = locked.get(ev_id)
        if ev is None or ev.status != "running":
            allowed[ev_id] = 0
            continue
        n = min(planned[ev_id], ev.total_items - ev.dispatched_items)
        allowed[ev_id] = await budget.reserve_for_dispatch(session, ev, models[ev.model_id], n) if n > 0 else 0
        if n > 0 and allowed[ev_id] == 0 and ev.completed_items >= ev.total_items:
            result.exhausted.append(ev_id)  # its budget ran out with nothing in flight: ended after the commit

    # charge the tags for what was allowed, in slot order
    queue = fair_queue(clock, tenant_rows, flow_rows, groups, now, settings.aging_seconds)
    flows = {f.flow_id: f for f in queue.flows}
    left = dict(allowed)
    charged: set[uuid.UUID] = set()
    for fid, slot_arms in slots:
        ok = [e for e in slot_arms if left.get(e, 0) > 0]
        for arm_id in ok:
            left[arm_id] -= 1
        if ok:
            queue.charge(flows[fid], len(ok), now)
            charged.add(fid)
            result.order.extend(ok)

    # leases and events (one query for the samples of every evaluation)
    todo = {ev_id: n for ev_id, n in allowed.items() if n > 0}
    ranges = {ev_id: (locked[ev_id].dispatched_items, locked[ev_id].dispatched_items + n) for ev_id, n in todo.items()}
    # item i is the evaluation's (i // repeats)-th sample: the first N, or its sampled ordinals (uep_common.records.sampling)
    configs = {ev_id: parse_evaluation_config(locked[ev_id].config) for ev_id in ranges}

    def ordinals(ev_id: uuid.UUID, start: int, end: int) -> list[int]:
        r = locked[ev_id].repeats
        return [configs[ev_id].ordinal(p) for p in range(start // r, (end - 1) // r + 1)]

    by_key = await _samples_for(session, [(locked[i].benchmark_id, ordinals(i, a, b)) for i, (a, b) in ranges.items()])
    # staged in the order of each evaluation's first slot (an urgent one first), not in id order: lease ids and
    # SampleDispatched events follow, so its items are not queued at inference behind the rest of the pass
    first_slot: dict[uuid.UUID, int] = {}
    for i, ev_id in enumerate(result.order):
        first_slot.setdefault(ev_id, i)
    for ev_id in sorted(ranges, key=lambda e: first_slot.get(e, len(first_slot))):
        start, end = ranges[ev_id]
        ev = locked[ev_id]
        fresh = [
            LeaseRef(by_key[(ev.benchmark_id, configs[ev_id].ordinal(i // ev.repeats))].id, i % ev.repeats, ev.arm, 1)
            for i in range(start, end)
        ]
        await session.execute(
            _INSERT_LEASES,
            [
                {
                    "evaluation_id": ev.id,
                    "sample_id": lease.sample_id,
                    "repeat": lease.repeat,
                    "arm": lease.arm,
                    "state": "leased",
                    "attempt": 1,
                    "leased_at": now,
                    "lease_expires_at": expires,
                }
                for lease in fresh
            ],
        )
        ev.dispatched_items = end
        samples = {by_key[(ev.benchmark_id, o)].id: by_key[(ev.benchmark_id, o)] for o in ordinals(ev_id, start, end)}
        result.outbox += await dispatch_events(
            session,
            ev,
            benchmarks[ev.benchmark_id],
            model_target(models[ev.model_id], settings.default_model_capacity),
            samples,
            fresh,
            expires,
            claim,
        )
        result.leased[ev_id] = end - start
        result.in_flight += end - start

    await store_tags(session, queue, charged)
    return result


_INSERT_LEASES = insert(cast(Table, SampleLease.__table__))
"""New leases of a pass: one executemany INSERT (compiled once; the tenant is set by the table's trigger)."""
