"""Compaction of an ended evaluation's spend ledger: its rows replaced by aggregate rows with the same sums.

The ledger (``spend_ledger``, :class:`uep_common.tables.budgets.SpendEntry`; :mod:`uep_common.records.budget` writes it)
holds one ``settle`` row per scored item and attempt, one ``reserve`` row per dispatch pass and one ``charge``
row per judge call. Once the evaluation has ended and compaction has taken it (:mod:`uep_reporter.compaction`:
after a grace period, with its leases), :func:`fold` replaces, in batches, its

* ``reserve`` and ``charge`` rows, and
* ``settle`` rows of items that have no lease any more (compaction deleted it: the item has a result without
  an error and is never run again)

by aggregate rows of the same ``kind``, one per (tenant, evaluation, model, role, kind, UTC day), holding the
sums of ``items``, ``reserved``, ``settled``, ``prompt_tokens``, ``completion_tokens`` and ``latency_ms`` of the
rows they replace and, in ``entries``, how many rows that was (``sample_id``, ``repeat``, ``arm``, ``attempt``
NULL). An aggregate row already there for the evaluation is folded again with the new rows, so an evaluation
keeps one aggregate row per group (two or more only where a sum would not fit an INTEGER column). An aggregate
row satisfies the table's checks (``role`` and ``kind`` are those of its rows) and never meets the partial unique
index ``uq_spend_ledger_settle``: its ``sample_id`` is NULL, and the index (without ``NULLS NOT DISTINCT``) treats
NULLs as distinct, so any number of aggregate settle rows may exist beside the per-item ones.

Every sum a reader computes stays identical (money is NUMERIC, counts are integers: exact):

* :func:`uep_common.records.budget.tenant_used_today`: ``sum(settled)`` per tenant and day;
* ``GET /v1/spend`` (``uep_gateway.api.budgets``): per tenant, day, evaluation or role, filtered by any of them:
  ``sum(reserved)`` and ``sum(items)`` of reserve rows, ``-sum(reserved)`` and ``sum(items)`` of settle rows,
  ``sum(settled)``, and ``calls`` = the entries of settle and charge rows (``sum(coalesce(entries, 1))``);
* reports (``uep_reporter.analysis.cost_by_role``): per evaluation and role, of settle and charge rows,
  ``sum(settled)``, ``sum(prompt_tokens)``, ``sum(completion_tokens)`` and the entries;
* :func:`uep_common.records.settlement.settle_scores` reads one item's settle rows (has its reservation been released?)
  only for an item being scored, i.e. one whose lease is kept: those rows stay as written.

Kept as written: the settle rows of items whose lease compaction keeps (an error result or none: a retry or
a redrive runs them again, their settlement looks up whether the reservation was released, and the partial
unique index ``uq_spend_ledger_settle`` still makes a redelivered score of theirs a no-op).

Why an aggregated item never settles twice. The unique index made a redelivered score a no-op; once the
item's row is folded the index cannot. Instead:

1. :func:`close_settlement` sets ``budget_accounts.ledger_compacted_at`` under the account's row lock, in the
   transaction that deletes the evaluation's first leases; :func:`uep_common.records.settlement.settle_scores` locks the
   same row first, so a settlement either committed before (its rows are folded like the others) or runs after;
2. the trigger ``spend_ledger_late_settle`` (migration 0018) drops a settle row when its evaluation's account
   has ``ledger_compacted_at`` and the item has no lease. A compacted item's lease never comes back: a retry and
   a redrive re-run only items with an error result or none, and the scheduler leases new items only past
   ``dispatched_items``. So a late score of such an item — a redelivery after a scheduler restart, a batch whose
   offsets were not committed — settles nothing, and the items of kept leases settle as before. The trigger
   costs every settle row one primary-key lookup of its account (and, once the account is closed, one of the
   item's lease).

What that gives up: a score of a *second* attempt of an aggregated item that arrives after the grace period (a
lease that expired while its first attempt's result was on its way, scored more than the grace period after
the evaluation ended) is not charged. Leases last ``UEP_LEASE_SECONDS`` (300 s), the grace period 600 s after
the end; such a score is far outside what the pipeline produces while it runs.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any, cast

from sqlalchemy import Table, insert, text
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.tables.budgets import SpendEntry

INT_MAX = 2**31 - 1
"""Largest value of an INTEGER column (``items``, ``prompt_tokens``, ``completion_tokens``, ``entries``)."""
MONEY_MAX = Decimal(10) ** 14
"""Bound of a NUMERIC(24, 10) money column (``reserved``, ``settled``), exclusive."""

_LOCK_ACCOUNT = text(
    "SELECT ledger_compacted_at IS NOT NULL FROM budget_accounts WHERE evaluation_id = :e FOR UPDATE SKIP LOCKED"
)
_HAS_ACCOUNT = text("SELECT EXISTS (SELECT 1 FROM budget_accounts WHERE evaluation_id = :e)")
_CLOSE = text("UPDATE budget_accounts SET ledger_compacted_at = now() WHERE evaluation_id = :e")

_COLUMNS = (
    "tenant_id, model_id, role, kind, day, items, reserved, settled, prompt_tokens, completion_tokens, latency_ms, "
    "occurred_at, entries"
)
_TAKE_WRITTEN = text(
    f"""
    DELETE FROM spend_ledger WHERE id IN (
      SELECT s.id FROM spend_ledger s
       WHERE s.evaluation_id = :e AND s.entries IS NULL
         AND (s.kind <> 'settle' OR NOT EXISTS (
               SELECT 1 FROM sample_leases l
                WHERE l.evaluation_id = s.evaluation_id AND l.sample_id = s.sample_id
                  AND l.repeat = s.repeat AND l.arm = s.arm))
       LIMIT :limit
       FOR UPDATE OF s SKIP LOCKED)
    RETURNING {_COLUMNS}
    """
)
_TAKE_AGGREGATES = text(f"DELETE FROM spend_ledger WHERE evaluation_id = :e AND entries IS NOT NULL RETURNING {_COLUMNS}")
_INSERT = insert(cast(Table, SpendEntry.__table__))


async def close_settlement(session: AsyncSession, evaluation_id: uuid.UUID) -> bool:
    """Lock the evaluation's budget account (``FOR UPDATE SKIP LOCKED``) and set its ``ledger_compacted_at`` if
    unset: from then on a settle row of an item without a lease is dropped (module docstring). Runs in the
    caller's transaction, before any of the evaluation's leases is deleted.

    Returns False when another transaction holds the account (a settlement in progress: try later), True when
    it is locked and closed, or when the evaluation has no account (no settlement is recorded for it then)."""
    closed = await session.scalar(_LOCK_ACCOUNT, {"e": evaluation_id})
    if closed is None:
        return not await session.scalar(_HAS_ACCOUNT, {"e": evaluation_id})
    if not closed:
        await session.execute(_CLOSE, {"e": evaluation_id})
    return True


@dataclass
class _Aggregate:
    """One aggregate row being built: the group key and the running sums."""

    tenant_id: uuid.UUID
    model_id: uuid.UUID | None
    role: str
    kind: str
    day: date
    items: int = 0
    reserved: Decimal = Decimal(0)
    settled: Decimal = Decimal(0)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: float | None = None
    occurred_at: datetime | None = None
    entries: int = 0

    def fits(self, row: Any) -> bool:
        """Whether ``row``'s values can be added without a sum leaving its column's range."""
        ints = (
            (self.items, row.items),
            (self.prompt_tokens or 0, row.prompt_tokens or 0),
            (self.completion_tokens or 0, row.completion_tokens or 0),
            (self.entries, row.entries or 1),
        )
        money = ((self.reserved, row.reserved), (self.settled, row.settled))
        return all(abs(a + b) <= INT_MAX for a, b in ints) and all(abs(a + Decimal(b)) < MONEY_MAX for a, b in money)

    def add(self, row: Any) -> None:
        """Add one ledger row (as written, or an aggregate: its ``entries``) to the sums."""
        self.items += row.items
        self.reserved += Decimal(row.reserved)
        self.settled += Decimal(row.settled)
        if row.prompt_tokens is not None:
            self.prompt_tokens = (self.prompt_tokens or 0) + row.prompt_tokens
        if row.completion_tokens is not None:
            self.completion_tokens = (self.completion_tokens or 0) + row.completion_tokens
        if row.latency_ms is not None:
            self.latency_ms = (self.latency_ms or 0.0) + row.latency_ms
        if self.occurred_at is None or row.occurred_at > self.occurred_at:
            self.occurred_at = row.occurred_at
        self.entries += row.entries or 1

    def as_row(self, evaluation_id: uuid.UUID) -> dict[str, Any]:
        """The ``spend_ledger`` row to insert."""
        return {
            "tenant_id": self.tenant_id,
            "evaluation_id": evaluation_id,
            "model_id": self.model_id,
            "role": self.role,
            "kind": self.kind,
            "items": self.items,
            "reserved": self.reserved,
            "settled": self.settled,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_ms": self.latency_ms,
            "day": self.day,
            "occurred_at": self.occurred_at,
            "entries": self.entries,
        }


def aggregate(rows: list[Any]) -> list[_Aggregate]:
    """Group ledger rows (attributes as in :data:`_COLUMNS`) per (tenant, model, role, kind, day) into aggregates;
    a group gets another aggregate where adding a row would overflow a column (:meth:`_Aggregate.fits`)."""
    groups: dict[tuple[Any, ...], list[_Aggregate]] = {}
    for row in rows:
        key = (row.tenant_id, row.model_id, row.role, row.kind, row.day)
        bucket = groups.setdefault(key, [])
        if not bucket or not bucket[-1].fits(row):
            bucket.append(_Aggregate(*key))
        bucket[-1].add(row)
    return [a for bucket in groups.values() for a in bucket]


async def fold(session: AsyncSession, evaluation_id: uuid.UUID, limit: int) -> int:
    """Replace up to ``limit`` of the evaluation's ledger rows as written (those the module docstring lists) and
    its aggregate rows by new aggregate rows with the same sums. Runs in the caller's transaction, which holds
    the evaluation and its account locked with the account closed (:func:`close_settlement`) and has deleted the
    leases it compacts. Returns how many rows as written were folded (0: none may be folded now; below ``limit``:
    none is left). Raises ValueError for ``limit`` < 1."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    written = (await session.execute(_TAKE_WRITTEN, {"e": evaluation_id, "limit": int(limit)})).all()
    if not written:
        return 0
    previous = (await session.execute(_TAKE_AGGREGATES, {"e": evaluation_id})).all()
    await session.execute(_INSERT, [a.as_row(evaluation_id) for a in aggregate([*previous, *written])])
    return len(written)
