"""Leaderboard ranking rules on constructed scores (no server).

The tie-group rule (uep_common.leaderboards): entries sorted by score, then lower bound; an entry whose 95 %
upper bound is BELOW the current group leader's lower bound starts a new group; rank = 1 + entries in better
groups. Intervals below are Wilson 95 % intervals of k/100, values from uep_common.stats.wilson_interval
(scipy binomtest(...).proportion_ci(method="wilson")), rounded here only in comments.
"""

import uuid
from datetime import UTC, datetime

import pytest

from uep_common.leaderboards import BoardEntry, evaluation_type_of, radar_series, rank_entries, score_type_of
from uep_common.stats import wilson_interval

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def entry(model: str, score: float | None, ci: tuple[float, float] | None, version: str = "1", n: int = 100) -> BoardEntry:
    return BoardEntry(
        model=model,
        model_version=version,
        evaluation_id=uuid.uuid4(),
        score=score,
        ci_low=ci[0] if ci else None,
        ci_high=ci[1] if ci else None,
        n=n,
        method="wilson",
        evaluations=1,
        last_evaluated=T0,
        benchmark_version="v",
    )


def accuracy(model: str, k: int, n: int = 100) -> BoardEntry:
    return entry(model, k / n, wilson_interval(k, n), n=n)


def test_tie_groups_on_wilson_intervals():
    # A 92/100 [0.8500, 0.9589]  leads group 1
    # B 86/100 [0.7786, 0.9147]  upper 0.9147 >= A.low 0.8500 -> group 1 (not separable from A)
    # C 70/100 [0.6042, 0.7811]  upper 0.7811 <  A.low 0.8500 -> new group 2, C leads it; rank 3 (two better)
    # D 60/100 [0.5020, 0.6906]  upper 0.6906 >= C.low 0.6042 -> group 2, rank 3
    # E 50/100 [0.4038, 0.5962]  upper 0.5962 <  C.low 0.6042 -> new group 3, rank 5 — although E's interval
    #                            overlaps D's: overlap is judged against the group leader only.
    board = rank_entries([accuracy("E", 50), accuracy("C", 70), accuracy("A", 92), accuracy("D", 60), accuracy("B", 86)])
    assert [(e.model, e.position, e.tie_group, e.rank) for e in board] == [
        ("A", 1, 1, 1),
        ("B", 2, 1, 1),
        ("C", 3, 2, 3),
        ("D", 4, 2, 3),
        ("E", 5, 3, 5),
    ]
    d, e = board[3], board[4]
    assert e.ci_high >= d.ci_low  # E overlaps D, yet is in another group (leader rule)


def test_upper_bound_equal_to_leader_lower_bound_is_not_separable():
    # "below" is strict: touching intervals share a group.
    board = rank_entries([entry("a", 0.9, (0.8, 0.95)), entry("b", 0.7, (0.6, 0.8)), entry("c", 0.5, (0.4, 0.59))])
    assert [(e.model, e.tie_group, e.rank) for e in board] == [("a", 1, 1), ("b", 1, 1), ("c", 2, 3)]


def test_equal_scores_ordered_by_lower_bound_then_name():
    # 45/50 and 90/100 are both 0.9; the larger sample has the narrower interval, so the higher lower bound
    # (Wilson 90/100 low 0.8256 > 45/50 low 0.7864) and comes first. Same score and interval: by name.
    board = rank_entries([accuracy("small", 45, 50), accuracy("large", 90, 100), accuracy("big2", 90, 100)])
    assert [e.model for e in board] == ["big2", "large", "small"]
    assert {e.tie_group for e in board} == {1} and {e.rank for e in board} == {1}


def test_unrankable_entries_come_last_without_rank():
    board = rank_entries([entry("none", None, None, n=0), entry("one-item mean", 0.99, None, n=1), accuracy("x", 60)])
    assert [(e.model, e.position, e.rank, e.tie_group) for e in board] == [
        ("x", 1, 1, 1),
        ("one-item mean", 2, None, None),
        ("none", 3, None, None),
    ]


def test_model_versions_are_separate_entries():
    board = rank_entries([entry("m", 0.5, (0.4, 0.6), version="1"), entry("m", 0.8, (0.7, 0.9), version="2")])
    assert [(e.model_version, e.rank) for e in board] == [("2", 1), ("1", 2)]


def test_empty_board():
    assert rank_entries([]) == []


def test_radar_series_gaps_and_scaling():
    rows = {"a": {"x:acc": 0.5, "y:bleu": 40.0, "z:acc": None}, "b": {"x:acc": 0.75, "y:bleu": 20.0, "z:acc": None}}
    series, left_out = radar_series(rows, ["x:acc", "y:bleu", "z:acc", "w:acc"])
    # accuracy already in [0, 1]: unchanged; BLEU 40/20 is divided by its largest value 40 -> 1.0 / 0.5
    assert series == {"a": {"x:acc": 0.5, "y:bleu": 1.0}, "b": {"x:acc": 0.75, "y:bleu": 0.5}}
    assert left_out == ["z:acc", "w:acc"]
    series, _ = radar_series({"a": {"x": 0.5}, "b": {"x": None}}, ["x"])
    assert series == {"a": {"x": 0.5}, "b": {}}  # a missing score is a gap, not a zero


@pytest.mark.parametrize(
    ("config", "bench_type", "metric", "expected"),
    [
        ({}, "automatic", "gsm8k_numeric_exact_match", "gsm8k_numeric_exact_match"),
        ({}, "automatic", None, "automatic"),
        ({}, "llm_judge", "judge_score", "judge"),
        ({}, "hybrid", "x", "hybrid"),
        ({"source_evaluation_id": "e"}, "automatic", "x", "human"),
        ({"evaluation_type": "llm_judge"}, "automatic", "x", "judge"),
    ],
)
def test_score_type(config, bench_type, metric, expected):
    assert score_type_of(evaluation_type_of(config, bench_type), metric) == expected


def _snap(model: str, k: int, tenant: str | None, at: str, position: int) -> dict:
    lo, hi = wilson_interval(k, 100)
    e = {
        "model": model,
        "model_version": "1",
        "position": position,
        "rank": position,
        "tie_group": position,
        "score": k / 100,
        "ci_low": lo,
        "ci_high": hi,
        "n": 100,
        "evaluation_id": str(uuid.uuid4()),
        "last_evaluated": at,
    }
    return e | ({"tenant_id": tenant} if tenant else {})


def test_a_snapshot_is_cut_down_to_one_tenant_and_ranked_again():
    from uep_common.leaderboards import _scoped_snapshot, rank_snapshot_entries

    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    # the union of both tenants' boards, as record_evaluation stores it (ranks as stored are not used)
    stored = [
        _snap("P", 90, a, "2026-01-01T00:00:00+00:00", 1),
        _snap("R", 75, b, "2026-01-01T00:02:00+00:00", 2),
        _snap("Q", 60, a, "2026-01-01T00:01:00+00:00", 3),
        _snap("Q", 20, b, "2026-01-01T00:03:00+00:00", 4),
    ]
    only_b = _scoped_snapshot(stored, uuid.UUID(b), {})
    assert [(e["model"], e["score"], e["position"], e["rank"], e["tie_group"]) for e in only_b] == [
        ("R", 0.75, 1, 1, 1),
        ("Q", 0.2, 2, 2, 2),
    ]
    assert all("tenant_id" not in e for e in only_b)
    # the whole site: the latest entry per model version over every tenant (B's later Q run)
    site = _scoped_snapshot(stored, None, {})
    assert [(e["model"], e["score"], e["rank"]) for e in site] == [("P", 0.9, 1), ("R", 0.75, 2), ("Q", 0.2, 3)]
    # an entry written before snapshots carried tenant ids is attributed by its evaluation id
    old = [{k: v for k, v in e.items() if k != "tenant_id"} for e in stored]
    only_a = _scoped_snapshot(old, uuid.UUID(a), {old[0]["evaluation_id"]: a, old[2]["evaluation_id"]: a})
    assert [(e["model"], e["rank"]) for e in only_a] == [("P", 1), ("Q", 2)]
    # two entries whose intervals reach each other share a group after ranking again
    tied = rank_snapshot_entries([_snap("X", 50, None, "", 2), _snap("Y", 52, None, "", 1)])
    assert [(e["model"], e["position"], e["rank"]) for e in tied] == [("Y", 1, 1), ("X", 2, 1)]
