"""The consumers' tenant wall: an event may only touch rows of the tenant it names.

Every event carries ``tenant_id`` and ``evaluation_id``. Before a subscriber's handler sees an event,
:func:`uep_common.runtime.consuming.consume` asks the service's :class:`TenantGuard` whether the evaluation belongs
to that tenant; an event whose tenant differs from its evaluation's owner (a forged or corrupted record)
is dead-lettered with reason ``tenant_mismatch`` and never handled. An evaluation's tenant never changes, so
the answer is cached per process (bounded, least recently used first out).
"""

from __future__ import annotations

import uuid
from collections import OrderedDict

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from uep_common.contract.events import Event
from uep_common.tables.models import Evaluation


class TenantGuard:
    """Checks events against ``evaluations.tenant_id``.

    Args:
        sessionmaker: the service's session factory (its owner role sees every tenant's evaluations).
        cache_size: evaluations whose tenant is remembered.
    """

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], cache_size: int = 100_000) -> None:
        self._sessionmaker = sessionmaker
        self._cache: OrderedDict[uuid.UUID, uuid.UUID] = OrderedDict()
        self._size = cache_size

    async def owner(self, evaluation_id: uuid.UUID) -> uuid.UUID | None:
        """The tenant of ``evaluation_id`` (None when no such evaluation exists)."""
        hit = self._cache.get(evaluation_id)
        if hit is not None:
            self._cache.move_to_end(evaluation_id)
            return hit
        async with self._sessionmaker() as s:
            tenant = await s.scalar(select(Evaluation.tenant_id).where(Evaluation.id == evaluation_id))
        if tenant is not None:
            self._cache[evaluation_id] = tenant
            if len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return tenant

    async def mismatch(self, event: Event) -> str | None:
        """Why ``event`` must not be handled (its tenant is not its evaluation's), or None. An event of an
        evaluation that does not exist passes: its handler finds nothing to touch."""
        owner = await self.owner(event.evaluation_id)
        if owner is None or owner == event.tenant_id:
            return None
        return (
            f"tenant_mismatch: event names tenant {event.tenant_id}, evaluation {event.evaluation_id} belongs to another tenant"
        )


_installed: TenantGuard | None = None


def install(guard: TenantGuard | None) -> None:
    """Make ``guard`` the one :func:`uep_common.runtime.consuming.consume` applies in this process (None: none)."""
    global _installed
    _installed = guard


def installed() -> TenantGuard | None:
    """The guard of this process, if a service with a database installed one."""
    return _installed
