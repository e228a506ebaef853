"""Statistics of a summary.

Wilson score interval (Wilson, E. B. 1927, "Probable inference, the law of succession, and statistical
inference", JASA 22:209–212), computed by ``scipy.stats.binomtest(k, n).proportion_ci(method="wilson")``.
Reference values: 0/50 → [0, 0.0713]; 1/10 → [0.0179, 0.4042]; 50/50 → [0.9287, 1].
"""

from __future__ import annotations

from scipy.stats import binomtest


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
