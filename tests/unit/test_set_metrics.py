"""Set-level metrics (uep_common.analytics.set_metrics), their bootstrap (uep_common.analytics.stats.bootstrap_weights) and DeLong's
test (uep_common.analytics.stats.delong_test).

Where each expected value comes from: scikit-learn's sklearn.metrics called here on the same arrays (the
classification values, and each bootstrap replicate as sklearn with ``sample_weight`` = the resample's counts);
by hand (the arithmetic is in the test) for a 4-item ROC-AUC / AP / log loss / Brier, the ECE and the ranking
means; DeLong's variance against a direct O(m·n) computation of the structural components (DeLong et al. 1988,
eqs. for V10 / V01), and on data whose answer is known (identical models; a perfect model).
"""

import math
import warnings

import numpy as np
import pytest
from sklearn import metrics as skm
from sklearn.preprocessing import label_binarize

from uep_common.analytics.comparison import classification_comparison, ranking_comparison
from uep_common.analytics.set_metrics import (
    _Features,
    classification_items,
    classification_metrics,
    classification_values,
    expected_calibration_error,
    ranking_set_metrics,
    reliability,
)
from uep_common.analytics.stats import bootstrap_weights, delong_test, percentile_interval, set_resamples

LABELS = ["cat", "dog", "eel"]


def _three_classes(n: int = 600, seed: int = 11):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    logits = rng.normal(size=(n, 3))
    logits[np.arange(n), y] += 1.2
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    pred = p.argmax(axis=1)
    predicted = [LABELS[j] if i % 25 else None for i, j in enumerate(pred)]  # every 25th item: no answer
    items = classification_items([LABELS[i] for i in y], predicted, [dict(zip(LABELS, r, strict=True)) for r in p], LABELS)
    y_pred = np.where(np.arange(n) % 25 == 0, 3, pred)  # 3 = no class, as the encoding says
    return items, y, y_pred, p


def test_classification_values_are_sklearns_on_the_same_arrays():
    items, y, y_pred, p = _three_classes()
    assert (items.y_true == y).all() and (items.y_pred == y_pred).all()
    v = classification_values(items)
    assert v["accuracy"] == pytest.approx(skm.accuracy_score(y, y_pred))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # y_pred holds a class (3) y_true does not
        assert v["balanced_accuracy"] == pytest.approx(skm.balanced_accuracy_score(y, y_pred))
    for average in ("macro", "micro", "weighted"):
        exp = skm.precision_recall_fscore_support(y, y_pred, labels=[0, 1, 2], average=average, zero_division=np.nan)
        assert (v[f"precision_{average}"], v[f"recall_{average}"], v[f"f1_{average}"]) == pytest.approx(exp[:3])
    exp = skm.precision_recall_fscore_support(y, y_pred, labels=[0, 1, 2], zero_division=np.nan)
    assert [r["f1"] for r in v["per_class"]] == pytest.approx(list(exp[2]))
    assert [r["support"] for r in v["per_class"]] == list(exp[3])
    assert v["confusion"] == skm.confusion_matrix(y, y_pred, labels=[0, 1, 2, 3])[:3].tolist()
    assert v["roc_auc"] == pytest.approx(skm.roc_auc_score(y, p, multi_class="ovr", average="macro", labels=[0, 1, 2]))
    assert v["pr_auc"] == pytest.approx(skm.average_precision_score(label_binarize(y, classes=[0, 1, 2]), p, average="macro"))
    assert v["log_loss"] == pytest.approx(skm.log_loss(y, p, labels=[0, 1, 2]))
    assert v["brier"] == pytest.approx(skm.brier_score_loss(y, p, labels=[0, 1, 2]))  # multi-class: Σ_k (p_k − y_k)²


def test_every_bootstrap_replicate_is_sklearn_on_the_resample():
    items, y, y_pred, p = _three_classes(300)
    features = _Features(items)
    w = next(bootstrap_weights(items.n, 3, seed=5))
    assert (w.sum(axis=1) == items.n).all()
    reps = features.replicates(w)
    for r in range(3):
        sw = w[r]
        assert reps["accuracy"][r] == pytest.approx(skm.accuracy_score(y, y_pred, sample_weight=sw))
        p_, r_, f_, _ = skm.precision_recall_fscore_support(
            y, y_pred, labels=[0, 1, 2], average="macro", zero_division=np.nan, sample_weight=sw
        )
        assert (reps["precision_macro"][r], reps["recall_macro"][r], reps["f1_macro"][r]) == pytest.approx((p_, r_, f_))
        f_w = skm.f1_score(y, y_pred, labels=[0, 1, 2], average="weighted", zero_division=np.nan, sample_weight=sw)
        assert reps["f1_weighted"][r] == pytest.approx(f_w)
        aucs = [skm.roc_auc_score(y == c, p[:, c], sample_weight=sw) for c in range(3)]
        assert reps["roc_auc"][r] == pytest.approx(np.mean(aucs))
        aps = [skm.average_precision_score(y == c, p[:, c], sample_weight=sw) for c in range(3)]
        assert reps["pr_auc"][r] == pytest.approx(np.mean(aps))
        assert reps["log_loss"][r] == pytest.approx(skm.log_loss(y, p, labels=[0, 1, 2], sample_weight=sw))
        assert reps["brier"][r] == pytest.approx(skm.brier_score_loss(y, p, labels=[0, 1, 2], sample_weight=sw))


def test_binary_values_by_hand():
    # gold: a, a, b, b (positive class: the second, "b"); P(b) = 0.1, 0.6, 0.4, 0.8
    items = classification_items(["a", "a", "b", "b"], ["a", "b", "a", "b"], [{"a": 1 - q, "b": q} for q in (0.1, 0.6, 0.4, 0.8)])
    v = classification_values(items)
    # ROC-AUC = P(score of a b > score of an a): pairs (0.4, 0.1) yes, (0.4, 0.6) no, (0.8, 0.1) yes, (0.8, 0.6) yes
    assert v["roc_auc"] == pytest.approx(3 / 4)
    # AP: thresholds from the top: 0.8 (b: precision 1/1), 0.6 (a), 0.4 (b: precision 2/3) -> (1 + 2/3) / 2
    assert v["pr_auc"] == pytest.approx((1 + 2 / 3) / 2)
    # log loss = −mean ln p(gold) = −(ln .9 + ln .4 + ln .4 + ln .8) / 4
    assert v["log_loss"] == pytest.approx(-(math.log(0.9) + 2 * math.log(0.4) + math.log(0.8)) / 4)
    # Brier (two classes) = mean (P(b) − [gold is b])² = (.01 + .36 + .36 + .04) / 4
    assert v["brier"] == pytest.approx(0.1925)
    assert v["accuracy"] == 0.5 and v["f1_macro"] == pytest.approx(0.5)


def test_expected_calibration_error_by_hand():
    # P(yes): .95 .90 .92 .70 .65 .55 -> the most probable class is "yes" for all, confidence = P(yes)
    # gold:   yes no  yes yes yes no
    # 15 bins (m/15, (m+1)/15]: .95 -> (.933, 1]; .90 and .92 -> (.867, .933]; .70 -> (.667, .733];
    # .65 -> (.6, .667]; .55 -> (.533, .6]
    # ECE = [1·|1 − .95| + 2·|1/2 − .91| + 1·|1 − .70| + 1·|1 − .65| + 1·|0 − .55|] / 6 = 2.07 / 6
    q = [0.95, 0.90, 0.92, 0.70, 0.65, 0.55]
    gold = ["yes", "no", "yes", "yes", "yes", "no"]
    items = classification_items(gold, ["yes"] * 6, [{"no": 1 - x, "yes": x} for x in q], ["no", "yes"])
    bins = reliability(items)
    full = [b for b in bins if b["count"]]
    assert [b["count"] for b in full] == [1, 1, 1, 2, 1]
    assert full[3]["accuracy"] == 0.5 and full[3]["confidence"] == pytest.approx(0.91)
    assert expected_calibration_error(bins, 6) == pytest.approx(2.07 / 6)
    assert classification_values(items)["ece"] == pytest.approx(2.07 / 6)
    assert _Features(items).replicates(np.ones((1, 6)))["ece"][0] == pytest.approx(2.07 / 6)


def test_headline_values_come_with_bootstrap_intervals_and_probabilities_are_optional():
    items, *_ = _three_classes()
    result = classification_metrics(items, n_resamples=300)
    head = result["headline"]
    assert set(head) >= {"accuracy", "f1_macro", "roc_auc", "pr_auc", "log_loss", "brier", "ece"}
    for name, h in head.items():
        assert h["ci_low"] <= h["value"] <= h["ci_high"] or name == "ece", name  # ECE is biased up under resampling
    assert "300 resamples" in result["method"]
    assert result["classification"]["confusion_matrix"]["predicted"][-1] == "(no answer)"
    assert result["classification"]["no_class_predictions"] == 24
    llm = classification_items(["a", "b", "b"], ["a", "b", None])
    plain = classification_metrics(llm, n_resamples=50)
    assert "roc_auc" not in plain["headline"] and plain["classification"]["probabilities"]["available"] is False
    assert classification_items(["a"], ["a"], [{"a": 1.2}]).proba is None  # outside [0, 1]: not used
    assert classification_items(["a", "b"], ["a", "b"], [{"a": 1.0}, None]).proba_note == "1 of 2 items have no probabilities"


def test_the_bootstrap_is_fixed_and_bounded():
    a = [w.copy() for w in bootstrap_weights(50, 7, batch=3)]
    b = [w.copy() for w in bootstrap_weights(50, 7, batch=3)]
    assert [x.shape for x in a] == [(3, 50), (3, 50), (1, 50)] and all((x == y).all() for x, y in zip(a, b, strict=True))
    assert set_resamples(1_000) == 1000 and set_resamples(100_000) == 800 and set_resamples(100_000, 2) == 400
    assert set_resamples(10_000_000) == 200
    assert percentile_interval(np.array([np.nan] * 6 + [1.0] * 4)) is None  # fewer than half defined
    assert percentile_interval(np.arange(101.0)) == pytest.approx((2.5, 97.5))


def test_ranking_means_by_hand():
    # query 1: ranked a, b, c, d; relevant {b, d}: RR = 1/2; NDCG@3 = (1/log2 3) / (1 + 1/log2 3);
    #          AP@10 = (P@2 + P@4) / |R| = (1/2 + 2/4) / 2 = 1/2
    # query 2: ranked x, y; gains x=2, z=3: RR = 1; NDCG@3 = 2 / (3 + 2/log2 3); AP@10 = (P@1) / 2 = 1/2
    ndcg1 = (1 / math.log2(3)) / (1 + 1 / math.log2(3))
    ndcg2 = 2 / (3 + 2 / math.log2(3))
    values = {"rr": np.array([0.5, 1.0]), "ndcg@3": np.array([ndcg1, ndcg2]), "ap@10": np.array([0.5, 0.5])}
    result = ranking_set_metrics(values, excluded=1, n_resamples=200)
    head = result["headline"]
    assert head["mrr"]["value"] == pytest.approx(0.75)
    assert head["ndcg@3"]["value"] == pytest.approx((ndcg1 + ndcg2) / 2)
    assert head["map@10"]["value"] == pytest.approx(0.5) and head["map@10"]["ci_low"] == head["map@10"]["ci_high"] == 0.5
    assert result["ranking"]["excluded"] == 1 and result["ranking"]["cutoffs"] == [3, 10]


def _delong_reference(positive, a, b):
    """DeLong et al. 1988 directly: ψ(x, y) = 1 if x > y, ½ if equal; V10_i = mean_j ψ(X_i, Y_j), V01_j = mean_i
    ψ(X_i, Y_j) per model; var(Δ) = (S10[aa] + S10[bb] − 2 S10[ab]) / m + (same with S01) / n."""
    comps = []
    for s in (a, b):
        x, y = s[positive], s[~positive]
        psi = (x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])
        comps.append((psi.mean(axis=1), psi.mean(axis=0)))
    v10 = np.vstack([c[0] for c in comps])
    v01 = np.vstack([c[1] for c in comps])
    s = np.cov(v10) / v10.shape[1] + np.cov(v01) / v01.shape[1]
    auc = v10.mean(axis=1)
    return auc, (auc[0] - auc[1]) / math.sqrt(s[0, 0] + s[1, 1] - 2 * s[0, 1])


def test_fast_delong_equals_the_direct_computation():
    rng = np.random.default_rng(3)
    positive = rng.random(240) < 0.35
    a = positive * 1.0 + rng.normal(0, 1, 240)
    b = np.round(positive * 0.5 + rng.normal(0, 1, 240), 1)  # rounded: ties, which the midranks count as ½
    result = delong_test(positive, a, b)
    auc, z = _delong_reference(positive, a, b)
    assert (result.auc_a, result.auc_b) == pytest.approx(tuple(auc))
    assert result.auc_a == pytest.approx(skm.roc_auc_score(positive, a)) and result.auc_b == pytest.approx(
        skm.roc_auc_score(positive, b)
    )
    assert result.z == pytest.approx(z) and result.p_value == pytest.approx(2 * (1 - 0.5 * (1 + math.erf(abs(z) / math.sqrt(2)))))
    assert result.ci_low < result.difference < result.ci_high


def test_delong_on_known_answers():
    positive = np.array([True, True, False, False, True, False])
    same = delong_test(positive, [0.9, 0.8, 0.1, 0.4, 0.3, 0.2], [0.9, 0.8, 0.1, 0.4, 0.3, 0.2])
    assert (same.difference, same.se, same.p_value) == (0.0, 0.0, 1.0)
    rng = np.random.default_rng(0)
    positive = rng.random(400) < 0.5
    perfect = positive + 0.0
    noise = rng.random(400)
    result = delong_test(positive, perfect, noise)
    assert result.auc_a == 1.0 and result.p_value < 1e-10 and result.difference > 0.4
    with pytest.raises(ValueError, match="positive and negative"):
        delong_test([True, True], [0.1, 0.2], [0.3, 0.4])


def test_paired_comparison_of_set_metrics():
    items, y, y_pred, p = _three_classes(400)
    gold = [LABELS[i] for i in y]
    pred = [LABELS[j] if j < 3 else None for j in y_pred]
    probs = [dict(zip(LABELS, r, strict=True)) for r in p]
    same = classification_comparison(gold, pred, pred, probs, probs, LABELS)
    f1 = next(m for m in same.metrics if m.name == "f1_macro")
    assert (f1.difference, f1.ci_low, f1.ci_high) == (0.0, 0.0, 0.0)  # the same resamples on both sides
    assert [d.p_value for d in same.delong] == [1.0, 1.0, 1.0]
    worse = [LABELS[(LABELS.index(x) + 1) % 3] if x and i % 3 == 0 else x for i, x in enumerate(pred)]
    flat = [dict.fromkeys(LABELS, 1 / 3)] * len(gold)
    cmp = classification_comparison(gold, pred, worse, probs, flat, LABELS)
    acc = next(m for m in cmp.metrics if m.name == "accuracy")
    assert acc.difference == pytest.approx(np.mean(np.array(gold) == np.array(pred)) - np.mean(np.array(gold) == np.array(worse)))
    assert acc.ci_low > 0  # about a third of the baseline's answers were made wrong: clearly better
    assert all(d.auc_baseline == 0.5 and d.significant for d in cmp.delong)
    ranks = ranking_comparison({"rr": np.array([1.0, 0.5, 1.0])}, {"rr": np.array([0.5, 0.5, 1 / 3])})
    assert ranks.metrics[0].name == "mrr" and ranks.metrics[0].difference == pytest.approx((0.5 + 0 + 2 / 3) / 3)
