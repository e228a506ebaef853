"""Statistics shared by reports, comparisons and leaderboards (scipy.stats; every result names its method).

Sources of the formulas:

- Wilson score interval: Wilson, E. B. (1927), "Probable inference, the law of succession, and statistical
  inference", JASA 22:209–212; computed by ``scipy.stats.binomtest(k, n).proportion_ci(method="wilson")``.
  Reference values: 0/50 → [0, 0.0713]; 1/10 → [0.0179, 0.4042]; 50/50 → [0.9287, 1].
- Bootstrap confidence interval of a mean: Efron & Tibshirani (1993), *An Introduction to the Bootstrap*,
  ch. 13–14; computed by ``scipy.stats.bootstrap`` with a fixed seed. BCa (bias-corrected and accelerated)
  up to :data:`BCA_MAX_N` values; above that the BCa jackknife costs O(n²), so the percentile method is used
  (for large n the two agree closely). The method used is returned with the interval.
- Exact McNemar test: McNemar (1947), Psychometrika 12:153–157; the exact (conditional) form is the two-sided
  binomial test of b successes in b + c trials with p = 1/2 (``scipy.stats.binomtest``), capped at 1.
  Reference values: b=0, c=0 → 1.0 (no discordant pair: never significant); b=5, c=0 → 0.0625;
  b=12, c=4 → 0.0768.
- Paired bootstrap of a difference of means: one resampled index vector is applied to both sides
  (``scipy.stats.bootstrap(..., paired=True)``), which keeps the pairing (Koehn 2004, "Statistical
  significance tests for machine translation evaluation", EMNLP).
  For paired 0/1 outcomes the same bootstrap is drawn from the 2×2 table: resampling n pairs with
  replacement gives Multinomial(n, cell shares) cell counts (:func:`paired_bootstrap_binary`).
- Percentiles: linear interpolation between order statistics (``numpy.percentile`` default, the same as
  PostgreSQL's ``percentile_cont``).
- Bootstrap of many statistics at once (:func:`bootstrap_weights`, :func:`percentile_interval`): a statistic of
  a resample of n items drawn with replacement equals the statistic of the original items weighted by how many
  times each was drawn (a Multinomial(n, 1/n) count vector). One set of count vectors (fixed seed) serves every
  statistic of a set of items (set-level metrics: F1, ROC-AUC, calibration, ranking means;
  :mod:`uep_common.analytics.set_metrics`), each computed for a whole batch of resamples as matrix products; the interval
  is the percentile interval (Efron & Tibshirani 1993, ch. 13). Two evaluations of the same n paired items draw
  the same count vectors, so the difference of their replicates is the paired bootstrap of a difference.
- DeLong's test of two correlated ROC-AUCs (the two models scored the same items): DeLong, DeLong &
  Clarke-Pearson (1988), "Comparing the areas under two or more correlated receiver operating characteristic
  curves: a nonparametric approach", Biometrics 44:837–845 (the structural components V10, V01 and their
  covariance); computed with the fast algorithm of Sun & Xu (2014), "Fast implementation of DeLong's algorithm
  for comparing the areas under correlated receiver operating characteristic curves", IEEE Signal Processing
  Letters 21(11):1389–1393 (midranks, O(n log n) per model instead of O(m·n)); two-sided p from the normal
  distribution (:func:`delong_test`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.stats import binomtest, bootstrap, norm, rankdata

BOOTSTRAP_SEED = 20240611
"""Seed of every bootstrap: the same data give the same interval."""
BCA_MAX_N = 5000
"""Largest sample for which the BCa bootstrap is used; larger samples use the percentile bootstrap."""
BOOTSTRAP_RESAMPLES = 2000
"""Resamples for n ≤ :data:`BCA_MAX_N`. Larger samples use fewer (see :func:`resamples_for`)."""

WILSON = "Wilson score interval (Wilson 1927), scipy.stats.binomtest(...).proportion_ci(method='wilson')"
MCNEMAR = "exact McNemar test: two-sided binomial test of b in b+c with p=1/2 (scipy.stats.binomtest), capped at 1"
PERCENTILE = "linear interpolation between order statistics (numpy.percentile, = PostgreSQL percentile_cont)"


@dataclass(frozen=True)
class Interval:
    """A confidence interval: ``low``/``high`` at ``confidence``, and how it was computed (``method``)."""

    low: float
    high: float
    confidence: float
    method: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the fields."""
        return asdict(self)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """Wilson score interval for a binomial proportion ``successes / n``.

    Args:
        successes: number of successes, 0 ≤ successes ≤ n.
        n: number of trials.
        confidence: confidence level in (0, 1).

    Returns:
        ``(low, high)`` within [0, 1], or None when ``n == 0`` (the proportion is undefined).

    Raises:
        ValueError: ``successes`` outside [0, n] or a negative ``n``.
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return None
    ci = binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


def wilson(successes: int, n: int, confidence: float = 0.95) -> Interval | None:
    """:func:`wilson_interval` as an :class:`Interval` naming its method; None when ``n == 0``."""
    ci = wilson_interval(successes, n, confidence)
    return None if ci is None else Interval(ci[0], ci[1], confidence, WILSON)


def resamples_for(n: int) -> int:
    """Bootstrap resamples for a sample of ``n``: 2000 up to :data:`BCA_MAX_N`, then ``2·10⁷ / n`` (at least
    400), so one interval costs about the same time whatever n (the Monte-Carlo error of a percentile
    interval with 400 resamples is small next to the interval's width at n > 5000)."""
    if n <= BCA_MAX_N:
        return BOOTSTRAP_RESAMPLES
    return max(400, min(BOOTSTRAP_RESAMPLES, 20_000_000 // n))


def _method_text(kind: str, n_resamples: int, paired: bool = False) -> str:
    what = "paired bootstrap (one index vector for both sides)" if paired else "bootstrap"
    return f"{what}, {kind}, {n_resamples} resamples, seed {BOOTSTRAP_SEED} (scipy.stats.bootstrap)"


def bootstrap_mean(values: Sequence[float] | np.ndarray[Any, Any], confidence: float = 0.95) -> Interval | None:
    """Bootstrap confidence interval of the mean of ``values`` (BCa for n ≤ 5000, else percentile).

    Args:
        values: the observations (NaN not allowed; drop missing values first).
        confidence: confidence level in (0, 1).

    Returns:
        The interval, or None for fewer than 2 values (undefined). Constant values give the degenerate
        interval [v, v] (every resample has the same mean).
    """
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        return None
    if np.all(x == x[0]):
        return Interval(float(x[0]), float(x[0]), confidence, "degenerate: every value is equal")
    kind = "BCa" if x.size <= BCA_MAX_N else "percentile"
    n_res = resamples_for(x.size)
    res = bootstrap(
        (x,),
        np.mean,
        confidence_level=confidence,
        n_resamples=n_res,
        method=kind,
        random_state=np.random.default_rng(BOOTSTRAP_SEED),
        vectorized=True,
        batch=_batch(x.size),
    )
    return Interval(
        float(res.confidence_interval.low), float(res.confidence_interval.high), confidence, _method_text(kind, n_res)
    )


def _batch(n: int) -> int:
    return max(1, min(2000, 5_000_000 // max(n, 1)))  # at most ~40 MB of resampled values at once


def _mean_diff(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any], axis: int = -1) -> Any:
    return np.mean(a, axis=axis) - np.mean(b, axis=axis)


def paired_bootstrap_diff(
    current: Sequence[float] | np.ndarray[Any, Any], baseline: Sequence[float] | np.ndarray[Any, Any], confidence: float = 0.95
) -> tuple[float, Interval | None]:
    """Difference of means ``mean(current) − mean(baseline)`` over paired observations, with a paired
    bootstrap interval (one resampled index vector for both sides; BCa for n ≤ 5000, else percentile).

    Args:
        current: the current side's values, one per item.
        baseline: the baseline's values, of the same length; element i of both belongs to the same item.
        confidence: the two-sided level of the interval, in (0, 1).

    Returns:
        ``(difference, interval)``; the interval is None for fewer than 2 pairs, degenerate when every
        pairwise difference is equal.

    Raises:
        ValueError: the arrays differ in length or are empty.
    """
    a = np.asarray(current, dtype=float)
    b = np.asarray(baseline, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"need two non-empty 1-d arrays of equal length, got {a.shape} and {b.shape}")
    diff = float(a.mean() - b.mean())
    if a.size < 2:
        return diff, None
    d = a - b
    if np.all(d == d[0]):
        return diff, Interval(diff, diff, confidence, "degenerate: every paired difference is equal")
    kind = "BCa" if a.size <= BCA_MAX_N else "percentile"
    n_res = resamples_for(a.size)
    res = bootstrap(
        (a, b),
        _mean_diff,
        paired=True,
        confidence_level=confidence,
        n_resamples=n_res,
        method=kind,
        random_state=np.random.default_rng(BOOTSTRAP_SEED),
        vectorized=True,
        batch=_batch(a.size),
    )
    return diff, Interval(
        float(res.confidence_interval.low),
        float(res.confidence_interval.high),
        confidence,
        _method_text(kind, n_res, paired=True),
    )


def paired_bootstrap_binary(
    both: int, first_only: int, second_only: int, neither: int, confidence: float = 0.95, n_resamples: int = BOOTSTRAP_RESAMPLES
) -> tuple[float, Interval | None]:
    """Difference of two paired proportions, ``(first_only − second_only) / n``, with a paired percentile
    bootstrap interval computed exactly and fast from the 2×2 table: resampling n pairs with replacement
    draws the four cell counts from Multinomial(n, cell shares), so the multinomial draw is the same
    bootstrap as resampling a pair index vector for both sides, at O(resamples) instead of O(resamples·n).

    Returns:
        ``(difference, interval)``; None interval for fewer than 2 pairs; degenerate without discordant pairs.

    Raises:
        ValueError: a negative count.
    """
    cells = np.array([both, first_only, second_only, neither], dtype=np.int64)
    if (cells < 0).any():
        raise ValueError(f"2x2 counts must be >= 0, got {cells.tolist()}")
    n = int(cells.sum())
    if n == 0:
        raise ValueError("no pair")
    diff = (first_only - second_only) / n
    if n < 2:
        return diff, None
    if first_only + second_only == 0:
        return diff, Interval(diff, diff, confidence, "degenerate: no discordant pair")
    draws = np.random.default_rng(BOOTSTRAP_SEED).multinomial(n, cells / n, size=n_resamples)
    d = (draws[:, 1] - draws[:, 2]) / n
    alpha = (1 - confidence) / 2
    low, high = np.percentile(d, [100 * alpha, 100 * (1 - alpha)])
    method = (
        f"paired bootstrap (pairs resampled as multinomial draws of the 2x2 cells), percentile, {n_resamples} resamples, "
        f"seed {BOOTSTRAP_SEED}"
    )
    return diff, Interval(float(low), float(high), confidence, method)


@dataclass(frozen=True)
class McNemarResult:
    """Exact McNemar test of paired binary outcomes.

    ``b`` = pairs where only the first side is correct, ``c`` = pairs where only the second side is correct
    (the discordant cells of the 2×2 table); ``p_value`` is two-sided, in [0, 1]; 1.0 when b + c = 0.
    """

    b: int
    c: int
    p_value: float
    method: str = MCNEMAR

    def significant(self, alpha: float = 0.05) -> bool:
        """Whether ``p_value < alpha``; never True without a discordant pair."""
        return self.b + self.c > 0 and self.p_value < alpha


def mcnemar_exact(b: int, c: int) -> McNemarResult:
    """Exact (binomial) two-sided McNemar test on the discordant counts ``b`` and ``c``.

    Raises:
        ValueError: a negative count.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    if b + c == 0:
        return McNemarResult(b, c, 1.0)
    p = binomtest(b, b + c, 0.5, alternative="two-sided").pvalue
    return McNemarResult(b, c, float(min(1.0, p)))


def percentiles(values: Iterable[float] | np.ndarray[Any, Any], qs: Sequence[float] = (50, 90, 99)) -> dict[str, float | None]:
    """Percentiles of ``values`` (linear interpolation), keyed ``"p50"``, ``"p90"``, …; None when empty."""
    x = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)
    if x.size == 0:
        return {f"p{q:g}": None for q in qs}
    out = np.percentile(x, qs)
    return {f"p{q:g}": float(v) for q, v in zip(qs, out, strict=True)}


SET_RESAMPLES = 1000
"""Most resamples of the shared bootstrap of set-level metrics (:func:`set_resamples`)."""
SET_WORK = 80_000_000
"""Work bound of that bootstrap: resamples × items × passes (:func:`set_resamples`)."""


def set_resamples(n: int, passes: int = 1) -> int:
    """Resamples of the shared bootstrap of set-level metrics over ``n`` items whose statistics take ``passes``
    passes over the items per resample (1 for means and confusion counts, plus one per ROC/PR curve):
    ``SET_WORK / (n · passes)`` within [200, :data:`SET_RESAMPLES`] — 1000 up to 40,000 items with one curve,
    400 at 100,000. The work stays bounded, and at such n the percentile interval's Monte-Carlo error is small
    next to its width."""
    return max(200, min(SET_RESAMPLES, SET_WORK // max(1, n * passes)))


def bootstrap_weights(
    n: int, n_resamples: int, seed: int = BOOTSTRAP_SEED, batch: int | None = None
) -> Iterator[np.ndarray[Any, Any]]:
    """Bootstrap resamples of ``n`` items as count matrices, ``batch`` resamples at a time.

    Each yielded array has shape ``(b, n)`` (``b`` ≤ ``batch``; ``n_resamples`` rows in all), float64:
    entry ``[r, i]`` is how many times resample ``r`` drew item ``i`` (each row sums to ``n``: n draws with
    replacement, uniform indices from ``numpy.random.default_rng(seed)``). The same ``(n, n_resamples, seed,
    batch)`` always give the same matrices. Default batch: about 2·10⁶ counts per array (16 MB).

    Raises:
        ValueError: ``n`` < 1 or ``n_resamples`` < 1.
    """
    if n < 1 or n_resamples < 1:
        raise ValueError(f"need n >= 1 and n_resamples >= 1, got n={n}, n_resamples={n_resamples}")
    step = batch or max(1, min(n_resamples, 2_000_000 // n))
    rng = np.random.default_rng(seed)
    done = 0
    while done < n_resamples:
        b = min(step, n_resamples - done)
        idx = rng.integers(0, n, size=(b, n))
        idx += (np.arange(b) * n)[:, None]
        yield np.bincount(idx.ravel(), minlength=b * n).reshape(b, n).astype(np.float64)
        done += b


def percentile_interval(
    replicates: np.ndarray[Any, Any], confidence: float = 0.95, min_defined: float = 0.5
) -> tuple[float, float] | None:
    """Percentile bootstrap interval (Efron & Tibshirani 1993, ch. 13) of ``replicates`` (1-d; NaN = a resample
    on which the statistic is undefined, e.g. ROC-AUC of a resample without a positive item): the
    ``(1 − confidence) / 2`` and ``(1 + confidence) / 2`` percentiles (linear interpolation) of the defined ones.

    Returns:
        ``(low, high)``, or None when fewer than ``min_defined`` of the replicates are defined.
    """
    x = np.asarray(replicates, dtype=float)
    ok = x[~np.isnan(x)]
    if x.size == 0 or ok.size < min_defined * x.size or ok.size == 0:
        return None
    alpha = (1 - confidence) / 2
    low, high = np.percentile(ok, [100 * alpha, 100 * (1 - alpha)])
    return float(low), float(high)


DELONG = (
    "DeLong's test of two correlated ROC-AUCs (DeLong, DeLong & Clarke-Pearson 1988), fast midrank algorithm "
    "(Sun & Xu 2014); two-sided p from the normal distribution"
)


@dataclass(frozen=True)
class DeLongResult:
    """DeLong's test of ``auc_a − auc_b`` on the same items: the two AUCs, the difference, its standard error,
    ``z`` = difference / se, the two-sided ``p_value`` and the normal ``confidence`` interval of the
    difference (``ci_low``, ``ci_high``). With se = 0 (e.g. identical scores), ``z`` is None and ``p_value``
    1.0 when the difference is 0, else 0.0."""

    auc_a: float
    auc_b: float
    difference: float
    se: float
    z: float | None
    p_value: float
    ci_low: float
    ci_high: float
    confidence: float = 0.95
    method: str = DELONG


def delong_components(
    positive: np.ndarray[Any, Any], scores: np.ndarray[Any, Any]
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """AUCs and DeLong's structural components of ``k`` models on the same items (Sun & Xu 2014, Algorithm 1).

    Args:
        positive: ``(n,)`` bool, the items of the positive class (m of them; n − m negatives).
        scores: ``(k, n)`` scores, higher = more positive.

    Returns:
        ``(auc (k,), v10 (k, m), v01 (k, n − m))``: ``v10[r, i]`` = the share of negatives that positive ``i``
        outscores under model ``r`` (ties half), ``v01[r, j]`` = the share of positives that outscore negative
        ``j``; ``auc = mean(v10) = mean(v01)``.

    Raises:
        ValueError: no positive or no negative item, or a shape mismatch.
    """
    pos = np.asarray(positive, dtype=bool)
    s = np.atleast_2d(np.asarray(scores, dtype=float))
    if s.shape[1] != pos.size:
        raise ValueError(f"scores must be (k, {pos.size}), got {s.shape}")
    m, n = int(pos.sum()), int((~pos).sum())
    if m == 0 or n == 0:
        raise ValueError("DeLong's test needs positive and negative items")
    x, y = s[:, pos], s[:, ~pos]
    tx = rankdata(x, axis=1)  # midranks among the positives
    ty = rankdata(y, axis=1)  # among the negatives
    tz = rankdata(np.hstack([x, y]), axis=1)  # among all items
    auc = (tz[:, :m].sum(axis=1) - m * (m + 1) / 2) / (m * n)
    v10 = (tz[:, :m] - tx) / n
    v01 = 1.0 - (tz[:, m:] - ty) / m
    return auc, v10, v01


def delong_test(
    positive: np.ndarray[Any, Any] | Sequence[bool],
    scores_a: np.ndarray[Any, Any] | Sequence[float],
    scores_b: np.ndarray[Any, Any] | Sequence[float],
    confidence: float = 0.95,
) -> DeLongResult:
    """DeLong's test of the difference of two ROC-AUCs computed on the same items (see the module docstring).

    ``var(auc_a − auc_b) = S[a,a] + S[b,b] − 2 S[a,b]`` with ``S = S10 / m + S01 / n`` (``S10``, ``S01``: the
    sample covariances of the structural components over the m positives and n negatives, DeLong et al. 1988).

    Raises:
        ValueError: as :func:`delong_components`.
    """
    pos = np.asarray(positive, dtype=bool)
    auc, v10, v01 = delong_components(pos, np.vstack([np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)]))
    m, n = v10.shape[1], v01.shape[1]
    s10 = np.cov(v10) if m > 1 else np.zeros((2, 2))
    s01 = np.cov(v01) if n > 1 else np.zeros((2, 2))
    cov = s10 / m + s01 / n
    var = float(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])
    diff = float(auc[0] - auc[1])
    se = math.sqrt(var) if var > 1e-300 else 0.0
    half = float(norm.ppf(0.5 + confidence / 2)) * se
    if se == 0.0:
        return DeLongResult(float(auc[0]), float(auc[1]), diff, 0.0, None, 1.0 if diff == 0 else 0.0, diff, diff, confidence)
    z = diff / se
    return DeLongResult(
        float(auc[0]), float(auc[1]), diff, se, z, float(2 * norm.sf(abs(z))), diff - half, diff + half, confidence
    )
