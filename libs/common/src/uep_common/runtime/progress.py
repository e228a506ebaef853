"""The live progress of an evaluation in Redis: one hash per evaluation, ``uep:evaluation:<id>`` with the
fields ``completed``, ``errors`` and ``total`` (item counts), expiring :data:`PROGRESS_TTL_S` after its last
write. The reporter writes it after each stored batch, the gateway overwrites it after a retry or a redrive
lowered the counters, and reads it while an evaluation runs. Redis is a cache: PostgreSQL's counters are the
record, and callers fall back to them when Redis fails.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from redis.asyncio import Redis

PROGRESS_TTL_S = 7 * 24 * 3600
"""Seconds a progress hash lives after its last write (7 days)."""


def progress_key(evaluation_id: uuid.UUID | str) -> str:
    """The Redis key of ``evaluation_id``'s progress hash, ``uep:evaluation:<id>``."""
    return f"uep:evaluation:{evaluation_id}"


async def write_progress(redis: Redis, evaluation_id: uuid.UUID | str, completed: int, errors: int, total: int) -> None:
    """Set the progress hash of ``evaluation_id`` (``redis``: an asyncio Redis client) to the given item counts
    and let it expire :data:`PROGRESS_TTL_S` from now. Raises whatever the client raises (the caller decides
    whether a cache failure matters)."""
    key = progress_key(evaluation_id)
    await redis.hset(key, mapping={"completed": completed, "errors": errors, "total": total})
    await redis.expire(key, PROGRESS_TTL_S)
