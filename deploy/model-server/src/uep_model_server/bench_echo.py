"""``uep_bench_echo``: a cheap model for the pipeline-overhead benchmark.

It models an accelerator with batch parallelism: every batch (1 to 8 requests) takes one fixed service
time (``UEP_BENCH_SERVICE_MS`` milliseconds, default 20), so a batch of 8 costs the same ~20 ms as a
batch of 1. It answers ``"ok"`` to every request with token counts 1 (prompt) and 1 (completion).
"""

from __future__ import annotations

import os
import time

from .io import GenerationRequest, GenerationResult

MODEL_NAME = "uep_bench_echo"
DEFAULT_SERVICE_MS = 20.0


def service_ms_from_env() -> float:
    """``UEP_BENCH_SERVICE_MS`` as float milliseconds (default 20).

    Raises:
        ValueError: the variable is not a non-negative number.
    """
    raw = os.environ.get("UEP_BENCH_SERVICE_MS", "").strip()
    value = float(raw) if raw else DEFAULT_SERVICE_MS
    if value < 0:
        raise ValueError(f"UEP_BENCH_SERVICE_MS must be >= 0, got {raw!r}")
    return value


class BenchEcho:
    """Sleep ``service_ms`` once per batch, then answer ``"ok"`` (1/1 tokens) to each request."""

    def __init__(self, service_ms: float | None = None) -> None:
        self.service_ms = service_ms_from_env() if service_ms is None else service_ms

    def __call__(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        """Answer a batch after one service time (the batch's requests are served in parallel)."""
        if self.service_ms > 0:
            time.sleep(self.service_ms / 1000.0)
        return [GenerationResult("ok", 1, 1) for _ in requests]
