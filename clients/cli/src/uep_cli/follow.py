"""Following evaluations until they end, and gating on their score.

:func:`follow` polls ``GET /v1/evaluations/{id}`` of each evaluation (every ``interval`` seconds) and draws one
rich progress bar per evaluation: items done / total, items/s, ETA, errors and, where the gateway gives it,
the accuracy so far with its 95 % Wilson interval. It returns the final views when every one has ended.

:func:`gate` decides the ``--fail-under`` check: an evaluation passes when the bound it is judged on — the
lower end of the 95 % interval by default (``on="lower"``), else the point estimate — is at least the
threshold; no score at all fails.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from uep_cli.api import Api
from uep_cli.figures import figure, headline, interval

ENDED = frozenset({"completed", "failed", "cancelled", "stopped", "budget_exhausted"})
"""Statuses after which an evaluation changes no more (``uep_common.records.lifecycle.TERMINAL`` on the server)."""


def score_of(view: dict[str, Any]) -> tuple[float | None, float | None, float | None, str]:
    """(point, ci_low, ci_high, name) of an evaluation view: its headline (:func:`uep_cli.figures.headline`: the
    gateway's ``headline`` with the interval every view shows; else the summary's accuracy with its Wilson
    interval), else the primary graded metric's mean (no interval), else the live accuracy of ``progress``."""
    from uep_cli.figures import headline

    h = headline(view)
    if h.get("value") is not None:
        return h["value"], h.get("ci_low"), h.get("ci_high"), str(h["metric"])
    s = view.get("summary") or {}
    means = s.get("metric_means") or {}
    name = s.get("metric_name")
    if name and means.get(name) is not None:
        return means[name], None, None, name
    return None, None, None, "score"


@dataclass(frozen=True)
class Verdict:
    """The outcome of a ``--fail-under`` check for one evaluation."""

    evaluation_id: str
    passed: bool
    value: float | None
    reason: str


def gate(view: dict[str, Any], threshold: float, on: str = "lower") -> Verdict:
    """Check ``view`` (a final evaluation view) against ``threshold`` on the ``on`` bound (``lower`` | ``point``).

    A graded metric has no interval: its mean is used for both. No score (nothing scored) fails.
    """
    point, low, _high, name = score_of(view)
    value: float | None
    if on == "lower" and low is not None:
        value, which = low, "95 % lower bound"
    else:
        value, which = point, "point estimate"
    if value is None:
        return Verdict(str(view["id"]), False, None, f"no {name} to check against {threshold}")
    ok = value >= threshold
    return Verdict(str(view["id"]), ok, value, f"{name} {which} {value:.4f} {'≥' if ok else '<'} {threshold}")


def follow(api: Api, ids: list[str], interval: float = 1.0, quiet: bool = False) -> list[dict[str, Any]]:
    """Poll until every evaluation in ``ids`` has ended; the final views, in the order of ``ids``.

    ``quiet``: no progress bars (for ``--json``). Ctrl-C stops following (the evaluations go on) by raising
    ``KeyboardInterrupt`` to the caller.
    """
    views = {i: api.get(f"/v1/evaluations/{i}") for i in ids}
    if quiet:
        while not all(v["status"] in ENDED for v in views.values()):
            time.sleep(interval)
            views = {i: (v if v["status"] in ENDED else api.get(f"/v1/evaluations/{i}")) for i, v in views.items()}
        return [views[i] for i in ids]

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    from rich.table import Column

    labels = {i: _label(v) for i, v in views.items()}
    # the labels and the done/total counts are never cut (the bar and the other columns shrink first); labels and
    # scores are data, not rich markup: an arm's "[name]" would otherwise be taken for a style tag and vanish
    label_column = Column(no_wrap=True, min_width=max(len(label) for label in labels.values()))
    columns = (
        TextColumn("{task.description}", markup=False, table_column=label_column),
        BarColumn(),
        MofNCompleteColumn(table_column=Column(no_wrap=True)),
        TextColumn("{task.fields[rate]}"),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[score]}", markup=False),
        TextColumn("{task.fields[errors]}"),
        TextColumn("{task.fields[status]}"),
    )
    started = {i: (time.monotonic(), views[i]["progress"]["completed"]) for i in ids}
    with Progress(*columns, transient=False) as bars:
        tasks = {
            i: bars.add_task(labels[i], total=v["progress"]["total"] or None, rate="", score="", errors="", status="")
            for i, v in views.items()
        }
        while True:
            for i, v in views.items():
                p = v["progress"]
                t0, c0 = started[i]
                elapsed = time.monotonic() - t0
                rate = (p["completed"] - c0) / elapsed if elapsed > 0 and p["completed"] > c0 else None
                bars.update(
                    tasks[i],
                    completed=p["completed"],
                    rate=f"{rate:.1f} items/s" if rate else "– items/s",
                    score=_bar_score(v),
                    errors=f"errors {p['errors']}" if p["errors"] else "",
                    status=v["status"],
                )
            if all(v["status"] in ENDED for v in views.values()):
                break
            time.sleep(interval)
            views = {i: (v if v["status"] in ENDED else api.get(f"/v1/evaluations/{i}")) for i, v in views.items()}
    return [views[i] for i in ids]


def _label(view: dict[str, Any]) -> str:
    """A progress bar's label: ``benchmark × model``, then ``[arm]`` for an arm of an A/B experiment (whatever its
    name) or an arm other than ``main``."""
    arm = f" [{view['arm']}]" if view.get("arm") and (view.get("experiment_id") or view["arm"] != "main") else ""
    return f"{view['benchmark'].get('slug', '?')} × {view['model'].get('name', '?')}{arm}"


def _bar_score(view: dict[str, Any]) -> str:
    """The headline in a progress bar, short enough for 80 columns: ``66.7 % [30.0–90.3]`` (the figure and its
    interval as :mod:`uep_cli.figures` writes them; the summary line printed at the end names the metric and
    the interval's method)."""
    h = headline(view)
    proportion = bool(h.get("proportion"))
    value = figure(h.get("value"), proportion)
    ci = interval(h.get("ci_low"), h.get("ci_high"), proportion)
    return f"{value} {ci}".strip()
