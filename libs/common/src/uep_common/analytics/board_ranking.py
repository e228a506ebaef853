"""Ranking of leaderboard entries in tie groups, one item set at a time (pure; the rules are in
:mod:`uep_common.analytics.leaderboards`).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class BoardEntry:
    """One model version on a board. Scores and bounds in the metric's unit; times timezone-aware UTC."""

    model: str
    model_version: str
    evaluation_id: uuid.UUID
    score: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    method: str
    evaluations: int
    last_evaluated: datetime
    benchmark_version: str
    method_detail: str = ""
    position: int | None = None
    rank: int | None = None
    tie_group: int | None = None
    tenant_id: uuid.UUID | None = None
    samples: int | None = None
    item_set: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (ids and times as strings; without ``tenant_id``)."""
        d = asdict(self)
        del d["tenant_id"]
        d["evaluation_id"] = str(self.evaluation_id)
        d["last_evaluated"] = self.last_evaluated.isoformat()
        return d


def _rankable(e: BoardEntry) -> bool:
    return e.score is not None and e.ci_low is not None and e.ci_high is not None and not math.isnan(e.score)


def _rank_key(e: BoardEntry) -> tuple[float, float, str, str]:
    assert e.score is not None and e.ci_low is not None  # only called on rankable entries
    return (-e.score, -e.ci_low, e.model, e.model_version)


def _flipped(e: BoardEntry) -> BoardEntry:
    """``e`` with its score and interval negated: a lower-is-better board ranked by the higher-is-better rule."""
    return replace(e, score=_neg(e.score), ci_low=_neg(e.ci_high), ci_high=_neg(e.ci_low))


def _neg(v: float | None) -> float | None:
    return None if v is None else -v


def item_set_key(benchmark_version: str, samples: int | None, sampling: str | None = None, seed: int | None = None) -> str:
    """The key of an item set: ``"<benchmark version>:<samples>"`` (the first ``samples`` samples of that
    version; see the module docstring), ``"<version>:<samples>:<sampling>:<seed>"`` for a ``random`` or
    ``stratified`` choice of samples (:mod:`uep_common.records.sampling`: the same method and seed choose the same
    samples)."""
    if samples is None:
        return benchmark_version
    return f"{benchmark_version}:{samples}" + (f":{sampling}:{seed or 0}" if sampling not in (None, "first") else "")


def item_set_order(entries: Sequence[BoardEntry]) -> list[str]:
    """The item sets of ``entries`` in board order: most entries first, then most samples, then the most
    recently evaluated, then by key. The first is a board's default item set."""
    count: dict[str, int] = {}
    samples: dict[str, int] = {}
    latest: dict[str, float] = {}
    for e in entries:
        count[e.item_set] = count.get(e.item_set, 0) + 1
        samples[e.item_set] = max(samples.get(e.item_set, -1), e.samples if e.samples is not None else -1)
        latest[e.item_set] = max(latest.get(e.item_set, -math.inf), e.last_evaluated.timestamp())
    return sorted(count, key=lambda k: (-count[k], -samples[k], -latest[k], k))


def rank_entries(entries: Sequence[BoardEntry], lower_is_better: bool = False) -> list[BoardEntry]:
    """Rank each item set of ``entries`` on its own (see the module docstring: no tie group spans two item
    sets) and return them item set after item set in :func:`item_set_order`. Within an item set, order the
    entries and assign ``position``, ``tie_group`` and ``rank`` by the tie-group rule (mirrored when
    ``lower_is_better``: the lowest score first); unrankable ones come last with rank/tie_group None.
    Returns new entries."""
    if lower_is_better:
        return [_flipped(e) for e in rank_entries([_flipped(e) for e in entries])]
    by_set: dict[str, list[BoardEntry]] = {}
    for e in entries:
        by_set.setdefault(e.item_set, []).append(e)
    return [r for key in item_set_order(entries) for r in _rank_item_set(by_set[key])]


def _rank_item_set(entries: Sequence[BoardEntry]) -> list[BoardEntry]:
    """The tie-group rule over the entries of one item set."""
    ranked = sorted((e for e in entries if _rankable(e)), key=_rank_key)
    rest = sorted(
        (e for e in entries if not _rankable(e)),
        key=lambda e: (e.score is None, -(e.score or 0.0), e.model, e.model_version),
    )
    out: list[BoardEntry] = []
    group, leader, group_rank = 0, None, 1
    for i, e in enumerate(ranked):
        assert e.ci_high is not None  # ranked entries are rankable
        if leader is None or (leader.ci_low is not None and e.ci_high < leader.ci_low):
            group, leader, group_rank = group + 1, e, i + 1
        out.append(replace(e, position=i + 1, rank=group_rank, tie_group=group))
    out += [replace(e, position=len(ranked) + j + 1, rank=None, tie_group=None) for j, e in enumerate(rest)]
    return out
