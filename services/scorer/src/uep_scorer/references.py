"""Read-only access to what scoring needs from the system of record: a sample's reference answer and its
benchmark's metric configuration (both immutable per version, so they are cached)."""

from __future__ import annotations

import uuid
from collections import OrderedDict
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from uep_common.configs import BenchmarkConfig, parse_benchmark_config
from uep_common.db.models import Benchmark, Sample


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

    async def reference(self, sample_id: uuid.UUID) -> dict[str, Any]:
        """The reference dict of ``sample_id``."""
        if sample_id in self._samples:
            self._samples.move_to_end(sample_id)
            return self._samples[sample_id]
        async with self._sm() as s:
            ref: dict[str, Any] | None = await s.scalar(select(Sample.reference).where(Sample.id == sample_id))
        if ref is None:
            raise LookupError(f"sample {sample_id} does not exist")
        self._samples[sample_id] = ref
        if len(self._samples) > self._max:
            self._samples.popitem(last=False)
        return ref

    async def benchmark(self, benchmark_id: uuid.UUID) -> tuple[BenchmarkConfig, str]:
        """``(config, evaluation_type)`` of ``benchmark_id``, the config parsed
        (:func:`uep_common.configs.parse_benchmark_config`)."""
        if benchmark_id not in self._benchmarks:
            async with self._sm() as s:
                row = (
                    await s.execute(select(Benchmark.config, Benchmark.evaluation_type).where(Benchmark.id == benchmark_id))
                ).first()
            if row is None:
                raise LookupError(f"benchmark {benchmark_id} does not exist")
            self._benchmarks[benchmark_id] = (parse_benchmark_config(row[0]), row[1])
        return self._benchmarks[benchmark_id]
