"""The create form's time estimate (uep_gateway.usecases.timing): ceil(items / parallel) × latency, parallel
being the model's capacity lowered to the evaluation's max_parallel; a batch takes its busiest model's sum.
Expected values are worked by hand below each call."""

from __future__ import annotations

import pytest

from uep_gateway.usecases.timing import batch_seconds, evaluation_seconds


@pytest.mark.unit
def test_items_over_capacity_times_latency() -> None:
    assert evaluation_seconds(20, 3000.0, None, None) == 60.0  # 20 items one at a time × 3 s
    assert evaluation_seconds(20, 3000.0, 4, None) == 15.0  # ceil(20 / 4) = 5 rounds × 3 s
    assert evaluation_seconds(21, 3000.0, 4, None) == 18.0  # ceil(21 / 4) = 6 rounds
    assert evaluation_seconds(20, 3000.0, 4, 2) == 30.0  # max_parallel 2 < capacity 4: 10 rounds
    assert evaluation_seconds(0, 3000.0, 4, None) == 0.0


@pytest.mark.unit
def test_a_batch_takes_its_busiest_model() -> None:
    # two arms on model a (15 s + 30 s, one after another) beside 40 s on model b
    assert batch_seconds([("a", 15.0), ("a", 30.0), ("b", 40.0)]) == 45.0
    assert batch_seconds([]) == 0.0
