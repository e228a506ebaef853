"""Classification: a per-item label match and a set-level report (scikit-learn).

Per item, ``label_match`` gives each output a verdict: a classifier's predicted label, or the class name an
LLM's answer names (:func:`find_label`), or else its stripped output, equals the reference label (optionally
ignoring case). Over a set, :func:`classification_report` computes accuracy,
precision/recall/F1 (micro, macro, weighted, per class, and for one positive label), the confusion
matrix and ROC-AUC with ``sklearn.metrics`` (source: scikit-learn's ``accuracy_score``,
``precision_recall_fscore_support``, ``confusion_matrix`` and ``roc_auc_score``; definitions as in
its user guide, section "Classification metrics").

Undefined values. A ratio whose denominator is zero (precision of a label never predicted, recall of a
label absent from ``y_true``, ROC-AUC when ``y_true`` holds only one class) is reported as ``None``,
never as a silent 0. Precision/recall/F1 use ``zero_division=np.nan`` and NaN becomes ``None``; with
that setting scikit-learn *excludes* undefined per-class values from the macro and weighted averages
(its documented behaviour) and emits no ``UndefinedMetricWarning``. ROC-AUC is only computed when both
classes are present, so that warning is never triggered either (no global warning filters are
touched, which would not be thread-safe).
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .base import NO_ANSWER, MetricInputError, MetricResult, binary_result, extraction_label

if TYPE_CHECKING:
    from uep_common.contract.events import Prediction


def _skm() -> Any:
    """``sklearn.metrics``, imported on first use (scikit-learn takes ~2 s to import; per-item scoring and
    every scorer start-up would otherwise pay it)."""
    import sklearn.metrics

    return sklearn.metrics


def _num(value: Any) -> float | None:
    """Python float, or None for NaN (an undefined 0/0)."""
    value = float(value)
    return None if math.isnan(value) else value


def _native(value: Any) -> Any:
    """A NumPy scalar as the Python scalar, so the report is JSON-serialisable; any other value as given."""
    return value.item() if isinstance(value, np.generic) else value


def _prf(y_true: list[Any], y_pred: list[Any], labels: list[Any], average: str | None) -> tuple[Any, ...]:
    result: tuple[Any, ...] = _skm().precision_recall_fscore_support(
        y_true, y_pred, labels=labels, average=average, zero_division=np.nan
    )
    return result


def _binary_auc(is_positive: np.ndarray[Any, Any], scores: np.ndarray[Any, Any]) -> float | None:
    if is_positive.all() or not is_positive.any():
        return None  # only one class present in y_true: ROC-AUC undefined
    return float(_skm().roc_auc_score(is_positive.astype(int), scores))


def _roc_auc(y_true: list[Any], labels: list[Any], positive: Any, y_score: Any) -> dict[str, Any]:
    scores = np.asarray(y_score, dtype=float)
    if scores.shape[:1] != (len(y_true),):
        raise ValueError(f"y_score must have one row per item ({len(y_true)}), got shape {scores.shape}")
    if not np.isfinite(scores).all():
        raise ValueError("y_score must be finite")
    truth = np.asarray([_native(t) for t in y_true], dtype=object)
    if scores.ndim == 1:
        if positive is None:
            if len(labels) != 2:
                raise ValueError("1-D y_score needs positive_label (or exactly two labels)")
            positive = labels[1]  # scikit-learn's convention: the greater label is the positive class
        auc = _binary_auc(truth == positive, scores)
        out: dict[str, Any] = {"roc_auc": auc, "roc_auc_average": "binary", "roc_auc_positive_label": _native(positive)}
        if auc is None:
            out["roc_auc_undefined"] = "only one class present in y_true"
        return out
    if scores.ndim != 2 or scores.shape[1] != len(labels):
        raise ValueError(f"2-D y_score must have one column per label ({len(labels)}), got shape {scores.shape}")
    per_class = [_binary_auc(truth == label, scores[:, j]) for j, label in enumerate(labels)]
    undefined = [_native(label) for label, auc in zip(labels, per_class, strict=True) if auc is None]
    out = {
        "roc_auc": None if undefined else float(np.mean([auc for auc in per_class if auc is not None])),
        "roc_auc_average": "ovr_macro",
        "roc_auc_per_class": [{"label": _native(lb), "roc_auc": auc} for lb, auc in zip(labels, per_class, strict=True)],
    }
    if undefined:
        out["roc_auc_undefined"] = f"labels with no positive or no negative item in y_true: {undefined}"
    return out


def classification_report(
    y_true: Sequence[Hashable],
    y_pred: Sequence[Hashable],
    labels: Sequence[Hashable] | None = None,
    positive_label: Hashable | None = None,
    y_score: Sequence[float] | Sequence[Sequence[float]] | None = None,
) -> dict[str, Any]:
    """Set-level classification metrics, each undefined (0/0) value reported as ``None``.

    Args:
        y_true: gold labels, one per item (strings or ints; map a missing prediction to a sentinel such
            as ``"<no_answer>"`` in ``y_pred`` rather than ``None``).
        y_pred: predicted labels, same length as ``y_true``.
        labels: the label order used for per-class values, averages and the confusion matrix. Default:
            the sorted union of ``y_true``, ``y_pred`` and ``positive_label``. As in scikit-learn, values
            outside an explicit ``labels`` still count in ``accuracy`` but in no class row or cell.
        positive_label: when given, ``report["binary"]`` holds precision/recall/F1/support of that
            label (for two labels this is scikit-learn's ``average="binary"``; for more it is that
            label against the rest). It must be one of ``labels``.
        y_score: optional scores for ROC-AUC. 1-D: the score of the positive class per item (binary
            ROC-AUC; positive = ``positive_label``, or ``labels[1]`` when there are exactly two labels).
            2-D ``(n_items, len(labels))``, columns in label order: one-vs-rest macro ROC-AUC (mean of the
            per-label binary AUCs; ``None`` if any label's AUC is undefined). Scores need not be
            probabilities.

    Returns:
        ``{"n": int, "labels": [...], "accuracy": float, "micro"|"macro"|"weighted": {"precision",
        "recall", "f1"}, "per_class": [{"label", "precision", "recall", "f1", "support"}, ...],
        "binary": {"positive_label", "precision", "recall", "f1", "support"} | None,
        "confusion_matrix": {"labels": [...], "matrix": [[int]]}}`` (rows = true label, columns =
        predicted, both in ``labels`` order), plus ``roc_auc``, ``roc_auc_average`` and, as applicable,
        ``roc_auc_positive_label``, ``roc_auc_per_class``, ``roc_auc_undefined`` when ``y_score`` is
        given. Every float is a Python float or ``None`` (undefined).

    Raises:
        ValueError: empty input, length mismatch, duplicate or unorderable labels, a ``positive_label``
            not among ``labels``, a badly shaped or non-finite ``y_score``.

    Example: ``classification_report([1, 0, 1], [0, 0, 0], positive_label=1)["binary"]`` ->
    ``{"positive_label": 1, "precision": None, "recall": 0.0, "f1": 0.0, "support": 2}``.
    """
    y_true, y_pred = [_native(v) for v in y_true], [_native(v) for v in y_pred]
    if not y_true:
        raise ValueError("y_true is empty")
    if len(y_true) != len(y_pred):
        raise ValueError(f"y_true and y_pred differ in length: {len(y_true)} vs {len(y_pred)}")
    positive_label = _native(positive_label)
    if labels is None:
        extra: set[Any] = set() if positive_label is None else {positive_label}
        try:
            labels = sorted(set[Any](y_true) | set[Any](y_pred) | extra)
        except TypeError as exc:
            raise ValueError(f"labels are not mutually orderable; pass labels= explicitly ({exc})") from exc
    else:
        labels = [_native(v) for v in labels]
        if not labels or len(set(labels)) != len(labels):
            raise ValueError(f"labels must be non-empty and distinct, got {labels!r}")
    if positive_label is not None and positive_label not in labels:
        raise ValueError(f"positive_label {positive_label!r} is not one of labels {labels!r}")

    report: dict[str, Any] = {
        "n": len(y_true),
        "labels": list(labels),
        "accuracy": float(_skm().accuracy_score(y_true, y_pred)),
    }
    for average in ("micro", "macro", "weighted"):
        p, r, f, _ = _prf(y_true, y_pred, labels, average)
        report[average] = {"precision": _num(p), "recall": _num(r), "f1": _num(f)}
    p, r, f, s = _prf(y_true, y_pred, labels, None)
    report["per_class"] = [
        {"label": label, "precision": _num(p[i]), "recall": _num(r[i]), "f1": _num(f[i]), "support": int(s[i])}
        for i, label in enumerate(labels)
    ]
    report["binary"] = None
    if positive_label is not None:
        row = report["per_class"][labels.index(positive_label)]
        report["binary"] = {"positive_label": positive_label, **{k: row[k] for k in ("precision", "recall", "f1", "support")}}
    matrix = _skm().confusion_matrix(y_true, y_pred, labels=labels)
    report["confusion_matrix"] = {"labels": list(labels), "matrix": matrix.tolist()}
    if y_score is not None:
        report.update(_roc_auc(y_true, labels, positive_label, y_score))
    return report


LABEL_REFERENCE: dict[str, Any] = {
    "type": "object",
    "properties": {"label": {"type": ["string", "integer"], "minLength": 1}},
    "required": ["label"],
}
"""The reference of ``label_match``: ``{"label": "<class name>"}`` (an integer label is compared as text)."""

_EDGE = " \t\r\n\"'`.,;:!?()[]{}<>*_"
"""Characters stripped from both ends of an output before it is compared with the class names as a whole."""


def find_label(output: str, labels: Sequence[str]) -> tuple[str | None, str]:
    """The class name an LLM's ``output`` answers, and how it was found.

    Rule: (1) the output, stripped of whitespace, quotes, brackets and punctuation at its ends (:data:`_EDGE`),
    equals a class name (case-insensitively) → ``"exact"``; (2) else every class name is searched as a whole
    word (not inside a longer word; case-insensitively, except one-character names such as ``A`` or ``1``,
    matched case-sensitively so that the article "a" is not read as class ``A``), and the name whose last
    occurrence ends latest wins (an answer usually ends with its conclusion: "not positive, but negative"),
    the longer name on a tie ("very positive" over "positive") → ``"found"``; (3) else ``(None,
    "no_answer")``.

    Example: ``find_label("The answer is (B).", ["A", "B", "C", "D"])`` -> ``("B", "found")``.
    """
    text = output or ""
    bare = text.strip(_EDGE).casefold()
    for label in labels:
        if bare == label.strip().casefold():
            return label, "exact"
    best: tuple[int, int] | None = None
    found: str | None = None
    for label in labels:
        name = label.strip()
        if not name:
            continue
        flags = 0 if len(name) == 1 else re.IGNORECASE
        ends = [m.end() for m in re.finditer(rf"(?<!\w){re.escape(name)}(?!\w)", text, flags)]
        if ends:
            key = (ends[-1], len(name))
            if best is None or key > best:
                best, found = key, label
    return (found, "found") if found is not None else (None, NO_ANSWER)


class LabelMatch:
    """``label_match``: the predicted label equals the reference label.

    The predicted label is, in order: a classifier's ``prediction.label`` (else the arg-max of its
    ``prediction.probabilities``); for an LLM (no prediction), the class name its text answers when the
    benchmark lists class names (param ``labels``; :func:`find_label`), else the stripped output itself.

    Reference: ``{"label": "positive"}`` (:data:`LABEL_REFERENCE`; compared as ``str(label).strip()``). Params:
    ``{"ignore_case": False, "labels": [...]}``. Result: binary verdict; ``extracted`` = the predicted label
    (``None`` when there is none); ``prediction`` = ``{"label": ...}`` (with the model's probabilities when it
    gave them); ``details``: ``reference``, ``ignore_case``, ``extraction`` (``"prediction"``, ``"exact"``,
    ``"found"``, ``"ok"`` or ``"no_answer"``). Set-level precision/recall/F1/confusion, ROC and calibration are
    computed over the items' predictions by ``uep_common.analytics.set_metrics`` (the evaluation summary).

    Raises:
        MetricInputError: missing or empty ``label`` in the reference, a non-boolean ``ignore_case``, or
            ``labels`` not a list of strings.
    """

    name = "label_match"
    version = "1"
    params = {
        "ignore_case": "compare labels case-insensitively (str.casefold), a boolean (default false)",
        "labels": "the class names, e.g. ['negative', 'positive']: an LLM's answer is read as the one it names "
        "(default: the benchmark's class_names; none = the whole output is the label)",
    }
    param_types = {"ignore_case": "bool", "labels": "string_list"}
    required_params: tuple[str, ...] = ()
    reference_schema: dict[str, Any] = LABEL_REFERENCE
    source = "exact label match (accuracy); set-level report with scikit-learn sklearn.metrics"

    def score(self, output: str, reference: dict[str, Any], params: dict[str, Any]) -> MetricResult:
        """Score one model output (an LLM's text); see the class docstring for shapes."""
        return self.score_prediction(None, output, reference, params)

    def score_prediction(
        self, prediction: Prediction | None, output: str, reference: dict[str, Any], params: dict[str, Any]
    ) -> MetricResult:
        """Score a classifier's ``prediction`` (None: read the label from ``output``); see the class docstring."""
        if "label" not in reference:
            raise MetricInputError("label_match reference needs a 'label' key, e.g. {'label': 'positive'}")
        ignore_case = params.get("ignore_case", False)
        if not isinstance(ignore_case, bool):
            raise MetricInputError(f"ignore_case must be a boolean, got {ignore_case!r}")
        labels = params.get("labels") or []
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise MetricInputError(f"labels must be a list of strings, got {labels!r}")
        expected = str(reference["label"]).strip()
        if not expected:
            raise MetricInputError("label_match reference label is empty")
        probabilities = None
        if prediction is not None and (prediction.label is not None or prediction.probabilities):
            probabilities = prediction.probabilities
            got: str | None = prediction.label
            if got is None and probabilities:
                got = max(probabilities, key=probabilities.__getitem__)
            how = "prediction"
        elif labels:
            got, how = find_label(output or "", labels)
        else:
            got = (output or "").strip() or None
            how = extraction_label(got is not None)
        got = got.strip() if got is not None else None
        if got is None:
            correct = False
        elif ignore_case:
            correct = got.casefold() == expected.casefold()
        else:
            correct = got == expected
        details = {"reference": expected, "ignore_case": ignore_case, "extraction": how if got is not None else NO_ANSWER}
        structured: dict[str, Any] | None = None
        if got is not None:
            structured = {"label": got}
            if probabilities:
                structured["probabilities"] = dict(probabilities)
        return binary_result(self, correct=correct, extracted=got, details=details, prediction=structured)
