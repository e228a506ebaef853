"""Charts of reports and leaderboards, rendered by matplotlib as inline SVG strings.

Each function returns one ``<svg …>…</svg>`` element (no XML header, no DOCTYPE, no external reference:
text stays text, styled by the page's font stack), ready to be placed in an HTML page. Rendering is
deterministic (fixed ``svg.hashsalt``, no date metadata), so the same data give the same bytes and the
report artifacts are content-addressed stably. Thread-safe: figures are created with the object-oriented
API (no pyplot state) on the Agg/SVG backends.
"""

from __future__ import annotations

import hashlib
import io
import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

import matplotlib

matplotlib.use("Agg")
from matplotlib import dates as mdates
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from matplotlib.projections.polar import PolarAxes
    from matplotlib.typing import RcKeyType

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563", "#ca8a04")
_RC: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",
    "font.family": ["DejaVu Sans", "sans-serif"],
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def _to_svg(fig: Figure, title: str, data: object) -> str:
    # Element ids (clip paths, markers) derive from svg.hashsalt; a salt per chart content keeps the ids of
    # several charts on one page apart (matplotlib's ids can collide across figures otherwise, and a page
    # then clips one chart with another's clip path), while the same data still give the same bytes.
    salt = hashlib.sha256(repr((title, data)).encode()).hexdigest()[:16]
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Title": title}, bbox_inches="tight")
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", svg, count=1, flags=re.S)
    # Every id (and reference to it) gets a per-chart prefix: ids stay unique on a page with many charts.
    prefix = f"c{salt[:10]}-"
    svg = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}{m[1]}"', svg)
    svg = re.sub(r'((?:xlink:)?href)="#([^"]+)"', lambda m: f'{m[1]}="#{prefix}{m[2]}"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m[1]})", svg)
    # Scale with the page: keep the viewBox, let CSS set the size.
    svg = re.sub(r'<svg([^>]*?) width="[^"]+" height="[^"]+"', r'<svg\1 role="img" class="chart"', svg, count=1)
    return svg.replace("<svg", f'<svg aria-label="{_escape(title)}"', 1)


def _escape(s: str) -> str:
    return s.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def _empty(title: str, message: str) -> str:
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(6.0, 1.2))
        ax = fig.add_subplot()
        ax.axis("off")
        ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
        ax.text(0.0, 0.3, message, transform=ax.transAxes, color="#6b7280")
        return _to_svg(fig, title, message)


MIN_RADAR_AXES = 3
"""Fewer dimensions than this make a radar's polygon a line or a point: a grouped bar chart is drawn instead."""


def _check_profile(series: Mapping[str, Mapping[str, float]]) -> list[str]:
    for name, values in series.items():
        for d, v in values.items():
            if v is not None and not (0.0 <= v <= 1.0):
                raise ValueError(f"radar value of {name!r}/{d!r} must be in [0, 1], got {v}")
    return list(dict.fromkeys(d for values in series.values() for d in values))


def radar_figure(series: Mapping[str, Mapping[str, float]], title: str) -> Figure | None:
    """The matplotlib figure :func:`radar_svg` renders (None when there is no dimension); same arguments."""
    dims = _check_profile(series)
    if not dims:
        return None
    if len(dims) < MIN_RADAR_AXES:
        return _profile_bars_figure(series, dims, title)
    n = len(dims)
    angles = [2 * math.pi * i / n for i in range(n)]  # clockwise from the top (offset and direction below)
    fig = Figure(figsize=(5.4, 4.6 + 0.2 * len(series)))
    ax = cast("PolarAxes", fig.add_subplot(projection="polar"))
    ax.set_theta_offset(math.pi / 2)
    ax.set_theta_direction(-1)
    ax.set_ylim(0, 1)
    ax.set_yticks([0.25, 0.5, 0.75, 1.0], ["0.25", "0.5", "0.75", "1"], color="#6b7280", fontsize=7)
    ax.set_rlabel_position(180 / n)
    ax.set_xticks(angles, [d.replace("_", " ") for d in dims])
    ax.set_thetalim(0, 2 * math.pi)  # set_xticks must not shrink the circle to the ticks' range
    ax.tick_params(axis="x", pad=8)
    ax.grid(color="#d1d5db", linewidth=0.6)
    ax.spines["polar"].set_color("#d1d5db")
    for i, (name, values) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        vals = [values.get(d) for d in dims]
        ys = [float("nan") if v is None else float(v) for v in vals]
        xs = angles + angles[:1]
        ys_closed = ys + ys[:1]
        # the first series (e.g. this run) is drawn on top; the others dashed, so equal polygons stay visible
        z = 3 + len(series) - i
        ax.plot(
            xs,
            ys_closed,
            color=color,
            linewidth=1.8 if i == 0 else 1.5,
            linestyle="-" if i == 0 else (0, (4, 2)),
            label=name,
            marker="o",
            markersize=3.5,
            zorder=z,
        )
        if all(v is not None for v in vals):
            ax.fill(xs, ys_closed, color=color, alpha=0.12 if i == 0 else 0.06, zorder=z - 0.5)
    ax.set_title(title, fontsize=11, fontweight="bold", pad=18)
    # The legend goes in the figure's own bottom strip, below the axes and their bottom tick label (a
    # dimension drawn at six o'clock), never over them: the strip is reserved with subplots_adjust.
    strip = 0.06 + 0.045 * len(series)
    fig.subplots_adjust(bottom=strip + 0.08, top=0.86)
    fig.legend(*ax.get_legend_handles_labels(), loc="lower center", bbox_to_anchor=(0.5, 0.0), frameon=False, fontsize=8)
    return fig


def _profile_bars_figure(series: Mapping[str, Mapping[str, float]], dims: list[str], title: str) -> Figure:
    """Grouped horizontal bars: one group per dimension, one bar per series (first series on top)."""
    k = len(series)
    height = 0.8 / k
    fig = Figure(figsize=(5.4, 1.5 + len(dims) * (0.35 + 0.3 * k) + 0.2 * k))
    ax = fig.add_subplot()
    for i, (name, values) in enumerate(series.items()):
        ys = [len(dims) - 1 - j + 0.4 - height * (i + 0.5) for j in range(len(dims))]
        vals = [values.get(d) for d in dims]
        shown = [(y, v) for y, v in zip(ys, vals, strict=True) if v is not None]
        color = PALETTE[i % len(PALETTE)]
        ax.barh([y for y, _ in shown], [v for _, v in shown], height=height * 0.9, color=color, alpha=0.8, label=name)
        for y, v in shown:
            ax.text(min(v, 1.0) + 0.01, y, f"{v:.2f}", va="center", fontsize=7, color="#374151")
    ax.set_axisbelow(True)
    ax.set_yticks([len(dims) - 1 - j for j in range(len(dims))], [d.replace("_", " ") for d in dims])
    ax.set_xlim(0, 1.08)
    ax.set_ylim(-0.6, len(dims) - 0.4)
    ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.grid(axis="x", color="#e5e7eb", linewidth=0.6)
    ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), frameon=False, fontsize=8)
    return fig


def radar_svg(series: Mapping[str, Mapping[str, float]], title: str) -> str:
    """Radar (spider) chart of capability dimensions; a grouped bar chart below :data:`MIN_RADAR_AXES`.

    Args:
        series: series name (e.g. a model) → dimension → value in [0, 1]. Axes are the union of the
            dimensions in first-seen order; a dimension a series lacks is left out of its polygon (gap)
            or has no bar.
        title: chart title.

    Returns:
        An inline ``<svg>`` string: a radar with the legend below it for three or more dimensions; for one or
        two (a radar would degenerate into a line or a point) horizontal bars, one group per dimension and one
        bar per series; a note when there is no dimension.

    Raises:
        ValueError: a value outside [0, 1].
    """
    with matplotlib.rc_context(_RC):
        fig = radar_figure(series, title)
        if fig is None:
            return _empty(title, "no capability dimensions to draw")
        return _to_svg(fig, title, series)


def trend_svg(
    points: Sequence[tuple[datetime, float, float | None, float | None, str]],
    title: str,
    highlight: str | None = None,
    ylabel: str = "score",
) -> str:
    """Trend line of a score over time with its confidence band.

    Args:
        points: ``(time, value, ci_low, ci_high, label)`` per run, any order (sorted by time here); values
            in the score's unit (accuracy in [0, 1]); ``label`` annotates the point (e.g. the model version).
        title: chart title.
        highlight: the label of the point to mark (e.g. the evaluation being reported).
        ylabel: the value axis: the metric drawn (``accuracy``, ``NDCG@10``).

    Returns:
        An inline ``<svg>`` string (a note instead of a line when there is no point).
    """
    with matplotlib.rc_context(_RC):
        fig = trend_figure(points, title, highlight, ylabel)
        if fig is None:
            return _empty(title, "no completed run to draw")
        return _to_svg(fig, title, sorted(points, key=lambda p: p[0]))


TICK_FORMATS = ["%Y", "%b", "%b %d", "%H:%M", "%H:%M", "%H:%M:%S"]
"""Tick labels by the level the ticks differ at (years, months, days, hours, minutes, seconds): a time always
reads as ``HH:MM`` or ``HH:MM:SS`` (never a bare ``30`` for seconds), a day as ``Mar 05``; the offset
under the axis gives the date (UTC)."""
TICK_ZERO_FORMATS = ["", "%Y", "%b %d", "%b %d", "%H:%M", "%H:%M:%S"]
TICK_OFFSET_FORMATS = ["", "%Y", "%Y-%m", "%Y-%m-%d UTC", "%Y-%m-%d UTC", "%Y-%m-%d UTC"]


def trend_figure(
    points: Sequence[tuple[datetime, float, float | None, float | None, str]],
    title: str,
    highlight: str | None = None,
    ylabel: str = "score",
) -> Figure | None:
    """The matplotlib figure :func:`trend_svg` renders (None without points); same arguments. Time ticks:
    matplotlib's ``AutoDateLocator`` with a ``ConciseDateFormatter`` in UTC (:data:`TICK_FORMATS`)."""
    pts = sorted(points, key=lambda p: p[0])
    if not pts:
        return None
    fig = Figure(figsize=(7.2, 3.0))
    ax = fig.add_subplot()
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts]
    lo = [p[2] if p[2] is not None else p[1] for p in pts]
    hi = [p[3] if p[3] is not None else p[1] for p in pts]
    x_num = mdates.date2num(xs)  # type: ignore[no-untyped-call]  # matplotlib.dates is unannotated
    ax.fill_between(x_num, lo, hi, color=PALETTE[0], alpha=0.15, linewidth=0, label="95 % interval")
    ax.errorbar(
        x_num,
        ys,
        yerr=[[y - low for y, low in zip(ys, lo, strict=True)], [h - y for y, h in zip(ys, hi, strict=True)]],
        fmt="o-",
        color=PALETTE[0],
        ecolor=PALETTE[0],
        elinewidth=0.8,
        capsize=2.5,
        markersize=4,
        linewidth=1.6,
        label=ylabel,
    )
    for x, y, label in zip(x_num, ys, [p[4] for p in pts], strict=True):
        is_hl = highlight is not None and label == highlight
        ax.annotate(
            label,
            (x, y),
            textcoords="offset points",
            xytext=(0, 7),
            ha="center",
            fontsize=7,
            color="#111827" if is_hl else "#4b5563",
            fontweight="bold" if is_hl else "normal",
        )
        if is_hl:
            ax.plot([x], [y], "o", markersize=9, markerfacecolor="none", markeredgecolor=PALETTE[1], markeredgewidth=1.6)
    top = max(hi)
    ax.set_ylim(max(0.0, min(lo) - 0.1), min(1.05, top + 0.12) if top <= 1.0 else top * 1.1)
    if len(pts) == 1:
        ax.set_xlim(x_num[0] - 1, x_num[0] + 1)
    locator = mdates.AutoDateLocator(minticks=2, maxticks=6, tz=UTC)  # type: ignore[no-untyped-call]  # unannotated
    ax.xaxis.set_major_locator(locator)
    formatter = mdates.ConciseDateFormatter(  # type: ignore[no-untyped-call]  # unannotated
        locator, tz=UTC, formats=TICK_FORMATS, zero_formats=TICK_ZERO_FORMATS, offset_formats=TICK_OFFSET_FORMATS
    )
    ax.xaxis.set_major_formatter(formatter)
    ax.grid(axis="y", color="#e5e7eb", linewidth=0.6)
    ax.set_ylabel(ylabel)
    ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
    ax.legend(loc="lower right", frameon=False, fontsize=8)
    return fig


def bars_svg(rows: Sequence[tuple[str, float, float | None, float | None]], title: str, xlabel: str = "score") -> str:
    """Horizontal bars with interval whiskers, one row per category (in the given order).

    Args:
        rows: ``(label, value, ci_low, ci_high)``; values in [0, 1].
        title: chart title.
        xlabel: label of the value axis: the metric drawn (``accuracy``, ``NDCG@10``).
    """
    if not rows:
        return _empty(title, "nothing to draw")
    with matplotlib.rc_context(_RC):
        fig = Figure(figsize=(6.8, 0.8 + 0.24 * len(rows)))
        ax = fig.add_subplot()
        ys = list(range(len(rows)))[::-1]
        vals = [r[1] for r in rows]
        lo = [v - (r[2] if r[2] is not None else v) for v, r in zip(vals, rows, strict=True)]
        hi = [(r[3] if r[3] is not None else v) - v for v, r in zip(vals, rows, strict=True)]
        ax.set_axisbelow(True)
        ax.barh(ys, vals, color=PALETTE[0], alpha=0.75, height=0.65)
        ax.errorbar(vals, ys, xerr=[lo, hi], fmt="none", ecolor="#111827", elinewidth=0.8, capsize=2)
        ax.set_yticks(ys, [r[0].replace("_", " ") for r in rows], fontsize=8)
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.6, len(rows) - 0.4)
        ax.set_xlabel(xlabel)
        ax.grid(axis="x", color="#e5e7eb", linewidth=0.6)
        ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
        return _to_svg(fig, title, rows)


# ---------------------------------------------------------------- set-level metrics (classification, ranking)


def _short(label: str, width: int = 18) -> str:
    label = label.replace("_", " ")
    return label if len(label) <= width else label[: width - 1] + "…"


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
    with matplotlib.rc_context(_RC):
        return _to_svg(
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
    ax.set_xlim(-0.01, 1.01)
    ax.set_ylim(-0.01, 1.01)
    ax.set_aspect("equal")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.grid(color="#e5e7eb", linewidth=0.6)
    ax.legend(loc="lower right", frameon=False, fontsize=7)
    ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
    return fig


def roc_svg(curves: Sequence[tuple[str, float, Sequence[float], Sequence[float]]], title: str) -> str:
    """ROC curves (true positive rate against false positive rate) with the chance diagonal.

    Args:
        curves: ``(label, auc, fpr, tpr)`` per class (one-vs-rest) or for the positive class.
        title: chart title.
    """
    if not curves:
        return _empty(title, "no ROC curve: no probabilities, or a class without positive or negative items")
    with matplotlib.rc_context(_RC):
        return _to_svg(roc_figure(curves, title), title, curves)


def pr_figure(curves: Sequence[tuple[str, float, Sequence[float], Sequence[float], float]], title: str) -> Figure:
    """The matplotlib figure :func:`pr_svg` renders; same arguments."""
    fig = Figure(figsize=(4.6, 4.2))
    ax = fig.add_subplot()
    for i, (label, ap, recall, precision, prevalence) in enumerate(curves):
        color = PALETTE[i % len(PALETTE)]
        ax.plot(recall, precision, color=color, linewidth=1.6, drawstyle="steps-post", label=f"{_short(label)} (AP {ap:.3f})")
        ax.axhline(prevalence, color=color, linestyle=(0, (2, 3)), linewidth=0.8, alpha=0.8)
    ax.set_xlim(-0.01, 1.01)
    ax.set_ylim(-0.01, 1.05)
    ax.set_aspect("equal")
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.grid(color="#e5e7eb", linewidth=0.6)
    ax.legend(loc="lower left", frameon=False, fontsize=7)
    ax.set_title(title, loc="left", fontsize=11, fontweight="bold")
    return fig


def pr_svg(curves: Sequence[tuple[str, float, Sequence[float], Sequence[float], float]], title: str) -> str:
    """Precision-recall curves (step-wise, as average precision sums them), each with its class's prevalence
    (the precision of a random ranking) dotted.

    Args:
        curves: ``(label, average precision, recall, precision, prevalence)`` per class or the positive class.
        title: chart title.
    """
    if not curves:
        return _empty(title, "no precision-recall curve: no probabilities, or a class without positive items")
    with matplotlib.rc_context(_RC):
        return _to_svg(pr_figure(curves, title), title, curves)


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
        return _empty(title, "no reliability diagram: no probabilities")
    with matplotlib.rc_context(_RC):
        return _to_svg(reliability_figure(bins, title), title, list(bins))


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
        return _empty(title, "no ranking query was evaluated")
    with matplotlib.rc_context(_RC):
        return _to_svg(at_k_figure(cutoffs, series, title), title, (list(cutoffs), dict(series)))
