"""Retention of the transactional outbox: published rows are deleted once they are no longer needed.

A row is needed after publication only while it may be published again or read back:

* nothing republishes a row once ``published_at`` is stamped (the at-least-once guarantee ends at the stamp;
  the claim rules of :mod:`uep_common.runtime.outbox` only concern unpublished rows), so a published row may go;
* except the last ``SampleDispatched`` of an item whose lease is still open: the scheduler stages exactly that
  row on the dead-letter topic when the item's lease attempts run out (``uep_scheduler.lifecycle``), so it is
  kept until the lease is released.

Rows are kept :data:`DEFAULT_RETAIN_S` after publication (``UEP_OUTBOX_RETAIN_S`` in every service with a
relay, :class:`OutboxRetentionSettings`; an operator reading the table during an incident sees the recent
traffic), then deleted in batches of at most ``limit`` rows with ``FOR UPDATE SKIP LOCKED``, so relays of
several replicas prune side by side without blocking each other or a publishing relay. Every relay prunes the
whole table, so the shortest retention among the services is the one in force.
What is left is vacuumed by PostgreSQL's autovacuum, or, on a server running without it, by the reporter's
vacuum worker (docs/operations.md, "Storage and retention").
"""

from __future__ import annotations

from pydantic import Field
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.events import Topics
from uep_common.runtime.settings import CommonSettings

DEFAULT_RETAIN_S = 120.0
"""Seconds a published outbox row is kept before it may be deleted."""


class OutboxRetentionSettings(CommonSettings):
    """Settings of a service whose outbox relay polls and prunes published rows (``UEP_OUTBOX_*``)."""

    outbox_retain_s: float = Field(
        DEFAULT_RETAIN_S, ge=0, description="Seconds a published outbox row is kept before the relays delete it."
    )
    outbox_prune_interval_s: float = Field(30.0, gt=0, description="Seconds between a relay's pruning rounds.")
    outbox_poll_interval_s: float = Field(
        10.0,
        gt=0,
        description="Seconds between a relay's backstop polls. A writer kicks its relay after each commit, so the poll "
        "only publishes rows a crashed writer or relay left behind and rows whose claim expired; an idle relay's only "
        "work is this poll (one transaction of four statements).",
    )


_PRUNE = text(
    """
    DELETE FROM outbox WHERE id IN (
      SELECT o.id FROM outbox o
       WHERE o.published_at IS NOT NULL
         AND o.published_at < now() - make_interval(secs => :retain_s)
         AND NOT (
           o.topic = :dispatched AND EXISTS (
             SELECT 1 FROM sample_leases l
              WHERE l.evaluation_id = (o.payload->>'evaluation_id')::uuid
                AND l.sample_id = (o.payload->>'sample_id')::uuid
                AND l.repeat = COALESCE((o.payload->>'repeat')::int, 0)
                AND l.arm = COALESCE(o.payload->>'arm', 'main')
                AND l.state = 'leased'))
       ORDER BY o.id
       LIMIT :limit
       FOR UPDATE OF o SKIP LOCKED)
    """
)


async def prune_published(session: AsyncSession, retain_s: float = DEFAULT_RETAIN_S, limit: int = 5000) -> int:
    """Delete up to ``limit`` outbox rows published more than ``retain_s`` seconds ago, keeping the dispatch rows
    of items whose lease is open; returns how many were deleted. Runs in the caller's transaction.

    Raises ``ValueError`` for a negative ``retain_s`` or a ``limit`` below 1."""
    if retain_s < 0 or limit < 1:
        raise ValueError(f"retain_s must be >= 0 and limit >= 1, got {retain_s} and {limit}")
    result = await session.execute(
        _PRUNE, {"retain_s": float(retain_s), "limit": int(limit), "dispatched": Topics.SAMPLE_DISPATCHED}
    )
    return int(getattr(result, "rowcount", 0) or 0)
