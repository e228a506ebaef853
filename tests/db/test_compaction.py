"""Compaction of ended evaluations (uep_reporter.compaction, uep_common.records.ledger_compaction) on a migrated database of
its own: which leases go and which stay, the ledger's aggregate rows keep every reader's sums, a late duplicate
score settles nothing while a kept item still settles, a retry still works, a second round changes nothing, and
nothing is touched before the grace period."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any, TypeVar

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from .migrated import SERVER, migrated_database

pytestmark = pytest.mark.db
DB_NAME = os.environ.get("UEP_TEST_COMPACTION_DB", "uep_compaction")
GRACE_S = 600.0
T = TypeVar("T")


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    with migrated_database(DB_NAME) as eng:
        yield eng


def _run(work: Callable[[Any], Awaitable[T]]) -> T:
    """Run ``work(sessionmaker)`` on an async engine of the test database."""
    from uep_common.runtime.session import make_async_engine, make_sessionmaker

    async def main() -> T:
        aengine = make_async_engine(f"{SERVER}/{DB_NAME}")
        try:
            return await work(make_sessionmaker(aengine))
        finally:
            await aengine.dispose()

    return asyncio.run(main())


@dataclass
class World:
    """One tenant's evaluations: ``ended`` (an hour ago), ``running``, ``recent`` (ended a minute ago) and
    ``pending`` (ended an hour ago, one lease released seconds ago); ``samples`` s0…s5."""

    tenant_id: uuid.UUID
    tenant_slug: str
    model_id: uuid.UUID
    judge_id: uuid.UUID
    ended: uuid.UUID
    running: uuid.UUID
    recent: uuid.UUID
    pending: uuid.UUID
    samples: list[uuid.UUID]


def _world(engine: Engine, tag: str) -> World:
    """Build a :class:`World`. Items of ``ended``: s0, s1, s2 with a result without an error (released an hour
    ago; s0 scored twice, attempts 1 and 2), s3 with an error result, s4 in flight with no result. Its ledger: two
    reserve rows on two days, a settle row per scored attempt (two days, tokens partly NULL, money to 10
    decimals), two judge charges (one without a model)."""
    from uep_common.tables.budgets import BudgetAccount, SpendEntry
    from uep_common.tables.models import Benchmark, Evaluation, Model, Sample, SampleLease, SampleResult, Tenant

    now = datetime.now(UTC)
    hour_ago, minute_ago, seconds_ago = now - timedelta(hours=1), now - timedelta(minutes=1), now - timedelta(seconds=5)
    today, yesterday = now.date(), now.date() - timedelta(days=1)
    with Session(engine) as s, s.begin():
        tenant = Tenant(slug=f"cmp-{tag}", name=tag)
        model = Model(name=f"cmp-model-{tag}", backend="triton", endpoint="127.0.0.1:1")
        judge = Model(name=f"cmp-judge-{tag}", backend="triton", endpoint="127.0.0.1:1")
        bench = Benchmark(slug=f"cmp-b-{tag}", name="b", version="v1", category="nlp")
        s.add_all([tenant, model, judge, bench])
        s.flush()
        samples = [Sample(benchmark_id=bench.id, ordinal=i, input={"q": i}, reference={"a": i}) for i in range(6)]
        s.add_all(samples)

        def evaluation(status: str, completed_at: datetime | None, n: int) -> Evaluation:
            ev = Evaluation(
                tenant_id=tenant.id,
                benchmark_id=bench.id,
                model_id=model.id,
                status=status,
                total_items=n,
                dispatched_items=n,
                completed_at=completed_at,
            )
            s.add(ev)
            s.flush()
            s.add(
                BudgetAccount(
                    evaluation_id=ev.id,
                    tenant_id=tenant.id,
                    model_id=model.id,
                    benchmark_slug=bench.slug,
                    cost_unit="gpu_second",
                    per_item=Decimal("0.01"),
                    planned_items=n,
                    estimate=Decimal("0.01") * n,
                    items_reserved=n,
                    items_settled=n - 1,
                    reserved_total=Decimal("0.01") * n,
                    reserved_open=Decimal("0.01"),
                    settled_total=Decimal("0.02"),
                    judge_total=Decimal("0.002"),
                )
            )
            return ev

        ended = evaluation("completed", hour_ago, 5)
        running = evaluation("running", None, 2)
        recent = evaluation("completed", minute_ago, 2)
        pending = evaluation("stopped", hour_ago, 2)
        s.flush()

        def item(ev: Evaluation, i: int, error: bool | None, touched: datetime, attempt: int = 1) -> None:
            """A lease (released at ``touched``; leased and expired when there is no result) and a result
            (``error``: None = no result)."""
            leased = error is not None
            s.add(
                SampleLease(
                    evaluation_id=ev.id,
                    sample_id=samples[i].id,
                    state="released" if leased else "leased",
                    attempt=attempt,
                    leased_at=touched - timedelta(seconds=1),
                    lease_expires_at=touched + timedelta(seconds=300) if leased else hour_ago,
                    released_at=touched if leased else None,
                )
            )
            if error is not None:
                s.add(
                    SampleResult(
                        evaluation_id=ev.id,
                        sample_id=samples[i].id,
                        output="x",
                        is_correct=not error,
                        score=0.0 if error else 1.0,
                        error={"stage": "inference", "type": "boom", "message": "m"} if error else None,
                        attempt=attempt,
                        score_event_id=uuid.uuid4(),
                    )
                )

        def spend(ev: Evaluation, kind: str, day: date, items: int, reserved: str, settled: str, **kw: Any) -> None:
            s.add(
                SpendEntry(
                    tenant_id=tenant.id,
                    evaluation_id=ev.id,
                    model_id=kw.pop("model_id", model.id),
                    role=kw.pop("role", "inference"),
                    kind=kind,
                    items=items,
                    reserved=Decimal(reserved),
                    settled=Decimal(settled),
                    day=day,
                    **kw,
                )
            )

        def settle(ev: Evaluation, i: int, day: date, release: bool, settled: str, attempt: int = 1, **kw: Any) -> None:
            spend(
                ev,
                "settle",
                day,
                1 if release else 0,
                "-0.01" if release else "0",
                settled,
                sample_id=samples[i].id,
                repeat=0,
                arm="main",
                attempt=attempt,
                **kw,
            )

        item(ended, 0, False, hour_ago, attempt=2)
        item(ended, 1, False, hour_ago)
        item(ended, 2, False, hour_ago)
        item(ended, 3, True, hour_ago)
        item(ended, 4, None, hour_ago)
        spend(ended, "reserve", yesterday, 2, "0.02", "0")
        spend(ended, "reserve", today, 3, "0.03", "0")
        settle(ended, 0, yesterday, True, "0.004", prompt_tokens=100, completion_tokens=10, latency_ms=5.0)
        settle(ended, 0, today, False, "0.003", attempt=2, prompt_tokens=90, completion_tokens=9, latency_ms=4.0)
        settle(ended, 1, today, True, "0.005")
        settle(ended, 2, today, True, "0.0061234567", prompt_tokens=50, completion_tokens=5, latency_ms=2.5)
        settle(ended, 3, today, True, "0")
        spend(ended, "charge", today, 0, "0", "0.002", role="judge", model_id=judge.id, prompt_tokens=30, completion_tokens=3)
        spend(ended, "charge", today, 0, "0", "0", role="judge", model_id=None)

        for ev in (running, recent):
            item(ev, 0, False, hour_ago)
            item(ev, 1, False, hour_ago)
            spend(ev, "reserve", today, 2, "0.02", "0")
            settle(ev, 0, today, True, "0.001")
            settle(ev, 1, today, True, "0.001")
        item(pending, 0, False, seconds_ago)
        item(pending, 1, False, hour_ago)
        spend(pending, "reserve", today, 2, "0.02", "0")
        settle(pending, 0, today, True, "0.001")
        settle(pending, 1, today, True, "0.002")
        return World(
            tenant.id, tenant.slug, model.id, judge.id, ended.id, running.id, recent.id, pending.id, [x.id for x in samples]
        )


def _leases(engine: Engine, w: World) -> set[tuple[uuid.UUID, int]]:
    """``(evaluation, sample index)`` of the world's leases."""
    index = {sid: i for i, sid in enumerate(w.samples)}
    with engine.connect() as c:
        rows = c.execute(
            text("SELECT evaluation_id, sample_id FROM sample_leases WHERE tenant_id = :t"), {"t": w.tenant_id}
        ).all()
    return {(e, index[sid]) for e, sid in rows}


def _snapshot(engine: Engine, w: World) -> dict[str, list[tuple[Any, ...]]]:
    """Every row compaction may touch, whole, in id order."""
    queries = {
        "sample_leases": "SELECT * FROM sample_leases WHERE tenant_id = :t ORDER BY id",
        "spend_ledger": "SELECT * FROM spend_ledger WHERE tenant_id = :t ORDER BY id",
        "evaluations": "SELECT id, status, details_compacted_at FROM evaluations WHERE tenant_id = :t ORDER BY id",
        "budget_accounts": "SELECT * FROM budget_accounts WHERE tenant_id = :t ORDER BY evaluation_id",
    }
    with engine.connect() as c:
        return {k: [tuple(r) for r in c.execute(text(q), {"t": w.tenant_id})] for k, q in queries.items()}


def _ledger_sums(engine: Engine, w: World) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """Exact sums of every ledger column per (evaluation, model, role, kind, day)."""
    with engine.connect() as c:
        rows = c.execute(
            text(
                "SELECT evaluation_id, model_id, role, kind, day, sum(items), sum(reserved), sum(settled), "
                "sum(prompt_tokens), sum(completion_tokens), sum(latency_ms), sum(coalesce(entries, 1)) "
                "FROM spend_ledger WHERE tenant_id = :t GROUP BY 1, 2, 3, 4, 5"
            ),
            {"t": w.tenant_id},
        ).all()
    return {tuple(r[:5]): tuple(r[5:]) for r in rows}


def _readers(w: World) -> dict[str, Any]:
    """What every reader of the ledger answers for the world: the budget's spend so far today, ``GET /v1/spend``
    (each grouping, with and without filters) and the reports' cost per role of each evaluation."""
    from uep_common.records import budget
    from uep_common.tables.models import Tenant
    from uep_gateway.api.budgets import spend
    from uep_gateway.auth import Principal
    from uep_reporter.analysis import cost_by_role

    principal = Principal(tenant=Tenant(id=w.tenant_id, slug=w.tenant_slug, name="t"), role="admin", kind="key", name="t")
    today = datetime.now(UTC).date()
    filters: list[dict[str, Any]] = [
        {},
        {"role": "inference"},
        {"role": "judge"},
        {"evaluation_id": w.ended},
        {"since": today},
        {"until": today - timedelta(days=1)},
    ]

    async def read(sm: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with sm() as session:
            out["tenant_used_today"] = await budget.tenant_used_today(session, w.tenant_id)
            for group_by in ("tenant", "day", "evaluation", "role"):
                for f in filters:
                    args = {"tenant": None, "evaluation_id": None, "role": None, "since": None, "until": None, **f}
                    answer = await spend(group_by=group_by, session=session, principal=principal, **args)
                    out[f"spend:{group_by}:{sorted(f.items())}"] = answer
            for ev in (w.ended, w.running, w.recent, w.pending):
                out[f"cost_by_role:{ev}"] = await cost_by_role(session, ev)
        return out

    return _run(read)


def _round(grace_s: float = GRACE_S, batch_size: int = 2000, max_batches: int = 50) -> dict[str, Any]:
    from uep_reporter.compaction import run_round

    return _run(lambda sm: run_round(sm, grace_s, batch_size, max_batches))


def test_compaction_deletes_only_unneeded_leases_and_keeps_every_sum(engine: Engine) -> None:
    w = _world(engine, "main")
    readers, sums, before = _readers(w), _ledger_sums(engine, w), _snapshot(engine, w)
    assert readers["spend:tenant:[]"]["totals"]["calls"] == 13  # 11 settle rows + 2 charges
    assert [(r.role, r.calls) for r in readers[f"cost_by_role:{w.ended}"].by_role] == [("inference", 5), ("judge", 2)]

    # before the grace period (two hours here) nothing is touched
    assert _round(grace_s=7200)["evaluations"] == 0
    assert _snapshot(engine, w) == before

    done = _round()
    # ended: s0, s1, s2; pending: s1 (its s0 was released seconds ago)
    assert (done["leases"], done["finished"], done["evaluations"]) == (4, 1, 2)
    assert _leases(engine, w) == {
        (w.ended, 3),  # error result: a retry or a redrive runs it again
        (w.ended, 4),  # no result: a retry dispatches it again
        (w.running, 0),
        (w.running, 1),
        (w.recent, 0),
        (w.recent, 1),
        (w.pending, 0),  # released less than the grace period ago
    }
    # every sum of every reader is what it was
    assert _readers(w) == readers
    assert _ledger_sums(engine, w) == sums
    with engine.connect() as c:
        ledger = {
            ev: c.execute(
                text(
                    "SELECT kind, role, day, sample_id IS NOT NULL, entries, items, reserved, settled FROM spend_ledger "
                    "WHERE evaluation_id = :e ORDER BY kind, role, day, sample_id IS NOT NULL, entries, settled"
                ),
                {"e": ev},
            ).all()
            for ev in (w.ended, w.pending)
        }
        compacted = dict(
            c.execute(
                text("SELECT id, details_compacted_at IS NOT NULL FROM evaluations WHERE tenant_id = :t"), {"t": w.tenant_id}
            ).all()
        )
        closed = dict(
            c.execute(
                text("SELECT evaluation_id, ledger_compacted_at IS NOT NULL FROM budget_accounts WHERE tenant_id = :t"),
                {"t": w.tenant_id},
            ).all()
        )
    today, yesterday = datetime.now(UTC).date(), datetime.now(UTC).date() - timedelta(days=1)
    assert [tuple(r) for r in ledger[w.ended]] == [
        ("charge", "judge", today, False, 1, 0, Decimal(0), Decimal(0)),  # the judge's charges: one group per model
        ("charge", "judge", today, False, 1, 0, Decimal(0), Decimal("0.002")),
        ("reserve", "inference", yesterday, False, 1, 2, Decimal("0.02"), Decimal(0)),
        ("reserve", "inference", today, False, 1, 3, Decimal("0.03"), Decimal(0)),
        ("settle", "inference", yesterday, False, 1, 1, Decimal("-0.01"), Decimal("0.004")),
        ("settle", "inference", today, False, 3, 2, Decimal("-0.02"), Decimal("0.0141234567")),  # s0 attempt 2, s1, s2
        ("settle", "inference", today, True, None, 1, Decimal("-0.01"), Decimal(0)),  # s3: its lease is kept
    ]
    assert [tuple(r) for r in ledger[w.pending]] == [
        ("reserve", "inference", today, False, 1, 2, Decimal("0.02"), Decimal(0)),
        ("settle", "inference", today, False, 1, 1, Decimal("-0.01"), Decimal("0.002")),  # s1
        ("settle", "inference", today, True, None, 1, Decimal("-0.01"), Decimal("0.001")),  # s0: its lease is kept
    ]
    assert compacted == {w.ended: True, w.running: False, w.recent: False, w.pending: False}
    assert closed == {w.ended: True, w.running: False, w.recent: False, w.pending: True}
    for table in ("sample_leases", "spend_ledger", "budget_accounts"):
        others = [r for r in before[table] if {w.running, w.recent} & set(r)]
        assert others and all(r in _snapshot(engine, w)[table] for r in others)  # running and recent: untouched

    # a second round changes nothing (pending's lease is still too recent)
    after = _snapshot(engine, w)
    again = _round()
    assert (again["leases"], again["ledger_rows"], again["finished"]) == (0, 0, 0)
    assert _snapshot(engine, w) == after


def test_small_batches_fold_again_into_one_aggregate_per_group(engine: Engine) -> None:
    from uep_reporter.compaction import Batch, compact_batch

    w = _world(engine, "batches")
    readers, sums = _readers(w), _ledger_sums(engine, w)
    assert _round(batch_size=2, max_batches=1)["batches"] == 1  # a round runs at most max_batches transactions

    async def one_batch(sm: Any) -> Batch | None:
        async with sm() as session, session.begin():
            return await compact_batch(session, w.ended, GRACE_S, 2)

    batches: list[Batch | None] = []
    while not (batches and (batches[-1] is None or batches[-1].finished)) and len(batches) < 20:
        batches.append(_run(one_batch))
    assert all(b is not None and b.leases <= 2 and b.folded <= 2 for b in batches)
    assert batches[-1] is not None and batches[-1].finished
    assert _leases(engine, w) >= {(w.ended, 3), (w.ended, 4)} and not {(w.ended, i) for i in range(3)} & _leases(engine, w)
    assert _readers(w) == readers
    assert _ledger_sums(engine, w) == sums
    with engine.connect() as c:
        per_group = c.execute(
            text(
                "SELECT count(*) FROM spend_ledger WHERE evaluation_id = :e AND entries IS NOT NULL "
                "GROUP BY model_id, role, kind, day"
            ),
            {"e": w.ended},
        ).all()
    assert sorted(n for (n,) in per_group) == [1, 1, 1, 1, 1, 1]  # folded again batch by batch: one row per group


def test_late_duplicate_settles_nothing_and_kept_items_still_settle_and_retry(engine: Engine) -> None:
    from uep_common.contract.events import ErrorInfo, ScoreComputed
    from uep_common.records import settlement
    from uep_common.records.reruns import retry_evaluation

    w = _world(engine, "late")
    _round()

    def score(i: int, attempt: int, **kw: Any) -> ScoreComputed:
        return ScoreComputed(
            evaluation_id=w.ended,
            tenant_id=w.tenant_id,
            sample_id=w.samples[i],
            attempt=attempt,
            benchmark_id=uuid.uuid4(),
            model_id=w.model_id,
            metric_name="m",
            metric_version="1",
            is_correct=True,
            score=1.0,
            output="x",
            latency_ms=1000.0,
            **kw,
        )

    def account() -> tuple[Any, ...]:
        with engine.connect() as c:
            return tuple(
                c.execute(
                    text("SELECT items_settled, reserved_open, settled_total FROM budget_accounts WHERE evaluation_id = :e"),
                    {"e": w.ended},
                ).one()
            )

    sums, acct = _ledger_sums(engine, w), account()

    async def settle(sm: Any, scores: list[ScoreComputed]) -> None:
        async with sm() as session, session.begin():
            await settlement.settle_scores(session, scores)

    # redelivered scores of aggregated items (s1 attempt 1; s0 attempt 2): dropped by the trigger
    _run(lambda sm: settle(sm, [score(1, 1), score(0, 2)]))
    assert _ledger_sums(engine, w) == sums
    assert account() == acct

    # a retry still finds what it re-runs: s3's error result moved aside, the leases of s3 and s4 expired
    async def retry(sm: Any) -> tuple[int, int]:
        async with sm() as session, session.begin():
            outcome = await retry_evaluation(session, w.ended)
        return outcome.failed, outcome.unfinished

    assert _run(retry) == (1, 1)
    # the re-run of the kept item s3 (attempt 2) and of s4 settle as usual: a settle row each, s4's reservation
    # (the one left open) released once
    _run(lambda sm: settle(sm, [score(3, 2), score(4, 2, error=ErrorInfo(stage="scoring", type="t", message="m"))]))
    with engine.connect() as c:
        rows = c.execute(
            text(
                "SELECT sample_id, attempt, items, reserved FROM spend_ledger "
                "WHERE evaluation_id = :e AND kind = 'settle' AND sample_id IS NOT NULL ORDER BY sample_id, attempt"
            ),
            {"e": w.ended},
        ).all()
    assert sorted((w.samples.index(r[0]), r[1], r[2], r[3]) for r in rows) == [
        (3, 1, 1, Decimal("-0.01")),
        (3, 2, 0, Decimal(0)),  # s3 released its reservation in attempt 1
        (4, 2, 1, Decimal("-0.01")),
    ]
    assert account()[:2] == (acct[0] + 1, acct[1] - Decimal("0.01"))


def test_bounds_are_checked() -> None:
    from uep_common.records.ledger_compaction import fold
    from uep_reporter.compaction import compact_batch, run_round

    with pytest.raises(ValueError, match="grace_s"):
        asyncio.run(run_round(None, -1.0))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch_size"):
        asyncio.run(compact_batch(None, uuid.uuid4(), 10.0, 0))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_batches"):
        asyncio.run(run_round(None, 10.0, 10, 0))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="limit"):
        asyncio.run(fold(None, uuid.uuid4(), 0))  # type: ignore[arg-type]


def test_aggregates_split_where_a_sum_would_overflow() -> None:
    from types import SimpleNamespace

    from uep_common.records.ledger_compaction import INT_MAX, aggregate

    key = {"tenant_id": uuid.uuid4(), "model_id": None, "role": "inference", "kind": "settle", "day": date(2026, 1, 1)}
    row = SimpleNamespace(
        **key,
        items=1,
        reserved=Decimal("-0.01"),
        settled=Decimal(1),
        prompt_tokens=INT_MAX - 5,
        completion_tokens=None,
        latency_ms=None,
        occurred_at=datetime(2026, 1, 1, tzinfo=UTC),
        entries=None,
    )
    small = SimpleNamespace(**{**vars(row), "prompt_tokens": 5})
    out = aggregate([row, small, row])
    assert [(a.prompt_tokens, a.entries, a.items, a.settled) for a in out] == [
        (INT_MAX, 2, 2, Decimal(2)),
        (INT_MAX - 5, 1, 1, Decimal(1)),
    ]
