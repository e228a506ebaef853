"""Per-model limits on the calls in flight, resized when the registry's capacity changes.

Every SampleDispatched (and every judge call) carries the model's target as the registry has it at dispatch,
``max_concurrency`` included (``models.max_in_flight``), so a change of the capacity reaches this replica with
the next item of that model: :meth:`ModelLimits.for_target` then resizes the model's :class:`CallLimit` in place,
unless the target is older than the one that last sized it (an item dispatched before the change, consumed after
a newer one), so the size never goes back. Calls already in flight finish; a larger limit lets waiting calls
start at once, a smaller one holds new calls until fewer than the new limit are in flight.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from datetime import UTC, datetime
from types import TracebackType

from uep_common.contract.events import ModelTarget

log = logging.getLogger(__name__)


class CallLimit:
    """At most :attr:`limit` holders at once (``async with``), a limit that :meth:`resize` may change while calls
    hold or wait for it; waiters are served in arrival order (a call that is cancelled while waiting leaves the
    queue, and one cancelled just after being let in gives its place back)."""

    def __init__(self, limit: int) -> None:
        _check(limit)
        self._limit = limit
        self._in_flight = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def limit(self) -> int:
        """Calls allowed in flight at once."""
        return self._limit

    @property
    def in_flight(self) -> int:
        """Calls holding the limit now."""
        return self._in_flight

    @property
    def waiting(self) -> int:
        """Calls waiting for a place now."""
        return len(self._waiters)

    def resize(self, limit: int) -> None:
        """Allow ``limit`` calls in flight from now on; waiting calls start as far as the new limit allows.

        Raises:
            ValueError: ``limit`` < 1.
        """
        _check(limit)
        self._limit = limit
        self._let_in()

    def _let_in(self) -> None:
        while self._waiters and self._in_flight < self._limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self._in_flight += 1
                waiter.set_result(None)

    async def __aenter__(self) -> CallLimit:
        if self._in_flight < self._limit and not self._waiters:
            self._in_flight += 1
            return self
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # let in, then cancelled before it ran: give the place back
                self._in_flight -= 1
                self._let_in()
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._in_flight -= 1
        self._let_in()


def _check(limit: int) -> None:
    if limit < 1:
        raise ValueError(f"a limit of calls in flight is at least 1, not {limit}")


class ModelLimits:
    """One :class:`CallLimit` per model (endpoint + served name), sized by the registry's serving capacity, so
    calls queue here rather than inside the model server, where the wait would count against the call's
    timeout; resized when a newer target brings another capacity (see the module docstring)."""

    def __init__(self) -> None:
        self._limits: dict[tuple[str, str], tuple[CallLimit, datetime]] = {}

    def for_target(self, target: ModelTarget, capacity: int | None = None, as_of: datetime | None = None) -> CallLimit | None:
        """The limit of ``target`` sized by ``capacity`` (calls in flight, default the registry's
        ``target.max_concurrency``; a backend's ``capacity(target)``), or None when it is not set. ``as_of``: when
        the target was read from the registry (an item's dispatch time; default now); a capacity other than the
        limit's size resizes it unless ``as_of`` is older than the target that sized it last."""
        capacity = target.max_concurrency if capacity is None else capacity
        if not capacity:
            return None
        as_of = as_of or datetime.now(UTC)
        key = (target.endpoint, target.triton_model_name or target.name)
        found = self._limits.get(key)
        if found is None:
            limit = CallLimit(capacity)
        else:
            limit, sized_at = found
            if as_of < sized_at:
                return limit
            if limit.limit != capacity:
                log.info("model %s: calls in flight per replica %d -> %d", key[1], limit.limit, capacity)
                limit.resize(capacity)
        self._limits[key] = (limit, as_of)
        return limit
