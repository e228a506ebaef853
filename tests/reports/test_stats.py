"""Shared statistics (uep_common.analytics.stats) against reference values.

References: Wilson score intervals from Wilson (1927) — the same values as statsmodels'
``proportion_confint(method="wilson")`` — and the two edge cases (0/50 → [0, 0.0713], 50/50 → [0.9287, 1]).
Exact McNemar p-values are two-sided binomial tail sums with p = 1/2, by hand:
b=5, c=0: 2 · (1/2)^5 = 0.0625; b=12, c=4: 2 · Σ_{k≤4} C(16, k) / 2^16 = 2 · 2517 / 65536 = 0.07681…
"""

import math

import numpy as np
import pytest

from uep_common.analytics import stats
from uep_reporter import analysis as reporter_analysis


@pytest.mark.parametrize(("k", "n", "low", "high"), [(0, 50, 0.0, 0.0713), (50, 50, 0.9287, 1.0), (1, 10, 0.0179, 0.4042)])
def test_wilson_reference_values(k, n, low, high):
    ci = stats.wilson(k, n)
    assert ci.low == pytest.approx(low, abs=5e-5) and ci.high == pytest.approx(high, abs=5e-5)
    assert "Wilson" in ci.method and ci.confidence == 0.95


def test_wilson_zero_trials_is_undefined_not_an_error():
    assert stats.wilson(0, 0) is None
    assert stats.wilson_interval(0, 0) is None


def test_reporter_uses_the_shared_code():
    assert reporter_analysis.stats.wilson_interval is stats.wilson_interval
    assert reporter_analysis.stats.mcnemar_exact is stats.mcnemar_exact


@pytest.mark.parametrize(("b", "c", "p"), [(0, 0, 1.0), (5, 0, 0.0625), (0, 5, 0.0625), (12, 4, 2 * 2517 / 65536)])
def test_mcnemar_exact_reference_values(b, c, p):
    result = stats.mcnemar_exact(b, c)
    assert result.p_value == pytest.approx(p, abs=1e-12)
    assert round(result.p_value, 4) == round(p, 4)  # 0.0768 for b=12, c=4


def test_mcnemar_without_discordant_pairs_is_never_significant():
    result = stats.mcnemar_exact(0, 0)
    assert result.p_value == 1.0 and not result.significant(alpha=1.0)


def test_mcnemar_p_is_capped_at_one():
    assert stats.mcnemar_exact(3, 3).p_value == 1.0  # the two tails sum past 1 for b == c
    with pytest.raises(ValueError, match="discordant"):
        stats.mcnemar_exact(-1, 2)


@pytest.mark.parametrize("n", [400, 4000, 20000])  # BCa below 5000, percentile above
def test_bootstrap_mean_matches_the_normal_theory_interval(n):
    # Known case: for i.i.d. normal data the 95 % interval of the mean is x̄ ± 1.96·s/√n (CLT); the bootstrap
    # interval must agree to within a few per cent of its width.
    x = np.random.default_rng(7).normal(10.0, 2.0, n)
    ci = stats.bootstrap_mean(x)
    half = 1.959964 * x.std(ddof=1) / math.sqrt(n)
    assert ci.low == pytest.approx(x.mean() - half, abs=0.06 * half)
    assert ci.high == pytest.approx(x.mean() + half, abs=0.06 * half)
    assert ("BCa" if n <= stats.BCA_MAX_N else "percentile") in ci.method
    assert stats.bootstrap_mean(x) == ci  # fixed seed: same data, same interval


def test_bootstrap_edge_cases():
    assert stats.bootstrap_mean([]) is None and stats.bootstrap_mean([3.0]) is None
    ci = stats.bootstrap_mean([0.5] * 10)
    assert (ci.low, ci.high) == (0.5, 0.5) and "degenerate" in ci.method


def test_paired_bootstrap_uses_one_index_vector():
    # current = baseline + 0.1 exactly: every resample of paired indices has difference 0.1, so the
    # interval is the point; resampling the two sides independently would give a wide interval.
    base = np.random.default_rng(3).random(500)
    diff, ci = stats.paired_bootstrap_diff(base + 0.1, base)
    assert diff == pytest.approx(0.1) and ci.low == pytest.approx(0.1) and ci.high == pytest.approx(0.1)
    # noisy pairs: interval around the true shift, narrower than the unpaired one would be
    cur = base + 0.05 + np.random.default_rng(4).normal(0, 0.01, 500)
    diff, ci = stats.paired_bootstrap_diff(cur, base)
    assert ci.low < 0.05 < ci.high and ci.high - ci.low < 0.01 and "paired" in ci.method
    with pytest.raises(ValueError):
        stats.paired_bootstrap_diff([1.0, 2.0], [1.0])


def test_percentiles_linear_interpolation():
    # numpy's linear method = PostgreSQL percentile_cont: p90 of 1..4 = 1 + 0.9·3 = 3.7
    assert stats.percentiles([1, 2, 3, 4]) == {"p50": 2.5, "p90": pytest.approx(3.7), "p99": pytest.approx(3.97)}
    assert stats.percentiles([]) == {"p50": None, "p90": None, "p99": None}


def test_paired_bootstrap_binary_equals_resampling_pairs():
    # Resampling pairs of 0/1 outcomes = multinomial draws of the 2×2 cells: the interval must match
    # scipy.stats.bootstrap(paired=True, percentile) on the expanded vectors (Monte-Carlo error only).
    from scipy.stats import bootstrap

    both, first_only, second_only, neither = 120, 30, 14, 36
    cur = np.array([1] * both + [1] * first_only + [0] * second_only + [0] * neither, dtype=float)
    base = np.array([1] * both + [0] * first_only + [1] * second_only + [0] * neither, dtype=float)
    diff, ci = stats.paired_bootstrap_binary(both, first_only, second_only, neither)
    assert diff == pytest.approx(cur.mean() - base.mean()) == pytest.approx(16 / 200)
    ref = bootstrap(
        (cur, base),
        lambda a, b, axis=-1: a.mean(axis) - b.mean(axis),
        paired=True,
        vectorized=True,
        n_resamples=20000,
        method="percentile",
        random_state=np.random.default_rng(1),
    ).confidence_interval
    assert ci.low == pytest.approx(ref.low, abs=0.01) and ci.high == pytest.approx(ref.high, abs=0.01)
    assert "multinomial" in ci.method
    d, none = stats.paired_bootstrap_binary(5, 0, 0, 5)
    assert d == 0.0 and none.low == none.high == 0.0  # no discordant pair: degenerate
