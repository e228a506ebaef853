"""Who gets the next dispatch slot: two-level start-time fair queuing with an urgent class and aging.

Algorithm
    Start-time Fair Queuing (SFQ; P. Goyal, H. M. Vin, H. Cheng, "Start-time Fair Queuing: A Scheduling
    Algorithm for Integrated Services Packet Switching Networks", SIGCOMM 1996 / IEEE/ACM ToN 5(5), 1997),
    applied hierarchically (tenants, then flows within a tenant), with one dispatched item as a packet of
    length 1. For a flow ``f`` with weight ``w_f`` whose previous packet finished at tag ``F_f``, the next
    packet gets the start tag ``S = max(v, F_f)`` and the finish tag ``F_f := S + L / w_f``; packets are
    served in increasing order of start tags, and the virtual time ``v`` becomes the start tag of the packet
    served. SFQ's fairness bound: two continuously backlogged flows ``f, m`` receive, over any interval,
    ``|W_f / w_f − W_m / w_m| ≤ L_f / w_f + L_m / w_m`` (Goyal et al., Theorem 1), i.e. within one item of
    their weighted share here, however many flows they hold.

    Level 1, tenants: system virtual time ``v`` (``sched_clock``), tenant weight (``sched_tenants.weight``,
    1 by default, so tenants get equal shares whatever number of evaluations each runs).
    Level 2, flows of one tenant: the tenant's own virtual time (``sched_tenants.vtime``), flow weight by
    priority class (:data:`PRIORITY_WEIGHTS`: urgent 8, high 4, normal 2, low 1). A flow is an evaluation,
    or an A/B experiment whose arms go out together when they fit (one "packet" = item ``i`` of every arm;
    its length is the number of arms that got an item: fewer when the arms take turns,
    :func:`uep_scheduler.flows.arm_packet`).

    Urgent class: flows of priority ``urgent`` are served before all others (strict priority, fair among
    themselves by the same tags), so a new urgent evaluation takes the next free slot; work in flight is
    never cancelled. Aging: a flow that could run but has had no slot for ``aging_seconds`` joins the urgent
    class for its next slot, so a low-priority evaluation progresses even under a stream of urgent ones.
    A flow's or tenant's tags are charged for urgent and aged slots too: urgent work is paid back later in
    the tenant's fair share.

State lives in PostgreSQL (``uep_common.tables.scheduling``) and is read and written by one allocation pass at
a time (``uep_scheduler.allocation``); this module is the pure, in-memory part of a pass.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

PRIORITY_WEIGHTS: dict[str, float] = {"urgent": 8.0, "high": 4.0, "normal": 2.0, "low": 1.0}
"""Weight of a flow within its tenant by priority class (relative shares: a high evaluation gets twice the
slots of a normal one of the same tenant while both are backlogged)."""


@dataclass
class TenantTag:
    """SFQ state of a tenant: ``weight`` (> 0), ``vfinish`` (finish tag in system virtual time), ``vtime``
    (virtual time of the tenant's flows)."""

    tenant_id: uuid.UUID
    weight: float = 1.0
    vfinish: float = 0.0
    vtime: float = 0.0


@dataclass
class FlowTag:
    """SFQ state of a flow and what the pass knows about it.

    ``strict``: priority urgent; ``aged``: waited longer than the aging limit. Either puts the flow in the
    strict-priority class. ``order``: tie-break (creation time, then id). ``payload``: whatever the caller
    needs back (the evaluations of the flow).
    """

    flow_id: uuid.UUID
    tenant_id: uuid.UUID
    weight: float
    vfinish: float = 0.0
    strict: bool = False
    aged: bool = False
    order: tuple[Any, ...] = ()
    last_dispatch_at: datetime | None = None
    dispatched: int = 0
    payload: object = field(default=None, repr=False)

    @property
    def urgent(self) -> bool:
        """In the strict-priority class (urgent priority, or aged)."""
        return self.strict or self.aged


class FairQueue:
    """The in-memory fair queue of one allocation pass.

    Args:
        clock: the system virtual time ``v``.
        tenants: the tags of every tenant owning a flow.
        flows: the tags of every flow that may be served.
    """

    def __init__(self, clock: float, tenants: Iterable[TenantTag], flows: Iterable[FlowTag]) -> None:
        self.clock = clock
        self.tenants = {t.tenant_id: t for t in tenants}
        self.flows = list(flows)
        for f in self.flows:
            self.tenants.setdefault(f.tenant_id, TenantTag(f.tenant_id))

    def tenant_start(self, tenant_id: uuid.UUID) -> float:
        """Start tag of a tenant's next slot: ``max(v, F_tenant)``."""
        return max(self.clock, self.tenants[tenant_id].vfinish)

    def flow_start(self, flow: FlowTag) -> float:
        """Start tag of a flow's next slot within its tenant: ``max(v_tenant, F_flow)``."""
        return max(self.tenants[flow.tenant_id].vtime, flow.vfinish)

    def pick(self, eligible: Callable[[FlowTag], bool]) -> FlowTag | None:
        """The flow to serve next among those for which ``eligible(flow)`` is true (capacity left), or None.

        Urgent-class flows first; then the tenant with the smallest start tag; then, within it, the flow with
        the smallest start tag. Ties go to the smaller finish tag, then to ``order``. Does not charge.
        """
        candidates = [f for f in self.flows if eligible(f)]
        if not candidates:
            return None
        pool = [f for f in candidates if f.urgent] or candidates
        tenant_ids = {f.tenant_id for f in pool}
        best_tenant = min(tenant_ids, key=lambda t: (self.tenant_start(t), self.tenants[t].vfinish, str(t)))
        mine = [f for f in pool if f.tenant_id == best_tenant]
        return min(mine, key=lambda f: (self.flow_start(f), f.vfinish, f.order, str(f.flow_id)))

    def charge(self, flow: FlowTag, cost: float = 1.0, now: datetime | None = None) -> None:
        """Account one packet of length ``cost`` (items dispatched) served to ``flow``: SFQ tag updates at
        both levels (``v := S``, ``F := S + cost / w``). An aged flow leaves the urgent class."""
        tenant = self.tenants[flow.tenant_id]
        s_tenant = self.tenant_start(flow.tenant_id)
        self.clock = s_tenant
        tenant.vfinish = s_tenant + cost / tenant.weight
        s_flow = self.flow_start(flow)
        tenant.vtime = s_flow
        flow.vfinish = s_flow + cost / flow.weight
        flow.dispatched += int(cost)
        if now is not None:
            flow.last_dispatch_at = now
        flow.aged = False
