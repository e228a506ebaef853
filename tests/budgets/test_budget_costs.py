"""The cost model's arithmetic (uep_common.contract.costs, uep_common.records.budget.combined_estimate), with hand-computed values."""

from decimal import Decimal

import pytest

from uep_common.contract.costs import Expected, Pricing, affordable, evaluation_estimate, money, per_item_estimate
from uep_common.records.budget import combined_estimate

D = Decimal


def test_token_pricing():
    p = Pricing("tokens", per_1k_input_tokens=D("0.50"), per_1k_output_tokens=D("1.50"))
    # 1200 in × 0.50/1k = 0.60; 300 out × 1.50/1k = 0.45; total 1.05
    assert p.cost(1200, 300, 999.0) == D("1.05")
    assert p.cost(None, None, None) == 0  # sizes not reported count as 0


def test_gpu_second_pricing_uses_latency_as_gpu_time():
    p = Pricing("gpu_second", per_gpu_second=D("0.0008"))
    assert p.cost(10_000, 10_000, 2500.0) == D("0.002")  # 2.5 s × 0.0008 = 0.002; tokens ignored
    assert p.cost(1, 1, 3.0) == D("0.0000024")  # 0.003 s × 0.0008


def test_call_and_free_pricing():
    assert Pricing("call", per_call=D("0.25")).cost(5000, 5000, 9000.0) == D("0.25")
    assert Pricing().cost(5000, 5000, 9000.0) == 0


def test_invalid_pricing_is_refused():
    with pytest.raises(ValueError, match="unknown cost unit"):
        Pricing("per_banana")
    with pytest.raises(ValueError, match="per_call must be >= 0"):
        Pricing("call", per_call=D("-1"))


def test_estimate_samples_times_repeats_times_expected_tokens():
    p = Pricing("tokens", per_1k_input_tokens=D("0.50"), per_1k_output_tokens=D("1.50"))
    e = Expected(input_tokens=500, output_tokens=256, latency_ms=1000.0)
    # per item: 500/1000 × 0.50 + 256/1000 × 1.50 = 0.25 + 0.384 = 0.634
    assert per_item_estimate(p, e) == D("0.634")
    # 20 samples × 3 repeats = 60 items × 0.634 = 38.04; an A/B request with 2 arms is two such evaluations: 76.08
    assert evaluation_estimate(p, e, 20 * 3) == D("38.04")
    assert evaluation_estimate(p, e, 20 * 3) * 2 == D("76.08")
    with pytest.raises(ValueError):
        evaluation_estimate(p, e, -1)


def test_benchmark_override_of_expected_size():
    model = Expected(input_tokens=500, output_tokens=256, latency_ms=1000.0)
    gsm8k = model.merged({"input_tokens": 150, "output_tokens": None, "latency_ms": 3000})
    assert gsm8k == Expected(input_tokens=150, output_tokens=256, latency_ms=3000.0)
    assert model.merged(None) is model
    # per GPU-second: 100 items × 3 s × 0.0008 = 0.24
    assert evaluation_estimate(Pricing("gpu_second", per_gpu_second=D("0.0008")), gsm8k, 100) == D("0.24")


def test_affordable_counts_whole_items_within_what_is_left():
    assert affordable(D("1.0"), D("2.5"), 5) == 2  # a cap between the 2nd (2.0) and 3rd (3.0) item's cost
    assert affordable(D("1.0"), D("2.0"), 5) == 2  # exactly two items' worth
    assert affordable(D("1.0"), D("1.99"), 5) == 1
    assert affordable(D("1.0"), D("100"), 5) == 5  # never more than wanted
    assert affordable(D("1.0"), None, 5) == 5  # no cap
    assert affordable(D("1.0"), D("-0.5"), 5) == 0  # over the cap already (actual cost above estimates)
    assert affordable(D("0"), D("0"), 5) == 5  # free items
    assert affordable(D("0.634"), D("38.04"), 100) == 60


def test_money_rounds_half_up_to_1e_10():
    assert money("0.00000000005") == D("1E-10")
    assert money(0.1) == D("0.1000000000")


def test_combined_estimate_of_a_batch():
    a = {"estimate": 5.0, "items": 5, "currency": "USD"}
    b = {"estimate": 2.5, "items": 5, "currency": "USD"}
    assert combined_estimate([a]) is a
    assert combined_estimate([None]) is None
    both = combined_estimate([a, b])
    assert both["estimate"] == 7.5 and both["items"] == 10 and both["evaluations"] == [a, b]
