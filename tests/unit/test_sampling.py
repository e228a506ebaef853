"""Which samples a limited run takes (uep_common.records.sampling): quotas of stratified sampling by the
largest-remainder (Hamilton) method, worked by hand below; seeded draws are reproducible."""

from __future__ import annotations

from collections import Counter

import pytest

from uep_common.analytics.leaderboards import item_set_key
from uep_common.contract.configs import EvaluationConfig
from uep_common.records.sampling import random_ordinals, stratified_ordinals

# category a: ordinals 0-5 (6 items), b: 6-8 (3), c: 9 (1); total 10
CATS = {**dict.fromkeys(range(6), "a"), **dict.fromkeys(range(6, 9), "b"), 9: "c"}


def _quota(ordinals):
    return Counter(CATS[o] for o in ordinals)


@pytest.mark.parametrize(
    ("n", "want"),
    [
        # n=5: exact quotas a 3.0, b 1.5, c 0.5; floors 3, 1, 0; the one unit left: b and c tie at .5, the larger b wins
        (5, {"a": 3, "b": 2}),
        # n=3: exact 1.8, 0.9, 0.3; floors 1, 0, 0; two units left by fraction: b (.9), then a (.8)
        (3, {"a": 2, "b": 1}),
        # n=10: everything
        (10, {"a": 6, "b": 3, "c": 1}),
    ],
)
def test_stratified_quotas_are_hamilton_apportionment(n, want):
    chosen = stratified_ordinals(CATS, n, seed=0)
    assert len(chosen) == n and len(set(chosen)) == n and chosen == sorted(chosen)
    assert dict(_quota(chosen)) == want


def test_seeded_draws_are_reproducible_and_the_seed_matters():
    assert stratified_ordinals(CATS, 5, seed=7) == stratified_ordinals(CATS, 5, seed=7)
    assert random_ordinals(1000, 30, seed=1) == random_ordinals(1000, 30, seed=1)
    assert random_ordinals(1000, 30, seed=1) != random_ordinals(1000, 30, seed=2)
    r = random_ordinals(1000, 30, seed=1)
    assert len(set(r)) == 30 and r == sorted(r) and all(0 <= o < 1000 for o in r)
    with pytest.raises(ValueError):
        stratified_ordinals(CATS, 11, seed=0)


def test_an_evaluation_maps_positions_to_its_ordinals():
    assert EvaluationConfig(sample_ordinals=[3, 8, 20]).ordinal(1) == 8
    assert EvaluationConfig().ordinal(5) == 5  # the first N


def test_sampled_runs_are_their_own_item_set():
    assert item_set_key("v1", 30) == "v1:30"
    assert item_set_key("v1", 30, "first", 0) == "v1:30"
    assert item_set_key("v1", 30, "stratified", 0) == "v1:30:stratified:0"
    assert item_set_key("v1", 30, "random", 5) != item_set_key("v1", 30, "random", 6)
