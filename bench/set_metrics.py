"""bench/set_metrics: set-level metrics, with their bootstrap intervals, of a 100,000-item classification evaluation.

A synthetic evaluation (fixed seed) of a classifier with probabilities: gold labels of ``--classes`` classes
(default 2), the model's probabilities a softmax of noisy logits, its predicted label the most probable class,
1 % of the items without an answer. Timed (wall clock, one process, after scikit-learn's import): encoding the
items (:func:`uep_common.analytics.set_metrics.classification_items`) and every value and interval
(:func:`uep_common.analytics.set_metrics.classification_metrics`: accuracy, P/R/F1 per class and averaged, confusion
matrix, ROC-AUC, PR-AUC, log loss, Brier, ECE, each headline value with its bootstrap interval). Target: < 5 s
in all. Also timed: the ranking metrics of as many queries (21 per-query values each).

Usage: ``.venv/bin/python bench/set_metrics.py [--items N] [--classes K]`` (no server needed).
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def synthetic(n: int, k: int, seed: int = 7) -> tuple[list[str], list[str | None], list[dict[str, float]], list[str]]:
    """Gold labels, predicted labels (None = no answer), probabilities and class names of ``n`` items."""
    rng = np.random.default_rng(seed)
    names = [f"class_{c}" for c in range(k)]
    y = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k))
    logits[np.arange(n), y] += 1.5
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    pred = p.argmax(axis=1)
    gold = [names[i] for i in y]
    predicted: list[str | None] = [names[i] for i in pred]
    for i in rng.choice(n, n // 100, replace=False):
        predicted[i] = None
    probs = [dict(zip(names, row.tolist(), strict=True)) for row in p]
    return gold, predicted, probs, names


def main() -> None:
    """Run the bench and print the timings."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--classes", type=int, default=2)
    args = ap.parse_args()
    import sklearn.metrics  # noqa: F401  (imported once, outside the timing)

    from uep_common.analytics.set_metrics import classification_items, classification_metrics, ranking_set_metrics

    gold, predicted, probs, names = synthetic(args.items, args.classes)
    t0 = time.perf_counter()
    items = classification_items(gold, predicted, probs, names)
    t1 = time.perf_counter()
    result = classification_metrics(items)
    t2 = time.perf_counter()
    head = result["headline"]
    print(f"classification, {args.items:,} items, {args.classes} classes; {result['method']}")
    for name in ("accuracy", "f1_macro", "roc_auc", "pr_auc", "log_loss", "brier", "ece"):
        h = head[name]
        print(f"  {name:<10} {h['value']:.4f}  [{h['ci_low']:.4f}, {h['ci_high']:.4f}]")
    print(f"encode items   {t1 - t0:6.2f} s")
    print(f"values + CIs   {t2 - t1:6.2f} s")
    print(f"total          {t2 - t0:6.2f} s   (target < 5 s: {'met' if t2 - t0 < 5 else 'NOT met'})")

    rng = np.random.default_rng(3)
    keys = ["rr"] + [f"{f}@{k}" for f in ("ndcg", "ap", "recall", "precision", "hit") for k in (1, 3, 5, 10)]
    values = {key: rng.random(args.items) for key in keys}
    t3 = time.perf_counter()
    ranking = ranking_set_metrics(values, excluded=0)
    t4 = time.perf_counter()
    print(f"ranking, {args.items:,} queries, {len(keys)} values each: {t4 - t3:.2f} s ({ranking['method']})")


if __name__ == "__main__":
    main()
