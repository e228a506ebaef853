"""The positive class of a two-class benchmark (``positive_class``; default the second class): ROC-AUC, PR-AUC,
Brier and the curves against scikit-learn given the same ``pos_label``."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as skm

from uep_common.analytics.set_metrics import (
    classification_curves,
    classification_items,
    classification_metrics,
    classification_values,
)

CLASSES = ["benign", "malignant"]
rng = np.random.default_rng(7)
GOLD = [CLASSES[i] for i in rng.integers(0, 2, 60)]
P_MALIGNANT = np.clip(np.where(np.array(GOLD) == "malignant", 0.65, 0.35) + rng.normal(0, 0.25, 60), 0.01, 0.99)
PROBA = [{"benign": 1 - p, "malignant": p} for p in P_MALIGNANT]
PRED = ["malignant" if p >= 0.5 else "benign" for p in P_MALIGNANT]


@pytest.mark.parametrize("positive", [None, "malignant", "benign"])
def test_binary_metrics_are_scikit_learn_s_with_that_pos_label(positive):
    pos = positive or "malignant"  # the default: the second class
    items = classification_items(GOLD, PRED, PROBA, CLASSES, positive)
    values = classification_values(items)
    score = np.array([p[pos] for p in PROBA])
    fpr, tpr, _ = skm.roc_curve(GOLD, score, pos_label=pos)
    assert values["roc_auc"] == pytest.approx(skm.auc(fpr, tpr), abs=1e-12)
    assert values["pr_auc"] == pytest.approx(skm.average_precision_score(GOLD, score, pos_label=pos), abs=1e-12)
    assert values["brier"] == pytest.approx(skm.brier_score_loss(GOLD, score, pos_label=pos), abs=1e-12)
    assert [r["label"] for r in values["roc_auc_per_class"]] == [pos]
    row = next(r for r in values["per_class"] if r["label"] == pos)
    assert row["precision"] == pytest.approx(skm.precision_score(GOLD, PRED, pos_label=pos))
    assert row["recall"] == pytest.approx(skm.recall_score(GOLD, PRED, pos_label=pos))
    result = classification_metrics(items, n_resamples=200)
    assert result["classification"]["positive_label"] == pos
    assert result["headline"]["roc_auc"]["value"] == pytest.approx(skm.auc(fpr, tpr), abs=1e-12)
    lo, hi = result["headline"]["roc_auc"]["ci_low"], result["headline"]["roc_auc"]["ci_high"]
    assert lo <= values["roc_auc"] <= hi  # the bootstrap replicates are of the same positive class
    curves = classification_curves(items)
    assert curves is not None and [c["label"] for c in curves["roc"]] == [pos]


def test_benign_as_positive_differs_from_the_default_where_it_should():
    # ROC-AUC is symmetric in the class swapped with its score; average precision is not
    default = classification_values(classification_items(GOLD, PRED, PROBA, CLASSES))
    benign = classification_values(classification_items(GOLD, PRED, PROBA, CLASSES, "benign"))
    assert benign["roc_auc"] == pytest.approx(default["roc_auc"])
    assert benign["pr_auc"] != pytest.approx(default["pr_auc"])
    assert (default["roc_auc_per_class"][0]["label"], benign["roc_auc_per_class"][0]["label"]) == ("malignant", "benign")
