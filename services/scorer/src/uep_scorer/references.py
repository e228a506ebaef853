"""Read-only access to what scoring needs from the system of record: a sample's reference answer and its
benchmark's metric configuration (both immutable per version, so they are cached).

References are read ahead: the scheduler leases an evaluation's items in ordinal order, so a sample missing
from the cache is read together with the samples that follow it in its benchmark (one query for
:data:`READ_AHEAD` references instead of one per item)."""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from uep_common.contract.configs import BenchmarkConfig, parse_benchmark_config
from uep_common.tables.models import Benchmark, Sample

READ_AHEAD = 256
"""References read per cache miss when the benchmark is known: the missing sample's and those of the samples
that follow it by ordinal."""

_WINDOW = text(
    "SELECT s.id, s.reference FROM samples s WHERE s.benchmark_id = :b"
    " AND s.ordinal >= (SELECT m.ordinal FROM samples m WHERE m.id = :sid AND m.benchmark_id = :b)"
    " ORDER BY s.ordinal LIMIT :n"
)
"""The missing sample and the next ``n - 1`` of its benchmark (index ``uq_samples_benchmark_ordinal``)."""


class ReferenceStore:
    """LRU-cached lookups of ``samples.reference`` and ``benchmarks.config`` (parsed)/``evaluation_type``.

    Raises:
        LookupError: the sample or benchmark does not exist.
        pydantic.ValidationError: the benchmark's config does not parse (not cached; ``loc`` names the field).
    """

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], max_samples: int = 50_000) -> None:
        self._sm = sessionmaker
        self._samples: OrderedDict[uuid.UUID, dict[str, Any]] = OrderedDict()
        self._max = max_samples
        self._benchmarks: dict[uuid.UUID, tuple[BenchmarkConfig, str]] = {}
        self._reads: dict[uuid.UUID, asyncio.Lock] = {}
        """One read-ahead at a time per benchmark: concurrent misses of one window wait for the first's read."""

    def _cached(self, sample_id: uuid.UUID) -> dict[str, Any] | None:
        ref = self._samples.get(sample_id)
        if ref is not None:
            self._samples.move_to_end(sample_id)
        return ref

    def _keep(self, sample_id: uuid.UUID, ref: dict[str, Any]) -> None:
        self._samples[sample_id] = ref
        self._samples.move_to_end(sample_id)
        if len(self._samples) > self._max:
            self._samples.popitem(last=False)

    async def reference(self, sample_id: uuid.UUID, benchmark_id: uuid.UUID | None = None) -> dict[str, Any]:
        """The reference dict of ``sample_id``. With its ``benchmark_id``, a miss reads :data:`READ_AHEAD`
        references at once (this sample's and the next ones by ordinal; at most the cache size, so the window
        never evicts the sample asked for, and none with a cache of size 0); a sample of another benchmark is
        not found that way and is read alone, so each cached reference is its own sample's.

        The scorer asks only after :meth:`benchmark` found ``benchmark_id``, so the per-benchmark locks are
        as many as the benchmarks that exist.

        Raises:
            LookupError: the sample does not exist."""
        if (ref := self._cached(sample_id)) is not None:
            return ref
        window = min(READ_AHEAD, self._max)
        if benchmark_id is not None and window > 0:
            lock = self._reads.setdefault(benchmark_id, asyncio.Lock())
            async with lock:
                if (ref := self._cached(sample_id)) is not None:
                    return ref
                async with self._sm() as s:
                    rows = (await s.execute(_WINDOW, {"b": benchmark_id, "sid": sample_id, "n": window})).all()
                for row_id, row_ref in rows:
                    if row_ref is not None and row_id not in self._samples:
                        self._keep(row_id, row_ref)
                if (ref := self._cached(sample_id)) is not None:
                    return ref
        async with self._sm() as s:
            alone: dict[str, Any] | None = await s.scalar(select(Sample.reference).where(Sample.id == sample_id))
        if alone is None:
            raise LookupError(f"sample {sample_id} does not exist")
        self._keep(sample_id, alone)
        return alone

    async def benchmark(self, benchmark_id: uuid.UUID) -> tuple[BenchmarkConfig, str]:
        """``(config, evaluation_type)`` of ``benchmark_id``, the config parsed
        (:func:`uep_common.contract.configs.parse_benchmark_config`)."""
        if benchmark_id not in self._benchmarks:
            async with self._sm() as s:
                row = (
                    await s.execute(select(Benchmark.config, Benchmark.evaluation_type).where(Benchmark.id == benchmark_id))
                ).first()
            if row is None:
                raise LookupError(f"benchmark {benchmark_id} does not exist")
            self._benchmarks[benchmark_id] = (parse_benchmark_config(row[0]), row[1])
        return self._benchmarks[benchmark_id]
