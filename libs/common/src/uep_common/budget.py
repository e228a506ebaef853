"""Budget enforcement hooks called by the gateway, the scheduler and the judge.

These are the only entry points other services use; the cost model, caps, reservations and spend ledger
behind them live in :mod:`uep_common.db.budgets`. Until budgets are configured every call allows everything.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy.ext.asyncio import AsyncSession

    from uep_common.db.models import Evaluation, Model, Tenant
    from uep_common.events import ScoreComputed


class BudgetRefused(Exception):
    """Creation refused because the estimate exceeds what is left (HTTP ``status_code`` 402 or 409)."""

    def __init__(self, status_code: int, field: str, reason: str, kind: str) -> None:
        super().__init__(reason)
        self.status_code, self.field, self.reason, self.kind = status_code, field, reason, kind


async def check_creation(session: AsyncSession, tenant: Tenant, evaluations: list[Evaluation], principal=None) -> None:
    """Called by the gateway before it commits new evaluations. Raises :class:`BudgetRefused`."""
    return None


async def reserve_for_dispatch(session: AsyncSession, ev: Evaluation, model: Model, n: int) -> int:
    """Called by the scheduler, inside its transaction, before leasing ``n`` new items of ``ev``.
    Returns how many of them the budget allows (0..n)."""
    return n


async def settle_scores(session: AsyncSession, scores: list[ScoreComputed]) -> None:
    """Called by the scheduler, inside the transaction that releases the leases of ``scores``."""
    return None


async def charge(session: AsyncSession, evaluation_id: uuid.UUID, role: str, prompt_tokens: int | None,
                 completion_tokens: int | None, latency_ms: float | None, model_id: uuid.UUID | None) -> None:
    """Charge a call made for ``evaluation_id`` by ``role`` (``"judge"``) to its budget."""
    return None
