"""The cost model: what one model call costs, and what an evaluation is expected to cost (pure arithmetic).

Every model in the registry has a **cost unit** (``models.cost_unit``) and the prices of that unit, all in
the site currency (``UEP_BUDGET_CURRENCY``, default USD; one currency per site):

=============  ============================================================================================
``none``       free (no cost recorded against caps; the default for a model registered without prices)
``tokens``     ``price_per_1k_input_tokens`` × prompt tokens / 1000 + ``price_per_1k_output_tokens`` ×
               completion tokens / 1000 (the usual API price list)
``gpu_second`` ``price_per_gpu_second`` × GPU seconds, where the GPU time of a call is its **latency**
               (``latency_ms`` / 1000, the model call's wall time as inference measures it). Latency is a
               proxy: it is the time one request held the model's serving slot, which on a GPU that serves
               one request per slot is the GPU time it used; with batching on the server it over-counts.
``call``       ``price_per_call`` per model call, whatever its size (a flat per-request price)
=============  ============================================================================================

Estimates use the **expected** size of one item: ``expected_input_tokens``, ``expected_output_tokens``
and ``expected_latency_ms`` of the model, each overridable per benchmark (``benchmark_cost_profiles``),
since a GSM8K answer is longer than an MMLU letter. The estimate of an evaluation is::

    items × per_item,   items = samples × repeats × arms (each arm is its own evaluation row)

Money is :class:`decimal.Decimal`, rounded half-up to :data:`QUANTUM` (1e-10 of the currency unit), so
sums of many small GPU-second charges stay exact.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

COST_UNITS = ("none", "tokens", "gpu_second", "call")
QUANTUM = Decimal("1e-10")
ZERO = Decimal(0)


class CostSettings(BaseSettings):
    """The site's cost settings (``UEP_*`` environment variables)."""

    model_config = SettingsConfigDict(env_prefix="UEP_", extra="ignore")

    budget_currency: str = Field("USD", description="The site currency: every price, cap and spend is in it.")


@functools.cache
def cost_settings() -> CostSettings:
    """The process's :class:`CostSettings`, read from the environment on the first call."""
    return CostSettings()


def currency() -> str:
    """The site currency (``UEP_BUDGET_CURRENCY``, default ``USD``): every price, cap and spend is in it."""
    return cost_settings().budget_currency


def money(value: Decimal | float | int | str) -> Decimal:
    """``value`` as a Decimal rounded half-up to :data:`QUANTUM`."""
    return Decimal(str(value)).quantize(QUANTUM, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class Pricing:
    """Prices of one model in its cost unit (see the module docstring); unused prices are ignored.

    Raises ``ValueError`` on an unknown unit or a negative price.
    """

    unit: str = "none"
    per_1k_input_tokens: Decimal = ZERO
    per_1k_output_tokens: Decimal = ZERO
    per_gpu_second: Decimal = ZERO
    per_call: Decimal = ZERO

    def __post_init__(self) -> None:
        if self.unit not in COST_UNITS:
            raise ValueError(f"unknown cost unit {self.unit!r}; one of {', '.join(COST_UNITS)}")
        for name in ("per_1k_input_tokens", "per_1k_output_tokens", "per_gpu_second", "per_call"):
            if Decimal(getattr(self, name)) < 0:
                raise ValueError(f"{name} must be >= 0")

    def cost(self, prompt_tokens: int | None, completion_tokens: int | None, latency_ms: float | None) -> Decimal:
        """Cost of one call in the site currency. A size the call did not report (None, e.g. a call that
        failed before the model answered) counts as 0 of that size; a ``call`` price is charged whenever
        this is called (the caller decides whether a call was made)."""
        if self.unit == "tokens":
            return money(
                Decimal(prompt_tokens or 0) * Decimal(self.per_1k_input_tokens) / 1000
                + Decimal(completion_tokens or 0) * Decimal(self.per_1k_output_tokens) / 1000
            )
        if self.unit == "gpu_second":
            return money(Decimal(str(latency_ms or 0.0)) / 1000 * Decimal(self.per_gpu_second))
        if self.unit == "call":
            return money(self.per_call)
        return ZERO


@dataclass(frozen=True)
class Expected:
    """Expected size of one item (one model call) for estimates."""

    input_tokens: int = 500
    output_tokens: int = 256
    latency_ms: float = 1000.0

    def merged(self, override: dict[str, Any] | None) -> Expected:
        """A copy of this expectation with the non-null fields of a benchmark ``override`` dict
        (keys ``input_tokens``, ``output_tokens``, ``latency_ms``) taking precedence."""
        if not override:
            return self
        input_tokens = override.get("input_tokens")
        output_tokens = override.get("output_tokens")
        latency_ms = override.get("latency_ms")
        return Expected(
            input_tokens=int(input_tokens if input_tokens is not None else self.input_tokens),
            output_tokens=int(output_tokens if output_tokens is not None else self.output_tokens),
            latency_ms=float(latency_ms if latency_ms is not None else self.latency_ms),
        )


def per_item_estimate(pricing: Pricing, expected: Expected) -> Decimal:
    """Expected cost of one item: the cost of a call of the expected size."""
    return pricing.cost(expected.input_tokens, expected.output_tokens, expected.latency_ms)


def evaluation_estimate(pricing: Pricing, expected: Expected, items: int) -> Decimal:
    """Expected cost of ``items`` items (samples × repeats of one evaluation/arm). Raises ValueError if < 0."""
    if items < 0:
        raise ValueError("items must be >= 0")
    return money(per_item_estimate(pricing, expected) * items)


def affordable(per_item: Decimal, left: Decimal | None, wanted: int) -> int:
    """How many of ``wanted`` items of cost ``per_item`` fit in ``left`` (None = no cap): the largest
    k ≤ wanted with k × per_item ≤ left. Free items (per_item 0) all fit while ``left`` ≥ 0."""
    if left is None:
        return wanted
    if left < 0:
        return 0
    if per_item <= 0:
        return wanted
    return max(0, min(wanted, int(left // per_item)))
