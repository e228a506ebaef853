"""Charts of the set-level metrics of a report (classification, calibration, ranking), rendered as inline SVG
strings by :func:`uep_common.analytics.charts.to_svg` (the same determinism and page rules as the other charts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import matplotlib
from matplotlib.figure import Figure

from uep_common.analytics.charts import PALETTE, RC, empty_svg, to_svg

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def _short(label: str, width: int = 18) -> str:
    label = label.replace("_", " ")
    return label if len(label) <= width else label[: width - 1] + "…"


def _unit_square(
    ax: Axes, xlabel: str, ylabel: str, top: float, legend: Literal["lower right", "lower left"], title: str
) -> None:
    """Lay out a curve chart over the unit square (x from 0 to 1, y up to ``top``, equal scales), with its
    labels, grid, legend at ``legend`` and title."""
    ax.set_xlim(-0.01, 1.01)
    ax.set_ylim(-0.01, top)
    ax.set_aspect("equal")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(color="#e5e7eb", linewidth=0.6)
    ax.legend(loc=legend, frameon=False, fontsize=7)
    ax.set_title(title, loc="left", fontsize=11, fontweight="bold")


def confusion_figure(
    true_labels: Sequence[str], predicted_labels: Sequence[str], matrix: Sequence[Sequence[int]], title: str
) -> Figure:
    """The matplotlib figure :func:`confusion_svg` renders; same arguments."""
    counts = [[int(v) for v in row] for row in matrix]
    rows, cols = len(counts), len(predicted_labels)
    share = [[v / (sum(row) or 1) for v in row] for row in counts]
    size = max(3.2, min(9.0, 1.2 + 0.48 * cols))
    fig = Figure(figsize=(size + 1.2, max(2.6, min(9.0, 1.2 + 0.42 * rows))))
    ax = fig.add_subplot()
    image = ax.imshow(share, cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
    if rows * cols <= 400:
        for i, row in enumerate(counts):
            for j, v in enumerate(row):
                ax.text(
                    j, i, f"{v:,}", ha="center", va="center", fontsize=8 if cols <= 8 else 6,
                    color="white" if share[i][j] > 0.55 else "#111827",
                )  # fmt: skip
    ax.set_xticks(
        range(cols),
        [_short(x, 16) for x in predicted_labels],  # 16: "social sciences" (mmlu-topic) whole
        rotation=30 if cols > 4 else 0,
        ha="right" if cols > 4 else "center",
    )
    ax.set_yticks(range(rows), [_short(x, 18) for x in true_labels])
    ax.set_xlabel("predicted class")
    ax.set_ylabel("gold class")
    ax.spines[:].set_visible(False)
    ax.tick_params(length=0)
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.03)
    bar.set_label("share of the gold class's items", fontsize=8)
    bar.ax.tick_params(labelsize=7)
    ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
    return fig


def confusion_svg(
    true_labels: Sequence[str], predicted_labels: Sequence[str], matrix: Sequence[Sequence[int]], title: str
) -> str:
    """Confusion matrix heat map: one row per gold class, one column per predicted class (the last may be "no
    answer"); each cell shows its count, coloured by its share of the row (the gold class's recall on the
    diagonal).

    Args:
        true_labels: row names (len = rows of ``matrix``).
        predicted_labels: column names (len = columns of ``matrix``).
        matrix: counts, rows = gold class, columns = predicted class.
        title: chart title.
    """
    with matplotlib.rc_context(RC):
        return to_svg(
            confusion_figure(true_labels, predicted_labels, matrix, title), title, (true_labels, predicted_labels, matrix)
        )


def roc_figure(curves: Sequence[tuple[str, float, Sequence[float], Sequence[float]]], title: str) -> Figure:
    """The matplotlib figure :func:`roc_svg` renders; same arguments."""
    fig = Figure(figsize=(4.6, 4.2))
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], color="#9ca3af", linestyle=(0, (4, 3)), linewidth=0.9, label="chance (AUC 0.5)")
    for i, (label, auc, fpr, tpr) in enumerate(curves):
        ax.plot(
            fpr,
            tpr,
            color=PALETTE[i % len(PALETTE)],
            linewidth=1.6,
            label=f"{_short(label)} (AUC {auc:.3f})",
            drawstyle="default",
        )
    _unit_square(ax, "false positive rate", "true positive rate", 1.01, "lower right", title)
    return fig


def roc_svg(curves: Sequence[tuple[str, float, Sequence[float], Sequence[float]]], title: str) -> str:
    """ROC curves (true positive rate against false positive rate) with the chance diagonal.

    Args:
        curves: ``(label, auc, fpr, tpr)`` per class (one-vs-rest) or for the positive class.
        title: chart title.
    """
    if not curves:
        return empty_svg(title, "no ROC curve: no probabilities, or a class without positive or negative items")
    with matplotlib.rc_context(RC):
        return to_svg(roc_figure(curves, title), title, curves)


def pr_figure(curves: Sequence[tuple[str, float, Sequence[float], Sequence[float], float]], title: str) -> Figure:
    """The matplotlib figure :func:`pr_svg` renders; same arguments."""
    fig = Figure(figsize=(4.6, 4.2))
    ax = fig.add_subplot()
    for i, (label, ap, recall, precision, prevalence) in enumerate(curves):
        color = PALETTE[i % len(PALETTE)]
        ax.plot(recall, precision, color=color, linewidth=1.6, drawstyle="steps-post", label=f"{_short(label)} (AP {ap:.3f})")
        ax.axhline(prevalence, color=color, linestyle=(0, (2, 3)), linewidth=0.8, alpha=0.8)
    _unit_square(ax, "recall", "precision", 1.05, "lower left", title)
    return fig


def pr_svg(curves: Sequence[tuple[str, float, Sequence[float], Sequence[float], float]], title: str) -> str:
    """Precision-recall curves (step-wise, as average precision sums them), each with its class's prevalence
    (the precision of a random ranking) dotted.

    Args:
        curves: ``(label, average precision, recall, precision, prevalence)`` per class or the positive class.
        title: chart title.
    """
    if not curves:
        return empty_svg(title, "no precision-recall curve: no probabilities, or a class without positive items")
    with matplotlib.rc_context(RC):
        return to_svg(pr_figure(curves, title), title, curves)


def reliability_figure(bins: Sequence[Mapping[str, Any]], title: str) -> Figure:
    """The matplotlib figure :func:`reliability_svg` renders; same arguments."""
    fig = Figure(figsize=(4.6, 4.6))
    grid = fig.add_gridspec(2, 1, height_ratios=[3.2, 1.0], hspace=0.08)
    ax = fig.add_subplot(grid[0])
    hist = fig.add_subplot(grid[1], sharex=ax)
    width = bins[0]["high"] - bins[0]["low"] if bins else 1 / 15
    centers = [(b["low"] + b["high"]) / 2 for b in bins]
    full = [(c, b) for c, b in zip(centers, bins, strict=True) if b["count"]]
    ax.plot([0, 1], [0, 1], color="#9ca3af", linestyle=(0, (4, 3)), linewidth=0.9, label="perfect calibration")
    ax.bar(
        [c for c, _ in full], [b["accuracy"] for _, b in full], width=width * 0.92, color=PALETTE[0], alpha=0.75, label="accuracy"
    )
    ax.vlines(
        [c for c, _ in full], [b["accuracy"] for _, b in full], [b["confidence"] for _, b in full],
        color=PALETTE[1], linewidth=1.2, label="gap to mean confidence",
    )  # fmt: skip
    ax.plot(
        [c for c, _ in full], [b["confidence"] for _, b in full], "D", color=PALETTE[1], markersize=3.5, label="mean confidence"
    )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy in bin")
    ax.grid(color="#e5e7eb", linewidth=0.6)
    ax.legend(loc="upper left", frameon=False, fontsize=7)
    ax.tick_params(labelbottom=False)
    ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
    hist.bar(centers, [b["count"] for b in bins], width=width * 0.92, color="#6b7280", alpha=0.7)
    hist.set_xlabel("confidence (largest probability)")
    hist.set_ylabel("items")
    hist.grid(axis="y", color="#e5e7eb", linewidth=0.6)
    return fig


def reliability_svg(bins: Sequence[Mapping[str, Any]], title: str) -> str:
    """Reliability diagram (Guo et al. 2017, fig. 1): per confidence bin, the accuracy (bars) against the
    diagonal of perfect calibration, the bin's mean confidence marked and its gap to the accuracy drawn; below,
    the items per bin.

    Args:
        bins: ``{low, high, count, accuracy, confidence}`` per equal-width bin (``uep_common.analytics.set_metrics.reliability``).
        title: chart title.
    """
    if not any(b["count"] for b in bins):
        return empty_svg(title, "no reliability diagram: no probabilities")
    with matplotlib.rc_context(RC):
        return to_svg(reliability_figure(bins, title), title, list(bins))


def at_k_figure(cutoffs: Sequence[int], series: Mapping[str, Sequence[float | None]], title: str) -> Figure:
    """The matplotlib figure :func:`at_k_svg` renders; same arguments."""
    fig = Figure(figsize=(5.6, 3.4))
    ax = fig.add_subplot()
    for i, (name, values) in enumerate(series.items()):
        pts = [(k, v) for k, v in zip(cutoffs, values, strict=True) if v is not None]
        if not pts:
            continue
        ax.plot(
            [k for k, _ in pts],
            [v for _, v in pts],
            marker="o",
            markersize=4,
            linewidth=1.6,
            color=PALETTE[i % len(PALETTE)],
            label=name,
        )
    ax.set_xscale("log")
    ax.set_xticks(list(cutoffs), [str(k) for k in cutoffs])
    ax.minorticks_off()
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("cut-off k")
    ax.set_ylabel("mean over queries")
    ax.grid(color="#e5e7eb", linewidth=0.6)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False, fontsize=8)
    ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
    return fig


def at_k_svg(cutoffs: Sequence[int], series: Mapping[str, Sequence[float | None]], title: str) -> str:
    """Ranking metrics against the cut-off k (log-scaled axis at the cut-offs), one line per metric.

    Args:
        cutoffs: the k values, increasing.
        series: metric name (e.g. ``NDCG@k``) → its mean at each cut-off (None: not measured there).
        title: chart title.
    """
    if not cutoffs or not any(v is not None for values in series.values() for v in values):
        return empty_svg(title, "no ranking query was evaluated")
    with matplotlib.rc_context(RC):
        return to_svg(at_k_figure(cutoffs, series, title), title, (list(cutoffs), dict(series)))
