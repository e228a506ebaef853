"""The pure fair queue (no database): SFQ tag arithmetic checked by hand."""

import uuid

from uep_scheduler.fairness import FairQueue, FlowTag, TenantTag


def _flow(tenant, weight=2.0, **kw):
    return FlowTag(flow_id=uuid.uuid4(), tenant_id=tenant, weight=weight, **kw)


def test_tags_by_hand():
    """Goyal et al.'s rules: S = max(v, F); F = S + L / w; v = S of the packet served."""
    t1, t2 = uuid.UUID(int=1), uuid.UUID(int=2)
    a, b = _flow(t1), _flow(t2)
    q = FairQueue(0.0, [TenantTag(t1), TenantTag(t2)], [a, b])
    first = q.pick(lambda f: True)
    assert first is a  # tie at S = 0 on both levels: smaller tenant id
    q.charge(a, 1)
    assert (q.clock, q.tenants[t1].vfinish, q.tenants[t1].vtime, a.vfinish) == (0.0, 1.0, 0.0, 0.5)  # F = 0 + 1/2
    assert q.pick(lambda f: True) is b  # t2: S = max(0, 0) = 0 < t1's S = 1
    q.charge(b, 3)  # a packet of 3 items (an A/B flow with 3 arms)
    assert q.tenants[t2].vfinish == 3.0
    # by hand: S_t1 = max(0, 1) = 1 < S_t2 = 3 → a (v = 1, F_t1 = 2); S_t1 = 2 → a (F_t1 = 3); S_t1 = 3 ties
    # S_t2 = 3 with equal finish tags → smaller tenant id, a (F_t1 = 4); then S_t2 = 3 < 4 → b
    order = []
    for _ in range(4):
        f = q.pick(lambda f: True)
        order.append(f)
        q.charge(f, 1)
    assert order == [a, a, a, b]


def test_new_tenant_starts_at_current_virtual_time():
    t1, t2 = uuid.UUID(int=1), uuid.UUID(int=2)
    busy = _flow(t1)
    q = FairQueue(0.0, [TenantTag(t1)], [busy])
    for _ in range(100):
        q.charge(q.pick(lambda f: True), 1)
    late = _flow(t2)
    q.flows.append(late)
    q.tenants[t2] = TenantTag(t2)
    # SFQ gives a newly backlogged flow S = v, not 0: it does not get 100 slots of "credit"
    served = []
    for _ in range(10):
        f = q.pick(lambda f: True)
        served.append(f is late)
        q.charge(f, 1)
    assert sum(served) == 5


def test_urgent_class_first_and_aging_clears():
    t = uuid.UUID(int=1)
    normal, urgent, aged = _flow(t), _flow(t, weight=8.0, strict=True), _flow(t, weight=1.0, aged=True)
    q = FairQueue(0.0, [TenantTag(t)], [normal, urgent, aged])
    picked = q.pick(lambda f: True)
    assert picked in (urgent, aged)
    q.charge(aged, 1)
    assert not aged.urgent and urgent.urgent
    assert q.pick(lambda f: f is not urgent) is normal  # aged one is back in the fair class with a later tag
