"""Comparison of models across the benchmarks of a capability profile (radar charts), read from the
leaderboards of :mod:`uep_common.analytics.leaderboards`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.analytics.board_ranking import BoardEntry
from uep_common.analytics.leaderboards import SITE_SCOPE, BoardScope, load_board


def _pick(entries: Sequence[BoardEntry], model_ref: str) -> BoardEntry | None:
    """The entry of ``name@version``, or of the most recently evaluated version of ``name``."""
    name, _, version = model_ref.partition("@")
    found = [e for e in entries if e.model == name and (not version or e.model_version == version)]
    return max(found, key=lambda e: (e.last_evaluated, e.model_version)) if found else None


def radar_series(rows: Mapping[str, Mapping[str, float | None]], dimensions: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """Radar input ``{series: {dimension: value in [0, 1]}}`` from ``rows`` (model → dimension → score).

    A missing score is left out of its series (the radar draws a gap, never a zero); a dimension with a
    value outside [0, 1] is divided by its largest absolute value among the series (so the best is 1).
    Returns the series and the dimensions no series has a score on (not drawn).
    """
    series: dict[str, dict[str, float]] = {m: {} for m in rows}
    drawn = []
    for d in dimensions:
        vals = {m: float(v) for m in rows if (v := rows[m].get(d)) is not None}
        if not vals:
            continue
        drawn.append(d)
        scale = max(abs(v) for v in vals.values()) if any(v < 0 or v > 1 for v in vals.values()) else 1.0
        for m, v in vals.items():
            series[m][d] = max(0.0, v / scale) if scale else 0.0
    return series, [d for d in dimensions if d not in drawn]


async def compare_models(
    session: AsyncSession,
    models: Sequence[str],
    boards: Sequence[tuple[str, str]],
    radar: Callable[[Mapping[str, Mapping[str, float]], str], str] | None = None,
    scope: BoardScope = SITE_SCOPE,
) -> dict[str, Any]:
    """Scores of ``models`` (``name`` or ``name@version``) on ``boards`` ((benchmark slug, score type)) in
    ``scope``: ``{models, boards, rows: [{model, scores: {"<slug>:<type>": entry | None}}], radar_svg,
    radar_left_out}``.

    Each board contributes the entries of its default item set only (the first of :func:`~uep_common.analytics.board_ranking.item_set_order`),
    so the models compared on one board were evaluated on the same items; a model evaluated there only on
    another item set has no cell (``None``). ``radar`` renders the radar (e.g.
    ``uep_common.analytics.charts.radar_svg``); None leaves ``radar_svg`` None.
    """
    cells: dict[str, dict[str, BoardEntry | None]] = {m: {} for m in models}
    labels = [f"{slug}:{st}" for slug, st in boards]
    for (slug, st), label in zip(boards, labels, strict=True):
        entries = await load_board(session, slug, st, scope=scope)
        entries = [e for e in entries if e.item_set == entries[0].item_set]  # rank_entries: default item set first
        for m in models:
            cells[m][label] = _pick(entries, m)
    rows = {m: {label: (e.score if e else None) for label, e in cells[m].items()} for m in models}
    series, left_out = radar_series(rows, labels)
    svg = None
    if radar is not None and len(labels) > len(left_out):
        svg = radar(series, "Models compared: " + ", ".join(models))
    return {
        "models": list(models),
        "boards": [{"benchmark": slug, "score_type": st, "key": label} for (slug, st), label in zip(boards, labels, strict=True)],
        "rows": [{"model": m, "scores": {label: (e.as_dict() if e else None) for label, e in cells[m].items()}} for m in models],
        "radar_series": series,
        "radar_left_out": left_out,
        "radar_svg": svg,
    }
