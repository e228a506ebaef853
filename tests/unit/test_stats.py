"""Wilson score interval against published reference values.

References: 0/50 → [0, 0.0713], 1/10 → [0.0179, 0.4042], 50/50 → [0.9287, 1] (Wilson 1927; the same values
as statsmodels' proportion_confint(method="wilson") and Brown, Cai & DasGupta 2001, Table 5 style figures).
"""

import pytest

from uep_common.analytics.stats import wilson_interval


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [(0, 50, 0.0, 0.0713), (1, 10, 0.0179, 0.4042), (50, 50, 0.9287, 1.0), (8, 12, 0.3906, 0.8619)],
)
def test_wilson_reference_values(k, n, low, high):
    lo, hi = wilson_interval(k, n)
    assert lo == pytest.approx(low, abs=5e-5)
    assert hi == pytest.approx(high, abs=5e-5)


def test_wilson_undefined_at_zero_trials():
    assert wilson_interval(0, 0) is None


@pytest.mark.parametrize(("k", "n"), [(-1, 5), (6, 5), (0, -1)])
def test_wilson_rejects_impossible_counts(k, n):
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(k, n)


def test_stop_loss_reason():
    from uep_reporter.results import StopLoss

    rule = StopLoss(max_error_rate=0.5, min_items=20)
    assert rule.reason(19, 19) is None  # too few items yet
    assert rule.reason(20, 10) is None  # 50 % is not above 50 %
    assert rule.reason(20, 11) == "stop-loss: 11 of 20 items failed (55% > 50% after at least 20 items)"
