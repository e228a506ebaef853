"""Set-level metrics of an evaluation: classification over the items' predicted and gold labels, ranking over
the items' per-query values; each headline value with a 95 % interval: Wilson's for a proportion of items
(:func:`is_proportion`: accuracy, hit@k), the bootstrap's for every other set-level metric.

Classification (:func:`classification_metrics`; items with a gold label and a verdict). Values from
scikit-learn (``sklearn.metrics``; definitions in its user guide, "Classification metrics"):

* accuracy (``accuracy_score``), balanced accuracy (``balanced_accuracy_score``: mean recall over the classes
  present in the gold labels), precision / recall / F1 per class and their macro, micro and weighted averages
  with the support (``precision_recall_fscore_support``, ``zero_division=nan``: a 0/0 value is undefined
  (None), and undefined per-class values are left out of the macro and weighted averages, scikit-learn's
  documented behaviour), the confusion matrix (``confusion_matrix``; rows the gold class, columns the
  predicted one, a last column for predictions outside the classes: an LLM's answer naming no class).
* From the model's probabilities (a classifier's ``prediction.probabilities``, used only when every item has
  them): ROC-AUC (``roc_auc_score``) and PR-AUC (``average_precision_score``, the step-wise area Σ (Rₙ − Rₙ₋₁)
  Pₙ), for two classes of the positive class (the benchmark's ``positive_class``, else the second class,
  scikit-learn's convention), for more the
  macro mean of the one-vs-rest values (undefined when a class has no positive or no negative item); log loss
  (as ``log_loss``: mean −ln p(gold class), probabilities clipped to [ε, 1 − ε], ε the float64 machine epsilon,
  not renormalised); Brier score (as ``brier_score_loss``: two classes mean (p₊ − y₊)², more classes mean
  Σₖ (pₖ − yₖ)², Brier 1950); expected calibration error (ECE; Guo, Pleiss, Sun & Weinberger 2017, "On calibration of modern
  neural networks", ICML, eq. 3): the items binned by their confidence (the largest probability) into
  :data:`ECE_BINS` = 15 equal-width bins ((m−1)/15, m/15], ECE = Σₘ |Bₘ|/n · |acc(Bₘ) − conf(Bₘ)| with acc the
  share of items whose most probable class is the gold one; the bins are the reliability diagram.

Ranking (:func:`ranking_set_metrics`; the per-query values the ``ndcg`` metric stored for each item):
mean NDCG@k, MAP@k (mean AP@k), MRR (mean reciprocal rank), recall@k, precision@k and hit@k for k in 1, 3, 5,
10 (and the metric's own k); queries without a relevant item are excluded and counted (definitions in the
scorer's ``uep_scorer.metrics.ranking``).

Intervals: the items are resampled (:func:`uep_common.analytics.stats.bootstrap_weights`: fixed seed,
:func:`uep_common.analytics.stats.set_resamples` resamples, every statistic of one evaluation on the same resamples) and
each statistic is recomputed on every resample, vectorised (matrix products of the resample counts with the
items' one-hot class indicators, losses and score ranks); the interval is the 2.5 and 97.5 percentiles of the
replicates (:func:`uep_common.analytics.stats.percentile_interval`). A proportion of items (:func:`is_proportion`)
has the Wilson score interval instead (Wilson 1927; ``scipy.stats.binomtest(...).proportion_ci(method='wilson')``),
the interval of the same figure everywhere else: a bootstrap of 0 correct out of 10 is the degenerate [0, 0]
where Wilson gives [0, 0.278]. Each headline value names its ``method`` (``wilson`` | ``bootstrap``). For
100,000 items every value and interval takes
a few seconds (``bench/set_metrics.py``). scikit-learn is imported on first use (it takes about 2 s).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse

from uep_common.analytics.stats import BOOTSTRAP_SEED, bootstrap_weights, percentile_interval, set_resamples, wilson_interval
from uep_common.contract.configs import RANKING_AT_K

ECE_BINS = 15
"""Equal-width confidence bins of the expected calibration error (Guo et al. 2017 use 15)."""
MAX_CONFUSION_CLASSES = 50
"""Largest number of classes whose confusion matrix is stored (K × (K + 1) cells)."""
MAX_CURVE_POINTS = 200
"""Most points kept of each ROC or precision-recall curve drawn in a report."""
MAX_BOOTSTRAP_CURVES = 20
"""Most one-vs-rest ROC/PR curves bootstrapped (classes); with more, ROC-AUC and PR-AUC have no interval."""
NO_ANSWER_LABEL = "(no answer)"
"""The confusion matrix's last column: predictions outside the classes (an answer naming no class)."""
CLASSIFICATION_HEADLINE = (
    "accuracy",
    "balanced_accuracy",
    "precision_macro",
    "recall_macro",
    "f1_macro",
    "precision_micro",
    "recall_micro",
    "f1_micro",
    "precision_weighted",
    "recall_weighted",
    "f1_weighted",
)
PROBABILITY_HEADLINE = ("roc_auc", "pr_auc", "log_loss", "brier", "ece")
RANKING_CUTOFFS = (1, 3, 5, 10)


def _skm() -> Any:
    import sklearn.metrics

    return sklearn.metrics


def _num(value: Any) -> float | None:
    """A Python float, or None for NaN / None (an undefined value)."""
    if value is None:
        return None
    v = float(value)
    return None if math.isnan(v) else v


def method_text(n_resamples: int, confidence: float = 0.95) -> str:
    """How a bootstrap interval of a set-level metric is computed, in words."""
    return (
        f"bootstrap over items (resampled with replacement), percentile {confidence:.0%} interval, "
        f"{n_resamples} resamples, seed {BOOTSTRAP_SEED} (uep_common.analytics.stats.bootstrap_weights)"
    )


def summary_method_text(n_resamples: int, confidence: float = 0.95) -> str:
    """How the intervals of one evaluation's set-level metrics are computed, in words (:func:`is_proportion`)."""
    return (
        f"proportions of items (accuracy, hit@k): Wilson score {confidence:.0%} interval (Wilson 1927, "
        f"scipy.stats.binomtest); the others: {method_text(n_resamples, confidence)}"
    )


# ---------------------------------------------------------------- classification: the items


@dataclass(frozen=True)
class ClassificationItems:
    """The items of a classification evaluation, encoded.

    Attributes:
        labels: the K classes, in table order.
        y_true: ``(n,)`` int, the gold class index in ``[0, K)``.
        y_pred: ``(n,)`` int, the predicted class index in ``[0, K]``; ``K`` = no class (no answer, or a label
            outside the classes).
        proba: ``(n, K)`` float probabilities in class order, or None (not every item has them).
        proba_note: why ``proba`` is None ("" when it is not).
        positive: two classes: the index of the positive class (ROC-AUC, PR-AUC, Brier, curves); 1 (the second
            class, scikit-learn's convention) unless the benchmark declares ``positive_class``.
    """

    labels: list[str]
    y_true: np.ndarray[Any, Any]
    y_pred: np.ndarray[Any, Any]
    proba: np.ndarray[Any, Any] | None
    proba_note: str = ""
    positive: int = 1

    @property
    def targets(self) -> list[int]:
        """The classes ROC-AUC and PR-AUC are taken for: the positive class of two, else every class (vs the rest)."""
        return [self.positive] if len(self.labels) == 2 else list(range(len(self.labels)))

    @property
    def n(self) -> int:
        """Number of items."""
        return int(self.y_true.size)


def classification_items(
    gold: Sequence[str],
    predicted: Sequence[str | None],
    probabilities: Sequence[Mapping[str, float] | None] | None = None,
    class_names: Sequence[str] | None = None,
    positive_class: str | None = None,
) -> ClassificationItems:
    """Encode the items of a classification evaluation.

    Args:
        gold: the gold label of each item.
        predicted: the predicted label of each item (None: no answer).
        probabilities: each item's ``{class name: probability}`` (None for an item without); used only when
            every item has them and every value is a finite number in [0, 1] (a class missing from an item's
            dict has probability 0).
        class_names: the benchmark's classes in order; gold labels outside them are appended (sorted).
            Default: the sorted gold labels (a predicted label that is no gold label is then "no class").
        positive_class: two classes: the positive one (``BenchmarkConfig.positive_class``); None, or a name that
            is not one of exactly two classes, = the second class.

    Raises:
        ValueError: no item, or ``gold`` and ``predicted`` of different lengths.
    """
    if not gold:
        raise ValueError("no item")
    if len(gold) != len(predicted) or (probabilities is not None and len(probabilities) != len(gold)):
        raise ValueError("gold, predicted and probabilities must have one entry per item")
    gold = [str(g).strip() for g in gold]
    labels = [str(c) for c in class_names] if class_names else []
    labels += sorted(set(gold) - set(labels))
    index = {label: i for i, label in enumerate(labels)}
    k = len(labels)
    y_true = np.fromiter((index[g] for g in gold), dtype=np.int64, count=len(gold))
    y_pred = np.fromiter((index.get(p.strip(), k) if p is not None else k for p in predicted), dtype=np.int64, count=len(gold))
    proba, note = None, "the model gave no probabilities"
    if probabilities is not None and any(p for p in probabilities):
        missing = sum(1 for p in probabilities if not p)
        if missing:
            note = f"{missing} of {len(gold)} items have no probabilities"
        else:
            proba = np.zeros((len(gold), k))
            for i, p in enumerate(probabilities):
                assert p is not None  # no item misses them (checked above)
                for name, value in p.items():
                    j = index.get(str(name))
                    if j is not None:
                        proba[i, j] = value
            if not np.isfinite(proba).all() or proba.min() < 0 or proba.max() > 1:
                proba, note = None, "probabilities outside [0, 1]"
            else:
                note = ""
    positive = index[positive_class] if k == 2 and positive_class in index else 1
    return ClassificationItems(labels, y_true, y_pred, proba, note, positive)


# ---------------------------------------------------------------- classification: replicates


def _onehot(
    rows: np.ndarray[Any, Any], cols: np.ndarray[Any, Any], values: np.ndarray[Any, Any] | float, shape: tuple[int, int]
) -> Any:
    data = np.broadcast_to(np.asarray(values, dtype=float), rows.shape)
    return sparse.csr_matrix((data, (rows, cols)), shape=shape)


class _Features:
    """Per-item columns whose weighted sums give every statistic of a resample (see the module docstring)."""

    def __init__(self, items: ClassificationItems, curves: bool = True) -> None:
        n, k = items.n, len(items.labels)
        rows = np.arange(n)
        right = items.y_pred == items.y_true
        blocks = [
            _onehot(rows[right], items.y_true[right], 1.0, (n, k)),  # true positives of each class
            _onehot(rows, items.y_true, 1.0, (n, k)),  # support
            _onehot(rows[items.y_pred < k], items.y_pred[items.y_pred < k], 1.0, (n, k)),  # predicted count
        ]
        self.k, self.n = k, n
        self.probabilities = items.proba is not None
        self.auc: list[tuple[int, Any, int]] = []
        if items.proba is not None:
            p = items.proba
            eps = np.finfo(np.float64).eps
            loss = -np.log(np.clip(p[rows, items.y_true], eps, 1 - eps))
            if k == 2:
                brier = (p[:, items.positive] - (items.y_true == items.positive)) ** 2
            else:
                onehot = np.zeros_like(p)
                onehot[rows, items.y_true] = 1.0
                brier = ((p - onehot) ** 2).sum(axis=1)
            conf = p.max(axis=1)
            top_right = p.argmax(axis=1) == items.y_true
            bins = ece_bin(conf)
            blocks += [
                sparse.csr_matrix(np.column_stack([loss, brier])),
                _onehot(rows, bins, 1.0, (n, ECE_BINS)),
                _onehot(rows, bins, top_right.astype(float), (n, ECE_BINS)),
                _onehot(rows, bins, conf, (n, ECE_BINS)),
            ]
            for c in items.targets if curves else []:
                positive = items.y_true == c
                groups, inverse = np.unique(p[:, c], return_inverse=True)
                g = groups.size
                cols = np.where(positive, inverse, g + inverse)
                self.auc.append((c, _onehot(rows, cols, 1.0, (n, 2 * g)).T.tocsr(), g))
        self.matrix_t = sparse.hstack(blocks).T.tocsr()  # (columns, n): products with the counts' transpose

    def replicates(self, w: np.ndarray[Any, Any]) -> dict[str, np.ndarray[Any, Any]]:
        """Every statistic of the ``b`` resamples whose counts are the rows of ``w`` (``(b, n)``; any non-negative
        item weights: the statistics are those of the items weighted so, as ``sample_weight`` in scikit-learn)."""
        k = self.k
        n = w.sum(axis=1)
        sums = np.asarray(self.matrix_t @ w.T).T  # (b, columns)
        tp, support, predicted = sums[:, :k], sums[:, k : 2 * k], sums[:, 2 * k : 3 * k]
        with np.errstate(invalid="ignore", divide="ignore"):
            precision = np.where(predicted > 0, tp / predicted, np.nan)
            recall = np.where(support > 0, tp / support, np.nan)
            f1 = np.where(support + predicted > 0, 2 * tp / (support + predicted), np.nan)
            out = {
                "accuracy": tp.sum(axis=1) / n,
                "balanced_accuracy": _nanmean(recall),
                "precision_micro": tp.sum(axis=1) / predicted.sum(axis=1),
                "recall_micro": tp.sum(axis=1) / support.sum(axis=1),
                "f1_micro": 2 * tp.sum(axis=1) / (support.sum(axis=1) + predicted.sum(axis=1)),
            }
        for name, values in (("precision", precision), ("recall", recall), ("f1", f1)):
            out[f"{name}_macro"] = _nanmean(values)
            out[f"{name}_weighted"] = _nanmean(values, support)
            out[f"{name}_per_class"] = values
        if self.probabilities:
            base = 3 * k
            out["log_loss"] = sums[:, base] / n
            out["brier"] = sums[:, base + 1] / n
            right = sums[:, base + 2 + ECE_BINS : base + 2 + 2 * ECE_BINS]
            conf = sums[:, base + 2 + 2 * ECE_BINS : base + 2 + 3 * ECE_BINS]
            out["ece"] = np.abs(right - conf).sum(axis=1) / n
        if self.auc:
            aucs, aps = [], []
            for _, s_t, g in self.auc:
                counts = np.asarray(s_t @ w.T).T  # (b, 2g): positives then negatives per distinct score
                auc, ap = _auc_ap(counts[:, :g], counts[:, g:])
                aucs.append(auc)
                aps.append(ap)
            out["roc_auc"] = np.mean(aucs, axis=0)  # NaN when a class is undefined on a resample
            out["pr_auc"] = np.mean(aps, axis=0)
        return out


def ece_bin(confidence: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The ECE bin of each confidence: bin m (0-based) holds (m/15, (m+1)/15]; a confidence of 0 is in bin 0."""
    bins: np.ndarray[Any, Any] = np.clip(np.ceil(confidence * ECE_BINS).astype(np.int64) - 1, 0, ECE_BINS - 1)
    return bins


def _nanmean(values: np.ndarray[Any, Any], weights: np.ndarray[Any, Any] | None = None) -> np.ndarray[Any, Any]:
    """Row means ignoring NaN (weighted by ``weights`` when given); NaN for a row without a defined value."""
    ok = ~np.isnan(values)
    w = ok.astype(float) if weights is None else np.where(ok, weights, 0.0)
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, (np.where(ok, values, 0.0) * w).sum(axis=1) / total, np.nan)


def _auc_ap(pos: np.ndarray[Any, Any], neg: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """ROC-AUC and average precision of each row, from the weighted counts of positives and negatives at each
    distinct score (columns in increasing score order): AUC = P(score₊ > score₋) + ½ P(tie) (the Mann-Whitney
    form of the area); AP = Σ over scores, from the highest, of the positives there / all positives × the
    precision at that threshold (``sklearn.metrics.average_precision_score``). NaN without a positive (AP,
    AUC) or a negative (AUC)."""
    n_pos, n_neg = pos.sum(axis=1), neg.sum(axis=1)
    below = np.cumsum(neg, axis=1)
    below -= 0.5 * neg  # negatives at a lower score, and half of those at the same score
    reverse = pos[:, ::-1]
    tp = np.cumsum(reverse, axis=1)
    seen = np.cumsum((pos + neg)[:, ::-1], axis=1)
    np.divide(tp, seen, out=tp, where=seen > 0)  # the precision at each threshold, from the highest score
    with np.errstate(invalid="ignore", divide="ignore"):
        auc = np.where((n_pos > 0) & (n_neg > 0), np.einsum("ij,ij->i", pos, below) / (n_pos * n_neg), np.nan)
        ap = np.where(n_pos > 0, np.einsum("ij,ij->i", reverse, tp) / n_pos, np.nan)
    return auc, ap


def classification_replicates(
    items: ClassificationItems, n_resamples: int, seed: int = BOOTSTRAP_SEED
) -> dict[str, np.ndarray[Any, Any]]:
    """Bootstrap replicates of every classification statistic: name → ``(n_resamples,)`` array (per-class
    ``precision_per_class``, ``recall_per_class``, ``f1_per_class``: ``(n_resamples, K)``); NaN where the
    statistic is undefined on a resample. The resamples are :func:`uep_common.analytics.stats.bootstrap_weights` of
    ``(items.n, n_resamples, seed)``: two evaluations of the same number of paired items get the same ones."""
    features = _Features(items, curves=len(items.labels) <= MAX_BOOTSTRAP_CURVES)
    parts: list[dict[str, np.ndarray[Any, Any]]] = [features.replicates(w) for w in bootstrap_weights(items.n, n_resamples, seed)]
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}


# ---------------------------------------------------------------- classification: values


def classification_values(items: ClassificationItems) -> dict[str, Any]:
    """Point values of the classification statistics (scikit-learn): the headline names
    (:data:`CLASSIFICATION_HEADLINE`, and :data:`PROBABILITY_HEADLINE` with probabilities) → float | None,
    plus ``per_class`` rows, ``confusion`` (K × (K + 1) counts), ``roc_auc_per_class`` / ``pr_auc_per_class``
    and ``reliability`` (the ECE bins)."""
    skm = _skm()
    k = len(items.labels)
    classes = list(range(k))
    yt, yp = items.y_true, items.y_pred
    out: dict[str, Any] = {"accuracy": float(skm.accuracy_score(yt, yp))}
    support = np.bincount(yt, minlength=k)
    recall_all = np.diag(skm.confusion_matrix(yt, yp, labels=classes)) / np.where(support > 0, support, 1)
    out["balanced_accuracy"] = float(np.mean(recall_all[support > 0]))  # balanced_accuracy_score's definition
    for average in ("macro", "micro", "weighted"):
        p, r, f, _ = skm.precision_recall_fscore_support(yt, yp, labels=classes, average=average, zero_division=np.nan)
        out[f"precision_{average}"], out[f"recall_{average}"], out[f"f1_{average}"] = _num(p), _num(r), _num(f)
    p, r, f, s = skm.precision_recall_fscore_support(yt, yp, labels=classes, average=None, zero_division=np.nan)
    out["per_class"] = [
        {"label": label, "precision": _num(p[i]), "recall": _num(r[i]), "f1": _num(f[i]), "support": int(s[i])}
        for i, label in enumerate(items.labels)
    ]
    out["confusion"] = skm.confusion_matrix(yt, yp, labels=[*classes, k])[:k].tolist()
    if items.proba is not None:
        proba = items.proba
        targets = items.targets
        aucs: list[float | None] = []
        aps: list[float | None] = []
        for c in targets:
            positive = yt == c
            defined = positive.any() and not positive.all()
            aucs.append(float(skm.roc_auc_score(positive, proba[:, c])) if defined else None)
            aps.append(float(skm.average_precision_score(positive, proba[:, c])) if positive.any() else None)
        out["roc_auc"] = None if None in aucs else float(np.mean([v for v in aucs if v is not None]))
        out["pr_auc"] = None if None in aps else float(np.mean([v for v in aps if v is not None]))
        out["roc_auc_per_class"] = [{"label": items.labels[c], "value": v} for c, v in zip(targets, aucs, strict=True)]
        out["pr_auc_per_class"] = [{"label": items.labels[c], "value": v} for c, v in zip(targets, aps, strict=True)]
        # log loss and Brier as sklearn.metrics.log_loss / brier_score_loss compute them (the tests compare), here
        # from the per-item terms: scikit-learn warns on every call whose rows do not sum to 1 within 1.5e-8,
        # which a model's float32 probabilities never do exactly
        eps = np.finfo(np.float64).eps
        out["log_loss"] = float(np.mean(-np.log(np.clip(proba[np.arange(items.n), yt], eps, 1 - eps))))
        if k == 2:
            out["brier"] = float(skm.brier_score_loss(yt == items.positive, proba[:, items.positive]))
        else:
            out["brier"] = float(np.mean(((proba - np.eye(k)[yt]) ** 2).sum(axis=1)))
        out["reliability"] = reliability(items)
        out["ece"] = expected_calibration_error(out["reliability"], items.n)
    return out


def reliability(items: ClassificationItems) -> list[dict[str, Any]]:
    """The reliability diagram's bins (:data:`ECE_BINS`, equal width): ``{low, high, count, accuracy,
    confidence}`` per bin (``accuracy``/``confidence`` None for an empty bin): the share of its items whose most
    probable class is the gold one, and their mean confidence (largest probability). Needs probabilities."""
    assert items.proba is not None
    conf = items.proba.max(axis=1)
    right = items.proba.argmax(axis=1) == items.y_true
    bins = ece_bin(conf)
    count = np.bincount(bins, minlength=ECE_BINS)
    hits = np.bincount(bins, weights=right.astype(float), minlength=ECE_BINS)
    total = np.bincount(bins, weights=conf, minlength=ECE_BINS)
    return [
        {
            "low": m / ECE_BINS,
            "high": (m + 1) / ECE_BINS,
            "count": int(count[m]),
            "accuracy": float(hits[m] / count[m]) if count[m] else None,
            "confidence": float(total[m] / count[m]) if count[m] else None,
        }
        for m in range(ECE_BINS)
    ]


def expected_calibration_error(bins: Sequence[Mapping[str, Any]], n: int) -> float:
    """ECE = Σ over bins of count/n · |accuracy − confidence| (Guo et al. 2017, eq. 3), from :func:`reliability`."""
    return float(sum(b["count"] / n * abs(b["accuracy"] - b["confidence"]) for b in bins if b["count"]))


def is_proportion(name: str) -> bool:
    """Whether the set-level metric ``name`` is a proportion of items (a count of successes over the items):
    classification ``accuracy`` (items whose predicted class is the gold one) and ranking ``hit@k`` (queries
    with a relevant item in the first k). Its interval is Wilson's; every other set-level metric's the
    bootstrap's."""
    return name == "accuracy" or name.startswith("hit@")


def _interval(value: float | None, replicates: np.ndarray[Any, Any] | None, confidence: float) -> dict[str, Any]:
    ci = percentile_interval(replicates, confidence) if replicates is not None and value is not None else None
    return {"value": value, "ci_low": ci[0] if ci else None, "ci_high": ci[1] if ci else None, "method": "bootstrap"}


def _proportion(successes: int, n: int, confidence: float) -> dict[str, Any]:
    """``{value, ci_low, ci_high, method: "wilson"}`` of ``successes / n`` (value and interval None when n = 0)."""
    ci = wilson_interval(successes, n, confidence)
    return {
        "value": successes / n if n else None,
        "ci_low": ci[0] if ci else None,
        "ci_high": ci[1] if ci else None,
        "method": "wilson",
    }


def classification_metrics(
    items: ClassificationItems, confidence: float = 0.95, n_resamples: int | None = None
) -> dict[str, Any]:
    """The set-level metrics of a classification evaluation (see the module docstring), JSON-ready.

    Returns:
        ``{"kind": "classification", "n", "headline": {name: {value, ci_low, ci_high, method}}, "method", "confidence",
        "classification": {"labels", "positive_label" (two classes) | None, "per_class": [{label, precision,
        recall, f1, support, *_ci_low/_ci_high}], "confusion_matrix": {labels, predicted, matrix} | None (more
        than :data:`MAX_CONFUSION_CLASSES` classes), "probabilities": {available, note}, "roc_auc_per_class",
        "pr_auc_per_class", "reliability": [bins] | None}}``. Values undefined (0/0) are None.
    """
    k = len(items.labels)
    curves = 0 if items.proba is None else (1 if k == 2 else k if k <= MAX_BOOTSTRAP_CURVES else 0)
    resamples = n_resamples or set_resamples(items.n, 1 + curves)
    values = classification_values(items)
    reps = classification_replicates(items, resamples)
    names = list(CLASSIFICATION_HEADLINE) + (list(PROBABILITY_HEADLINE) if items.proba is not None else [])
    headline = {name: _interval(values.get(name), reps.get(name), confidence) for name in names}
    headline["accuracy"] = _proportion(int((items.y_pred == items.y_true).sum()), items.n, confidence)
    per_class = []
    for i, row in enumerate(values["per_class"]):
        row = dict(row)
        for stat in ("precision", "recall", "f1"):
            ci = _interval(row[stat], reps[f"{stat}_per_class"][:, i], confidence)
            row[f"{stat}_ci_low"], row[f"{stat}_ci_high"] = ci["ci_low"], ci["ci_high"]
        per_class.append(row)
    k = len(items.labels)
    details: dict[str, Any] = {
        "labels": list(items.labels),
        "positive_label": items.labels[items.positive] if k == 2 else None,
        "per_class": per_class,
        "confusion_matrix": (
            {"labels": list(items.labels), "predicted": [*items.labels, NO_ANSWER_LABEL], "matrix": values["confusion"]}
            if k <= MAX_CONFUSION_CLASSES
            else None
        ),
        "no_class_predictions": int((items.y_pred == k).sum()),
        "probabilities": {"available": items.proba is not None, "note": items.proba_note},
        "roc_auc_per_class": values.get("roc_auc_per_class"),
        "pr_auc_per_class": values.get("pr_auc_per_class"),
        "reliability": values.get("reliability"),
    }
    return {
        "kind": "classification",
        "n": items.n,
        "confidence": confidence,
        "method": summary_method_text(resamples, confidence),
        "headline": headline,
        "classification": details,
    }


def classification_curves(items: ClassificationItems, max_points: int = MAX_CURVE_POINTS) -> dict[str, Any] | None:
    """ROC and precision-recall curves (``sklearn.metrics.roc_curve`` / ``precision_recall_curve``) of the
    positive class (two classes) or of each class against the rest, each thinned to at most ``max_points``
    points (evenly spaced along the curve, the ends kept): ``{"roc": [{label, auc, fpr, tpr}], "pr": [{label,
    ap, recall, precision, prevalence}]}``; None without probabilities."""
    if items.proba is None:
        return None
    skm = _skm()
    out: dict[str, list[dict[str, Any]]] = {"roc": [], "pr": []}
    for c in items.targets:
        positive = items.y_true == c
        if not positive.any() or positive.all():
            continue
        fpr, tpr, _ = skm.roc_curve(positive, items.proba[:, c])
        precision, recall, _ = skm.precision_recall_curve(positive, items.proba[:, c])
        keep = _thin(fpr.size, max_points)
        out["roc"].append(
            {
                "label": items.labels[c],
                "auc": float(skm.roc_auc_score(positive, items.proba[:, c])),
                "fpr": fpr[keep].tolist(),
                "tpr": tpr[keep].tolist(),
            }
        )
        keep = _thin(recall.size, max_points)
        out["pr"].append(
            {
                "label": items.labels[c],
                "ap": float(skm.average_precision_score(positive, items.proba[:, c])),
                "recall": recall[keep].tolist(),
                "precision": precision[keep].tolist(),
                "prevalence": float(positive.mean()),
            }
        )
    return out


def _thin(size: int, max_points: int) -> np.ndarray[Any, Any]:
    if size <= max_points:
        return np.arange(size)
    return np.unique(np.linspace(0, size - 1, max_points).round().astype(np.int64))


# ---------------------------------------------------------------- ranking


def ranking_keys(cutoffs: Sequence[int]) -> list[str]:
    """The per-query value names of the given cut-offs: ``rr`` and ``<family>@<k>`` for each family of
    :data:`uep_common.contract.configs.RANKING_AT_K` with ``ap`` for ``map``."""
    keys = ["rr"]
    for family in RANKING_AT_K:
        keys += [f"{'ap' if family == 'map' else family}@{k}" for k in cutoffs]
    return keys


def headline_name(key: str) -> str:
    """The set-level name of a per-query value: ``rr`` → ``mrr``, ``ap@10`` → ``map@10``, others as they are."""
    if key == "rr":
        return "mrr"
    return "map" + key[2:] if key.startswith("ap@") else key


def ranking_replicates(
    values: Mapping[str, np.ndarray[Any, Any]], n_resamples: int, seed: int = BOOTSTRAP_SEED
) -> dict[str, np.ndarray[Any, Any]]:
    """Bootstrap replicates of the mean of each per-query value (``values``: name → ``(n,)``), on the resamples
    of :func:`uep_common.analytics.stats.bootstrap_weights` ``(n, n_resamples, seed)``."""
    names = list(values)
    matrix = np.column_stack([np.asarray(values[k], dtype=float) for k in names])
    n = matrix.shape[0]
    parts = [w @ matrix / n for w in bootstrap_weights(n, n_resamples, seed)]
    reps = np.vstack(parts)
    return {name: reps[:, j] for j, name in enumerate(names)}


def ranking_set_metrics(
    values: Mapping[str, np.ndarray[Any, Any]], excluded: int, confidence: float = 0.95, n_resamples: int | None = None
) -> dict[str, Any]:
    """The set-level metrics of a ranking evaluation: the mean of each per-query value over the evaluated
    queries, named as :func:`headline_name` (``mrr``, ``ndcg@10``, ``map@10``…), with bootstrap intervals.

    Args:
        values: per-query value name (``rr``, ``ndcg@10``, ``ap@10``…) → ``(n,)`` values of the evaluated queries.
        excluded: queries left out because they have no relevant item.
        confidence: the two-sided level of every interval, in (0, 1).
        n_resamples: bootstrap resamples; None for :func:`~uep_common.analytics.stats.set_resamples` of the queries.

    Returns:
        ``{"kind": "ranking", "n", "headline", "method", "confidence", "ranking": {"evaluated", "excluded",
        "cutoffs", "curves": {family: [mean at each cut-off]}}}``.
    """
    n = len(next(iter(values.values()))) if values else 0
    cutoffs = sorted({int(key.split("@")[1]) for key in values if "@" in key})
    details: dict[str, Any] = {"evaluated": n, "excluded": excluded, "cutoffs": cutoffs, "curves": {}}
    if n == 0:
        return {
            "kind": "ranking",
            "n": 0,
            "confidence": confidence,
            "method": "no evaluated query",
            "headline": {},
            "ranking": details,
        }
    resamples = n_resamples or set_resamples(n)
    reps = ranking_replicates(values, resamples)
    headline = {
        headline_name(key): (
            _proportion(int(np.count_nonzero(values[key])), n, confidence)
            if is_proportion(headline_name(key))
            else _interval(float(np.mean(values[key])), reps[key], confidence)
        )
        for key in values
    }
    for family in RANKING_AT_K:
        details["curves"][family] = [headline.get(f"{family}@{k}", {}).get("value") for k in cutoffs]
    return {
        "kind": "ranking",
        "n": n,
        "confidence": confidence,
        "method": summary_method_text(resamples, confidence),
        "headline": headline,
        "ranking": details,
    }
