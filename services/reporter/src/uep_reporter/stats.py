"""Statistics of a summary: re-exported from :mod:`uep_common.stats` (shared by reports and leaderboards)."""

from __future__ import annotations

from uep_common.stats import (  # noqa: F401
    Interval,
    McNemarResult,
    bootstrap_mean,
    mcnemar_exact,
    paired_bootstrap_diff,
    percentiles,
    wilson,
    wilson_interval,
)
