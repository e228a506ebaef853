"""Which samples a limited evaluation runs: ``first`` N, a seeded ``random`` N, or N ``stratified`` by category.

An evaluation with ``sample_limit`` N below the benchmark's sample count runs N of its samples. How they are
chosen is its ``sampling``:

- ``first``: ordinals 0..N−1, the benchmark's order (an MMLU run of 30 is then all abstract_algebra);
- ``random``: a uniform sample of N ordinals without replacement, ``random.Random(seed).sample``;
- ``stratified``: proportional allocation over the samples' categories (:data:`CATEGORY_KEYS`, the first key
  present), each category's quota by the largest-remainder (Hamilton) method, its samples drawn uniformly
  with the seed; a benchmark without categories falls back to ``random``.

The chosen ordinals are stored in the evaluation's config (``sample_ordinals``, ascending) so that the
scheduler, retries, fingerprints and leaderboards (the item set) see the same items. ``first`` stores none.
The default is the benchmark's ``default_sampling`` (``BenchmarkConfig``), else ``first``.
"""

from __future__ import annotations

import random
import uuid
from typing import Literal

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.tables.models import Sample

Sampling = Literal["first", "random", "stratified"]
SAMPLING_METHODS: tuple[Sampling, ...] = ("first", "random", "stratified")

MAX_SAMPLED = 20_000
"""Most samples a ``random`` or ``stratified`` run may take: their ordinals are stored in the evaluation's
config, which every dispatch reads (MMLU's 14,042 fit); larger runs take the first N or the whole benchmark."""

CATEGORY_KEYS = (
    ("metadata", "category"),
    ("metadata", "subject"),
    ("input", "subject"),
    ("input", "category"),
    ("metadata", "subset"),
    ("input", "activity"),
)
"""Where an item's category comes from, first present wins (MMLU: ``input.subject``): (column, JSON key)."""


def random_ordinals(count: int, n: int, seed: int) -> list[int]:
    """``n`` of the ordinals ``0..count−1`` drawn uniformly without replacement with ``seed``, ascending.

    Raises:
        ValueError: ``n`` outside 0..count.
    """
    return sorted(random.Random(seed).sample(range(count), n))


def stratified_ordinals(categories: dict[int, str], n: int, seed: int) -> list[int]:
    """``n`` ordinals of ``categories`` (ordinal → category) in proportion to the categories' sizes, ascending.

    Quotas: n × size / total, floored, the remaining units to the largest fractional parts (ties: the larger
    category, then the name), the Hamilton method. Within a category the ordinals are drawn uniformly with a
    generator seeded by ``seed``, categories taken in name order. Raises ValueError when ``n`` > the total.
    """
    total = len(categories)
    if not 0 <= n <= total:
        raise ValueError(f"cannot take {n} of {total} samples")
    groups: dict[str, list[int]] = {}
    for ordinal in sorted(categories):
        groups.setdefault(categories[ordinal], []).append(ordinal)
    exact = {c: n * len(members) / total for c, members in groups.items()}
    quota = {c: int(x) for c, x in exact.items()}
    left = n - sum(quota.values())
    for c in sorted(groups, key=lambda c: (-(exact[c] - quota[c]), -len(groups[c]), c))[:left]:
        quota[c] += 1
    rng = random.Random(seed)
    chosen: list[int] = []
    for c in sorted(groups):
        chosen.extend(rng.sample(groups[c], quota[c]))
    return sorted(chosen)


async def sample_categories(session: AsyncSession, benchmark_id: uuid.UUID) -> dict[int, str] | None:
    """Ordinal → category of a benchmark's samples, from the first of :data:`CATEGORY_KEYS` that some sample
    carries (a sample without it is in the category ``""``); None when no sample has a category. Reads only
    that JSON key (one probe query per key tried, then one query)."""
    for column, key in CATEGORY_KEYS:
        value = (Sample.meta if column == "metadata" else Sample.input)[key].astext
        mine = Sample.benchmark_id == benchmark_id
        if await session.scalar(select(Sample.ordinal).where(mine, value.is_not(None), value != "").limit(1)) is not None:
            return {
                ordinal: category or ""
                for ordinal, category in (await session.execute(select(Sample.ordinal, value).where(mine))).all()
            }
    return None


async def choose_ordinals(
    session: AsyncSession, benchmark_id: uuid.UUID, sample_count: int, n: int, method: Sampling, seed: int
) -> list[int] | None:
    """The ordinals an evaluation of ``n`` samples runs (ascending), or None for ``first`` (ordinals 0..n−1)
    and whenever ``n`` covers the whole benchmark. One query for ``stratified``; none otherwise."""
    if method == "first" or n >= sample_count:
        return None
    if method == "stratified":
        categories = await sample_categories(session, benchmark_id)
        if categories is not None and len(categories) == sample_count:
            return stratified_ordinals(categories, n, seed)
    return random_ordinals(sample_count, n, seed)
