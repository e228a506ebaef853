"""Krippendorff's alpha as human evaluation computes it (uep_gateway.annotation.agreement)."""

import math

import krippendorff
import pytest

from uep_gateway.annotation.agreement import alpha, question_agreement
from uep_gateway.annotation.questions import Question

NAN = math.nan


def test_nominal_alpha_matches_a_hand_computed_coincidence_matrix():
    # Three coders, four units, pass = 1 / fail = 0:
    #   unit 1: P P P   unit 2: F F F   unit 3: P P F   unit 4: P F F
    # Coincidences o_ck = Σ_u n_uc (n_uk − [c = k]) / (m_u − 1), with m_u = 3:
    #   unit 1: o_PP += 3·2/2 = 3          unit 2: o_FF += 3
    #   unit 3: o_PP += 2·1/2 = 1, o_PF = o_FP += 2·1/2 = 1
    #   unit 4: o_FF += 1,       o_PF = o_FP += 1
    #   → o_PP = 4, o_FF = 4, o_PF = o_FP = 2; n_P = 6, n_F = 6, n = 12.
    # Nominal: alpha = 1 − (n − 1) Σ_{c≠k} o_ck / Σ_{c≠k} n_c n_k = 1 − 11·4 / (2·6·6) = 1 − 44/72 = 7/18.
    data = [[1, 0, 1, 1], [1, 0, 1, 0], [1, 0, 0, 0]]
    value, reason = alpha(data, "nominal", [0, 1])
    assert reason is None
    assert value == pytest.approx(7 / 18, abs=1e-12)


def test_interval_alpha_matches_a_hand_computation():
    # Two coders, three units: (1, 2), (3, 3), (4, 5). Each unit has m_u = 2, so every ordered pair of
    # values from different coders adds 1 to o_ck: o_12 = o_21 = 1, o_33 = 2, o_45 = o_54 = 1.
    # Σ o_ck (c − k)² = 1 + 1 + 1 + 1 = 4. The pairable values are {1, 2, 3, 3, 4, 5}, n = 6, and
    # Σ_{c,k} n_c n_k (c − k)² = 2 (n Σv² − (Σv)²) = 2 (6·64 − 18²) = 120.
    # alpha = 1 − (n − 1) · 4 / 120 = 1 − 20/120 = 5/6.
    value, reason = alpha([[1, 3, 4], [2, 3, 5]], "interval", list(range(1, 6)))
    assert reason is None
    assert value == pytest.approx(5 / 6, abs=1e-12)


def test_documented_example_of_the_krippendorff_package():
    # The docstring example of krippendorff.alpha (Krippendorff 2011's reliability data): nominal 0.691358,
    # interval 0.810845. Our wrapper gives the same with and without the full value domain.
    data = [
        [NAN, NAN, NAN, NAN, NAN, 3, 4, 1, 2, 1, 1, 3, 3, NAN, 3],
        [1, NAN, 2, 1, 3, 3, 4, 3, NAN, NAN, NAN, NAN, NAN, NAN, NAN],
        [NAN, NAN, 2, 1, 3, 4, 4, NAN, 2, 1, 1, 3, 3, NAN, 4],
    ]
    assert round(alpha(data, "nominal")[0], 6) == 0.691358
    assert round(alpha(data, "interval")[0], 6) == 0.810845
    assert round(alpha(data, "interval", [1, 2, 3, 4, 5])[0], 6) == 0.810845
    assert alpha(data, "nominal")[0] == pytest.approx(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))


def test_undefined_alpha_has_a_reason_instead_of_a_number():
    assert alpha([[1, NAN], [NAN, 1]], "nominal", [0, 1]) == (None, "too_few_pairable_values")
    assert alpha([[1, 1], [1, 1]], "nominal", [0, 1]) == (None, "no_variation")
    assert alpha([], "nominal", [0, 1]) == (None, "too_few_pairable_values")


def test_question_agreement_codes_labels_per_type():
    q = Question(name="correct", type="pass_fail")
    units = {
        1: {"al": "pass", "bo": "pass", "cy": "pass"},
        2: {"al": "fail", "bo": "fail", "cy": "fail"},
        3: {"al": "pass", "bo": "pass", "cy": "fail"},
        4: {"al": "pass", "bo": "fail", "cy": "fail"},
        5: {"al": None, "bo": None, "cy": None},  # nobody answered: not a unit
    }
    out = question_agreement(q, units)
    assert out["level"] == "nominal" and out["units"] == 4 and out["coders"] == 3 and out["values"] == 12
    assert out["alpha"] == pytest.approx(7 / 18)  # the hand computation above
    pw = question_agreement(Question(name="pref", type="pairwise"), {1: {"x": "a", "y": "a"}, 2: {"x": "b", "y": "tie"}})
    # a=0, b=1, tie=2: o_aa = 2, o_btie = o_tieb = 1; n_a = 2, n_b = 1, n_tie = 1, n = 4
    # alpha = 1 − 3·2 / (2·(2·1 + 2·1 + 1·1)) = 1 − 6/10 = 0.4
    assert pw["alpha"] == pytest.approx(0.4)
    rating = question_agreement(
        Question(name="q", type="rating", scale_min=1, scale_max=5),
        {1: {"x": 1, "y": 2}, 2: {"x": 3, "y": 3}, 3: {"x": 4, "y": 5}},
    )
    assert rating["level"] == "interval" and rating["alpha"] == pytest.approx(5 / 6)
