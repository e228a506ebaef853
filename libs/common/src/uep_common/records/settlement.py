"""Settlement of an evaluation's spend: each scored item's actual cost against its reservation
(:func:`settle_scores`, scheduler) and the judge's calls (:func:`charge`, judge). Step 3 and 4 of the flow of
money in :mod:`uep_common.records.budget`, which opens the accounts and reserves at dispatch."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Table, and_, select, text

from uep_common.contract.costs import Pricing
from uep_common.records.budget import locked_account, pricing_of, utc_today
from uep_common.tables.budgets import BudgetAccount, SpendEntry
from uep_common.tables.bulk import ITEM_KEY, column_arrays, insert_from_arrays, key_arrays, rows_from_arrays
from uep_common.tables.models import Evaluation, Model

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy.ext.asyncio import AsyncSession

    from uep_common.contract.events import ScoreComputed


def _call_made(score: ScoreComputed) -> bool:
    """False when inference failed before the model answered (nothing to charge per call)."""
    return not (score.error is not None and score.error.stage == "inference" and score.output is None)


_SPEND = cast(Table, SpendEntry.__table__)
_SETTLEMENT_COLUMNS = (
    "tenant_id",
    "evaluation_id",
    "model_id",
    "role",
    "kind",
    "sample_id",
    "repeat",
    "arm",
    "attempt",
    "items",
    "reserved",
    "settled",
    "prompt_tokens",
    "completion_tokens",
    "latency_ms",
    "day",
)
_INSERT_SETTLEMENTS = (
    insert_from_arrays(_SPEND, _SETTLEMENT_COLUMNS)
    .on_conflict_do_nothing(
        index_elements=["evaluation_id", "sample_id", "repeat", "arm", "attempt"],
        # a literal, not a bound parameter: PostgreSQL infers the arbiter index when planning, and a
        # generic plan of the prepared statement (psycopg prepares after 5 runs) cannot prove
        # ``kind = $1`` implies the partial index's ``kind = 'settle'``
        index_where=text("kind = 'settle'"),
    )
    .returning(_SPEND.c.evaluation_id, _SPEND.c["items"], _SPEND.c.reserved, _SPEND.c.settled)
)
"""The settlement insert: one short statement for every batch size (a column array each,
:mod:`uep_common.tables.bulk`), which psycopg caches and prepares."""

_SETTLED_ITEMS = rows_from_arrays(_SPEND, ITEM_KEY, name="item")
_RELEASED_ITEMS = (
    select(*(_SPEND.c[c] for c in ITEM_KEY))
    .join(_SETTLED_ITEMS, and_(*(_SPEND.c[c] == _SETTLED_ITEMS.c[c] for c in ITEM_KEY)))
    .where(_SPEND.c.kind == "settle", _SPEND.c.reserved < 0)
)
"""The items among a batch's whose reservation a settlement released already (any attempt)."""


async def settle_scores(session: AsyncSession, scores: list[ScoreComputed]) -> None:
    """Called by the scheduler, inside the transaction that releases the leases of ``scores``: records each
    item's actual cost and releases its reservation, exactly once per (item, attempt) (see the module
    docstring). Scores of evaluations without a budget account and re-scores (``rescore_id``) are ignored."""
    scores = [s for s in scores if s.rescore_id is None]
    if not scores:
        return
    accounts = {
        a.evaluation_id: a
        for a in await session.scalars(
            select(BudgetAccount)
            .where(BudgetAccount.evaluation_id.in_({s.evaluation_id for s in scores}))
            .order_by(BudgetAccount.evaluation_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    }
    seen: set[tuple[Any, ...]] = set()
    unique = []
    for s in scores:
        key = (s.evaluation_id, s.sample_id, s.repeat, s.arm, s.attempt)
        if s.evaluation_id in accounts and key not in seen:
            seen.add(key)
            unique.append(s)
    if not unique:
        return
    items = list({(s.evaluation_id, s.sample_id, s.repeat, s.arm) for s in unique})
    released: set[tuple[Any, ...]] = {tuple(row) for row in (await session.execute(_RELEASED_ITEMS, key_arrays(items))).all()}
    prices: dict[uuid.UUID, Pricing] = {}
    open_items = {e: a.items_reserved - a.items_settled for e, a in accounts.items()}
    open_money = {e: Decimal(a.reserved_open) for e, a in accounts.items()}
    rows = []
    today = utc_today()
    for s in unique:
        if s.model_id not in prices:
            prices[s.model_id] = pricing_of(await session.get(Model, s.model_id))
        acct = accounts[s.evaluation_id]
        item = (s.evaluation_id, s.sample_id, s.repeat, s.arm)
        release = Decimal(0)
        if item not in released and open_items[s.evaluation_id] > 0:
            release = min(Decimal(acct.per_item), open_money[s.evaluation_id])
            open_items[s.evaluation_id] -= 1
            open_money[s.evaluation_id] -= release
            released.add(item)
        actual = prices[s.model_id].cost(s.prompt_tokens, s.completion_tokens, s.latency_ms) if _call_made(s) else Decimal(0)
        rows.append(
            {
                "tenant_id": s.tenant_id,
                "evaluation_id": s.evaluation_id,
                "model_id": s.model_id,
                "role": "inference",
                "kind": "settle",
                "sample_id": s.sample_id,
                "repeat": s.repeat,
                "arm": s.arm,
                "attempt": s.attempt,
                "items": 1 if release else 0,
                "reserved": -release,
                "settled": actual,
                "prompt_tokens": s.prompt_tokens,
                "completion_tokens": s.completion_tokens,
                "latency_ms": s.latency_ms,
                "day": today,
            }
        )
    inserted = (await session.execute(_INSERT_SETTLEMENTS, column_arrays(rows, _SETTLEMENT_COLUMNS))).all()
    for evaluation_id, n_items, reserved, settled in inserted:
        acct = accounts[evaluation_id]
        acct.items_settled += n_items
        acct.reserved_open = Decimal(acct.reserved_open) + Decimal(reserved)  # reserved is minus the release
        acct.settled_total = Decimal(acct.settled_total) + Decimal(settled)


async def charge(
    session: AsyncSession,
    evaluation_id: uuid.UUID,
    role: str,
    prompt_tokens: int | None,
    completion_tokens: int | None,
    latency_ms: float | None,
    model_id: uuid.UUID | None,
) -> None:
    """Charge a call made for ``evaluation_id`` by ``role`` (``"judge"``) to its budget: the call's cost at
    ``model_id``'s prices is added to the evaluation's ``judge_total`` and to the ledger (kind ``charge``),
    so it counts against the evaluation's and the tenant's caps. Raises ValueError for an unknown role or
    evaluation. Call it in the transaction that records the call's result."""
    if role not in ("inference", "judge"):
        raise ValueError(f"unknown spend role {role!r}")
    ev = await session.get(Evaluation, evaluation_id)
    if ev is None:
        raise ValueError(f"unknown evaluation {evaluation_id}")
    model = await session.get(Model, model_id) if model_id else None
    cost = pricing_of(model).cost(prompt_tokens, completion_tokens, latency_ms)
    acct = await locked_account(session, ev)
    if role == "judge":
        acct.judge_total = Decimal(acct.judge_total) + cost
    else:
        acct.settled_total = Decimal(acct.settled_total) + cost
    session.add(
        SpendEntry(
            tenant_id=ev.tenant_id,
            evaluation_id=ev.id,
            model_id=model_id,
            role=role,
            kind="charge",
            items=0,
            reserved=0,
            settled=cost,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_ms=latency_ms,
            day=utc_today(),
        )
    )
