"""Flows of the fair queue: an evaluation's flow (its A/B experiment, else itself), the packet an experiment's
arms take together (:func:`arm_packet`), and the stored tags of start-time fair queuing (the clock, the
tenants' and the flows' tags in ``sched_clock``, ``sched_tenants``, ``sched_flows``) loaded into a
:class:`uep_scheduler.fairness.FairQueue` and stored back, one round trip each, by the allocation pass
(:mod:`uep_scheduler.allocation`)."""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.tables.models import Evaluation
from uep_scheduler.fairness import PRIORITY_WEIGHTS, FairQueue, FlowTag, TenantTag


def flow_id_of(ev: Evaluation) -> uuid.UUID:
    """The fair-queuing flow of ``ev``: its A/B experiment, else itself."""
    return ev.experiment_id or ev.id


def arm_packet(
    evs: list[Evaluation],
    planned: dict[uuid.UUID, int],
    free: int,
    ev_used: dict[uuid.UUID, int],
    ev_cap: dict[uuid.UUID, int],
    model_used: dict[uuid.UUID, int],
    model_cap: dict[uuid.UUID, int | None],
) -> list[Evaluation]:
    """The evaluations of one flow that get an item in its next packet (empty: the flow cannot be served now).

    ``evs``: the flow's running evaluations (one, or the arms of an A/B experiment); ``planned``: items
    already planned per evaluation in this pass; ``free``: global slots left; ``ev_used``/``ev_cap`` and
    ``model_used``/``model_cap``: open leases and bounds per evaluation and per model (None = unbounded).

    Only the arms furthest behind (fewest items dispatched or planned) take part, in arm order, and each only
    while the global slots, its own bound and its model's bound leave room. So item ``i`` of every arm goes out
    together when it all fits; when it does not (a capacity-1 model, fewer free slots than arms) the arms take
    turns, one item each, and no arm is ever more than one item ahead of another — a packet never needs more
    room than a single item.
    """
    position = {e.id: e.dispatched_items + planned.get(e.id, 0) for e in evs}
    needing = [e for e in evs if position[e.id] < e.total_items]
    if not needing:
        return []
    behind = min(position[e.id] for e in needing)
    out: list[Evaluation] = []
    want: dict[uuid.UUID, int] = defaultdict(int)
    for e in sorted(needing, key=lambda e: (e.arm, e.id)):
        if len(out) >= free:
            break
        if position[e.id] > behind or ev_used[e.id] >= ev_cap[e.id]:
            continue
        cap = model_cap[e.model_id]
        if cap is not None and model_used.get(e.model_id, 0) + want[e.model_id] + 1 > cap:
            continue
        want[e.model_id] += 1
        out.append(e)
    return out


_TenantRow = tuple[float, float, float]
"""A tenant's stored ``(weight, vfinish, vtime)``."""
_FlowRow = tuple[float, datetime | None, int]
"""A flow's stored ``(vfinish, last_dispatch_at, dispatched)``."""


_LOAD_TAGS = text(
    "SELECT 'c', NULL::uuid, vtime, NULL::float8, NULL::float8, NULL::timestamptz, NULL::bigint FROM sched_clock WHERE id = 1 "
    "UNION ALL SELECT 't', tenant_id, weight, vfinish, vtime, NULL, NULL FROM sched_tenants "
    "          WHERE tenant_id = ANY(CAST(:tenants AS uuid[])) "
    "UNION ALL SELECT 'f', flow_id, vfinish, NULL, NULL, last_dispatch_at, dispatched FROM sched_flows "
    "          WHERE flow_id = ANY(CAST(:flows AS uuid[]))"
)


async def load_tags(
    session: AsyncSession, tenant_ids: set[uuid.UUID], flow_ids: set[uuid.UUID]
) -> tuple[float, dict[uuid.UUID, _TenantRow], dict[uuid.UUID, _FlowRow]]:
    """``(clock, {tenant: (weight, vfinish, vtime)}, {flow: (vfinish, last_dispatch_at, dispatched)})`` in one
    round trip (the clock is 0.0 before the first pass)."""
    clock = 0.0
    tenants: dict[uuid.UUID, _TenantRow] = {}
    flows: dict[uuid.UUID, _FlowRow] = {}
    params = {"tenants": [str(t) for t in tenant_ids], "flows": [str(f) for f in flow_ids]}
    for kind, key, a, b, c, last, n in await session.execute(_LOAD_TAGS, params):
        if kind == "c":
            clock = a
        elif kind == "t":
            tenants[key] = (a, b, c)
        else:
            flows[key] = (a, last, n)
    return clock, tenants, flows


def fair_queue(
    clock: float,
    tenant_rows: dict[uuid.UUID, _TenantRow],
    flow_rows: dict[uuid.UUID, _FlowRow],
    groups: dict[uuid.UUID, list[Evaluation]],
    now: datetime,
    aging_s: float,
) -> FairQueue:
    """A fresh FairQueue over ``groups`` (flow id → its running evaluations) from the stored tags."""
    tenants = [TenantTag(t, w, vf, vt) for t, (w, vf, vt) in tenant_rows.items()]
    flows = []
    for fid, evs in groups.items():
        first = min(evs, key=lambda e: (e.created_at, e.id))
        vfinish, last, dispatched = flow_rows.get(fid, (0.0, None, 0))
        since = last or min((e.started_at or e.created_at) for e in evs)
        flows.append(
            FlowTag(
                flow_id=fid,
                tenant_id=first.tenant_id,
                weight=PRIORITY_WEIGHTS.get(first.priority, 2.0),
                vfinish=vfinish,
                strict=first.priority == "urgent",
                aged=(now - since).total_seconds() >= aging_s,
                order=(first.created_at, first.id),
                last_dispatch_at=last,
                dispatched=dispatched,
                payload=evs,
            )
        )
    return FairQueue(clock, tenants, flows)


_STORE_TAGS = text(
    "WITH c AS (INSERT INTO sched_clock (id, vtime) VALUES (1, :clock) ON CONFLICT (id) DO UPDATE SET vtime = EXCLUDED.vtime), "
    "t AS (INSERT INTO sched_tenants (tenant_id, weight, vfinish, vtime) "
    "      SELECT * FROM jsonb_to_recordset(CAST(:tenants AS jsonb)) AS x(tenant_id uuid, weight float8, vfinish float8, vtime float8) "
    "      ON CONFLICT (tenant_id) DO UPDATE SET vfinish = EXCLUDED.vfinish, vtime = EXCLUDED.vtime, updated_at = now()) "
    "INSERT INTO sched_flows (flow_id, tenant_id, vfinish, last_dispatch_at, dispatched) "
    "SELECT * FROM jsonb_to_recordset(CAST(:flows AS jsonb)) "
    "     AS x(flow_id uuid, tenant_id uuid, vfinish float8, last_dispatch_at timestamptz, dispatched bigint) "
    "ON CONFLICT (flow_id) DO UPDATE SET vfinish = EXCLUDED.vfinish, last_dispatch_at = EXCLUDED.last_dispatch_at, "
    "   dispatched = EXCLUDED.dispatched, updated_at = now()"
)


async def store_tags(session: AsyncSession, queue: FairQueue, charged: set[uuid.UUID]) -> None:
    """Upsert the clock, the tenants and the flows that were charged, in one statement (writable CTEs; rows
    in key order, so concurrent upserts lock in the same order)."""
    if not charged:
        return
    flows = sorted((f for f in queue.flows if f.flow_id in charged), key=lambda f: f.flow_id)
    tenants = [queue.tenants[t] for t in sorted({f.tenant_id for f in flows})]
    await session.execute(
        _STORE_TAGS,
        {
            "clock": queue.clock,
            "tenants": json.dumps(
                [{"tenant_id": str(t.tenant_id), "weight": t.weight, "vfinish": t.vfinish, "vtime": t.vtime} for t in tenants]
            ),
            "flows": json.dumps(
                [
                    {
                        "flow_id": str(f.flow_id),
                        "tenant_id": str(f.tenant_id),
                        "vfinish": f.vfinish,
                        "last_dispatch_at": f.last_dispatch_at.isoformat() if f.last_dispatch_at else None,
                        "dispatched": f.dispatched,
                    }
                    for f in flows
                ]
            ),
        },
    )
