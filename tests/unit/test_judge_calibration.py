"""Judge–human agreement statistics (uep_gateway.annotation.calibration_stats) on small hand-checked inputs, and a
calibration over 20 items with two annotators against scikit-learn and the krippendorff package."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from uep_common.analytics.judge_standing import standing_of
from uep_gateway.annotation.calibration_stats import confusion, judge_vs_humans, kappa, rescale

PF = ["fail", "pass"]


def test_cohen_kappa_by_hand():
    # judge P P F F, human P F F F: p_o = 3/4; marginals judge P 1/2, human P 1/4 → p_e = 1/2·1/4 + 1/2·3/4 = 1/2
    # kappa = (3/4 − 1/2) / (1 − 1/2) = 0.5
    assert kappa(["pass", "pass", "fail", "fail"], ["pass", "fail", "fail", "fail"], PF, "labels") == pytest.approx(0.5)


def test_quadratic_weighted_kappa_by_hand():
    # scale 1..3, judge 1 2 3, human 1 3 3; weights (i − j)²: observed Σ w·o = 1/3 (the pair 2,3);
    # expected with marginals judge 1/3 each, human 1:1/3 3:2/3 → Σ w·e = 1/3·(8/3 + 1 + 4/3) = 5/3
    # kappa_w = 1 − (1/3)/(5/3) = 0.8
    assert kappa([1, 2, 3], [1, 3, 3], [1, 2, 3], "scale") == pytest.approx(0.8)
    # unweighted on the same data: p_o = 2/3, p_e = 1/3·1/3 + 1/3·0 + 1/3·2/3 = 1/3 → (2/3 − 1/3)/(2/3) = 0.5
    assert kappa([1, 2, 3], [1, 3, 3], [1, 2, 3], "labels") == pytest.approx(0.5)


def test_kappa_undefined():
    assert kappa(["pass"], ["pass"], PF, "labels") is None  # one pair
    assert kappa(["pass", "pass"], ["pass", "pass"], PF, "labels") is None  # p_e = 1
    with pytest.raises(ValueError, match="unequal length"):
        kappa(["pass"], ["pass", "fail"], PF, "labels")


def test_confusion_rows_are_the_judge():
    c = confusion(["pass", "pass", "fail", "fail"], ["pass", "fail", "fail", "fail"], PF)
    # judge fail → human fail 2, pass 0; judge pass → human fail 1, pass 1
    assert c == {"labels": PF, "matrix": [[2, 0], [1, 1]]}
    assert confusion([], [], PF)["matrix"] == [[0, 0], [0, 0]]


def test_rescale_to_scale_points():
    assert rescale(0.5, 0, 1, 1, 5) == 3
    assert rescale(0.625, 0, 1, 1, 5) == 4  # 3.5, half up
    assert rescale(7, 0, 10, 1, 5) == 4  # 1 + 0.7·4 = 3.8
    assert rescale(11, 0, 10, 1, 5) == 5  # clipped
    with pytest.raises(ValueError):
        rescale(1, 2, 2, 1, 5)


def test_judge_with_two_annotators_by_hand():
    judge = {1: "pass", 2: "pass", 3: "fail", 4: "fail", 5: "pass"}  # unit 5: no human answer, left out
    humans = {
        "alice": {1: "pass", 2: "fail", 3: "fail", 4: "fail"},  # kappa 0.5 (above)
        "bob": {1: "pass", 2: "pass", 3: "fail", 4: "fail"},  # kappa 1
    }
    r = judge_vs_humans(judge, humans, PF, "labels")
    assert r["items"] == 4 and r["annotations"] == 8
    assert [(a["annotator"], a["n"], a["kappa"]) for a in r["per_annotator"]] == [("alice", 4, 0.5), ("bob", 4, 1.0)]
    assert r["kappa_mean"] == pytest.approx(0.75)
    assert r["exact_agreement"] == pytest.approx(7 / 8)
    assert r["confusion"]["matrix"] == [[4, 0], [1, 3]]
    # alpha, nominal, coders judge + alice + bob, 4 units of 3 values (pairs weighted 1/(3−1)):
    # unit 1 PPP: o_PP += 3; unit 2 PFP: o_PP += 1, o_PF = o_FP += 1; units 3, 4 FFF: o_FF += 6
    # n_P = 5, n_F = 7, n = 12 → alpha = 1 − 11·2 / (2·5·7) = 1 − 22/70 = 48/70
    assert r["alpha"] == pytest.approx(48 / 70)
    # humans alone: units 1 PP, 2 PF, 3 FF, 4 FF → o_PP 2, o_PF = o_FP 1, o_FF 4; n_P 3, n_F 5, n 8
    # alpha = 1 − 7·2 / (2·3·5) = 16/30
    assert r["human_alpha"] == pytest.approx(16 / 30)


def test_scale_spearman_against_the_mean_human_rating():
    # judge 1 2 3; humans 1 3 3 (one annotator): ranks (1, 2, 3) and (1, 2.5, 2.5) → rho = 1.5 / (√2·√1.5) = √0.75
    r = judge_vs_humans({1: 1, 2: 2, 3: 3}, {"alice": {1: 1, 2: 3, 3: 3}}, [1, 2, 3], "scale")
    assert r["spearman"]["rho"] == pytest.approx(0.75**0.5)
    assert r["kappa_mean"] == pytest.approx(0.8)


# 20 judged items, two annotators (P = pass, F = fail; ratings 1..5)
JUDGE = "PPFPFPPFFPPPFPFFPPFP"
ALICE = "PPFPFFPFFPPPFPPFPPFF"
BOB = "PPFFFPPFPPPPFPFFPFFP"
JUDGE_R = [5, 4, 2, 4, 1, 3, 5, 2, 1, 4, 5, 4, 2, 5, 3, 1, 4, 5, 2, 3]
ALICE_R = [5, 4, 1, 4, 2, 2, 5, 2, 1, 3, 5, 5, 2, 4, 3, 1, 4, 4, 2, 2]
BOB_R = [4, 4, 2, 3, 1, 3, 5, 3, 2, 4, 4, 4, 1, 5, 4, 2, 3, 5, 1, 3]


def _label(c: str) -> str:
    return {"P": "pass", "F": "fail"}[c]


def test_twenty_items_two_annotators_match_sklearn_and_krippendorff():
    judge = {i: _label(c) for i, c in enumerate(JUDGE)}
    humans = {"alice": {i: _label(c) for i, c in enumerate(ALICE)}, "bob": {i: _label(c) for i, c in enumerate(BOB)}}
    r = judge_vs_humans(judge, humans, PF, "labels")
    ka = cohen_kappa_score(list(JUDGE), list(ALICE))
    kb = cohen_kappa_score(list(JUDGE), list(BOB))
    # scikit-learn: both 0.693877… (= 34/49: p_o = 17/20 with each annotator, p_e = 0.51)
    assert ka == pytest.approx(34 / 49) and kb == pytest.approx(34 / 49)
    assert [a["kappa"] for a in r["per_annotator"]] == [pytest.approx(ka, abs=1e-12), pytest.approx(kb, abs=1e-12)]
    assert r["kappa_mean"] == pytest.approx(34 / 49, abs=1e-12)
    coded = np.array([[float(c == "P") for c in s] for s in (JUDGE, ALICE, BOB)])
    expected_alpha = krippendorff.alpha(reliability_data=coded, level_of_measurement="nominal")
    assert expected_alpha == pytest.approx(0.5995475113, abs=1e-9)  # the krippendorff package's value
    assert r["alpha"] == pytest.approx(expected_alpha, abs=1e-12)
    human_alpha = krippendorff.alpha(reliability_data=coded[1:], level_of_measurement="nominal")
    assert human_alpha == pytest.approx(0.4090909091, abs=1e-9)
    assert r["human_alpha"] == pytest.approx(human_alpha, abs=1e-12)

    scale = [1, 2, 3, 4, 5]
    rr = judge_vs_humans(
        dict(enumerate(JUDGE_R)), {"alice": dict(enumerate(ALICE_R)), "bob": dict(enumerate(BOB_R))}, scale, "scale"
    )
    wa = cohen_kappa_score(JUDGE_R, ALICE_R, labels=scale, weights="quadratic")
    wb = cohen_kappa_score(JUDGE_R, BOB_R, labels=scale, weights="quadratic")
    assert (wa, wb) == (pytest.approx(0.8993710692, abs=1e-9), pytest.approx(0.8620689655, abs=1e-9))
    assert rr["kappa_mean"] == pytest.approx((wa + wb) / 2, abs=1e-12)
    interval = krippendorff.alpha(
        reliability_data=np.array([JUDGE_R, ALICE_R, BOB_R], float), level_of_measurement="interval", value_domain=scale
    )
    assert rr["alpha"] == pytest.approx(interval, abs=1e-12) and interval == pytest.approx(0.8414688760, abs=1e-9)
    assert rr["spearman"]["rho"] == pytest.approx(0.9486864032, abs=1e-9)  # scipy.stats.spearmanr vs the mean


def test_standing_takes_the_weakest_question_and_flags_under_the_threshold():
    rows = [
        {"template": "rubric", "template_version": "v1", "question": q, "question_type": "rating", "items": 20,
         "agreement": a, "alpha": 0.5, "computed_at": "t", "task_id": "x"}
        for q, a in (("overall", 0.7), ("tone", 0.3))
    ]  # fmt: skip
    s = standing_of(rows, 0.4)
    assert (s["agreement"], s["flagged"]) == (0.3, True)
    assert standing_of(rows, 0.2)["flagged"] is False
    undefined = [{**rows[0], "agreement": None}]
    assert (standing_of(undefined, 0.4)["agreement"], standing_of(undefined, 0.4)["flagged"]) == (None, False)
