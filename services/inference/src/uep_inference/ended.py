"""Which evaluations have ended, as this inference replica learns it: no new model call for their items.

Stop and cancel (and every other end: the reporter's finish, the budget) stage an EvaluationCompleted
(:func:`uep_common.records.lifecycle.end`). Every inference replica reads that topic in full, without a consumer
group (each replica must see every end; ``uep_inference.service.register``), and records here when each
evaluation ended (the event's ``occurred_at``). An item is *cut* when its evaluation ended after the item was
published (the Kafka record's timestamp): its call in flight may finish, but no further attempt starts and a
backoff wait ends at once (:class:`ItemWatch`, used by :func:`uep_inference.service.call_model`).

Why the record's publication time and not the event's ``occurred_at``: a retried evaluation's items are
dispatched again after the end (new records), and a dead-letter redrive re-publishes the original body (old
``occurred_at``, new record); both are published after the end and so run. The two times come from different
hosts' clocks (the gateway's, the publisher's): an item published within the clocks' skew of the end may be
misjudged either way, which only means it runs as if no end was known, or is cut when a stop raced its
publication.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

MAX_REMEMBERED = 50_000
"""Ended evaluations remembered per replica (least recently ended forgotten first; about 100 bytes each)."""


class EndedEvaluations:
    """Evaluation id → (status, ended at) of the ends seen, bounded by ``max_entries``; waiters of
    :meth:`sleep` are woken when their evaluation ends."""

    def __init__(self, max_entries: int = MAX_REMEMBERED) -> None:
        self.max_entries = max_entries
        self._ended: OrderedDict[uuid.UUID, tuple[str, datetime]] = OrderedDict()
        self._waiters: dict[uuid.UUID, set[asyncio.Event]] = {}

    def record(self, evaluation_id: uuid.UUID, status: str, ended_at: datetime) -> None:
        """Note that ``evaluation_id`` ended ``status`` at ``ended_at`` (timezone-aware); a later end of the same
        evaluation (after a retry) replaces an earlier one, an earlier one arriving late changes nothing."""
        known = self._ended.get(evaluation_id)
        if known is None or ended_at >= known[1]:
            self._ended[evaluation_id] = (status, ended_at)
        self._ended.move_to_end(evaluation_id)
        while len(self._ended) > self.max_entries:
            self._ended.popitem(last=False)
        for waiter in self._waiters.get(evaluation_id, ()):
            waiter.set()

    def ended_since(self, evaluation_id: uuid.UUID, published_at: datetime) -> str | None:
        """The status ``evaluation_id`` ended with, when it ended at or after ``published_at``; else None."""
        known = self._ended.get(evaluation_id)
        return known[0] if known is not None and known[1] >= published_at else None

    async def sleep(self, evaluation_id: uuid.UUID, published_at: datetime, seconds: float) -> str | None:
        """Wait ``seconds``, or less when ``evaluation_id`` ends (after ``published_at``) meanwhile; returns
        :meth:`ended_since` at the end of the wait."""
        if (status := self.ended_since(evaluation_id, published_at)) is not None or seconds <= 0:
            return status
        woken = asyncio.Event()
        self._waiters.setdefault(evaluation_id, set()).add(woken)
        try:
            deadline = asyncio.get_running_loop().time() + seconds
            while (left := deadline - asyncio.get_running_loop().time()) > 0:
                woken.clear()
                try:
                    await asyncio.wait_for(woken.wait(), left)
                except TimeoutError:
                    break
                if (status := self.ended_since(evaluation_id, published_at)) is not None:
                    return status
            return self.ended_since(evaluation_id, published_at)
        finally:
            waiters = self._waiters[evaluation_id]
            waiters.discard(woken)
            if not waiters:
                del self._waiters[evaluation_id]


@dataclass(frozen=True)
class ItemWatch:
    """One item's view of :class:`EndedEvaluations`: its evaluation and when its SampleDispatched was
    published (timezone-aware)."""

    ended: EndedEvaluations
    evaluation_id: uuid.UUID
    published_at: datetime

    def status(self) -> str | None:
        """The end status when the item's evaluation ended after the item was published, else None."""
        return self.ended.ended_since(self.evaluation_id, self.published_at)

    async def sleep(self, seconds: float) -> str | None:
        """Wait up to ``seconds``, returning early with the end status when the evaluation ends meanwhile."""
        return await self.ended.sleep(self.evaluation_id, self.published_at, seconds)
