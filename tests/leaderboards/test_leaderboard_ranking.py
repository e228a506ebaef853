"""Leaderboard ranking rules on constructed scores (no server).

The tie-group rule (uep_common.analytics.leaderboards): entries sorted by score, then lower bound; an entry whose 95 %
upper bound is BELOW the current group leader's lower bound starts a new group; rank = 1 + entries in better
groups. Intervals below are Wilson 95 % intervals of k/100, values from uep_common.analytics.stats.wilson_interval
(scipy binomtest(...).proportion_ci(method="wilson")), rounded here only in comments.
"""

import uuid
from datetime import UTC, datetime

import pytest

from uep_common.analytics.leaderboards import BoardEntry, evaluation_type_of, radar_series, rank_entries, score_type_of
from uep_common.analytics.stats import wilson_interval

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
    from uep_common.analytics.leaderboards import _scoped_snapshot, rank_snapshot_entries

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


# ---------------------------------------------------------------- item sets: only the same items are ranked together


def on_items(e: BoardEntry, samples: int, version: str = "v") -> BoardEntry:
    from dataclasses import replace

    from uep_common.analytics.leaderboards import item_set_key

    return replace(e, samples=samples, benchmark_version=version, item_set=item_set_key(version, samples))


def test_entries_on_different_item_sets_are_never_ranked_or_tied_together():
    # An 8-item run with 8/8 correct (Wilson [0.6756, 1.0]) and three 30-item runs: 18/30 [0.4232, 0.7541],
    # 17/30 [0.3920, 0.7262], 10/30 [0.1923, 0.5122]. Ranked together, the 8-item run would lead and share
    # group 1 with the 18/30 and 17/30 runs (their upper bounds reach 0.6756); by item set it is ranked alone.
    small = on_items(accuracy("oracle", 8, 8), 8)
    full = [on_items(accuracy(m, k, 30), 30) for m, k in (("smollm2", 18), ("b", 17), ("c", 10))]
    board = rank_entries([small, *full])
    assert [(e.model, e.item_set, e.position, e.rank, e.tie_group) for e in board] == [
        ("smollm2", "v:30", 1, 1, 1),  # the item set with most entries comes first (item_set_order)
        ("b", "v:30", 2, 1, 1),
        ("c", "v:30", 3, 1, 1),  # 10/30 upper 0.5122 >= 18/30 lower 0.4232: tied with the leader
        ("oracle", "v:8", 1, 1, 1),  # its own item set: group 1 of its own, never smollm2's
    ]
    assert wilson_interval(8, 8)[0] == pytest.approx(0.6756, abs=1e-4)


def test_item_set_order_most_entries_then_most_samples():
    from uep_common.analytics.leaderboards import item_set_order

    one_each = [on_items(accuracy("a", 5, 8), 8), on_items(accuracy("b", 20, 30), 30)]
    assert item_set_order(one_each) == ["v:30", "v:8"]  # equal entries: more samples first
    three = [*one_each, on_items(accuracy("c", 6, 8), 8)]
    assert item_set_order(three) == ["v:8", "v:30"]  # most entries first
    # two benchmark versions are two item sets, even with as many samples
    versions = rank_entries([on_items(accuracy("a", 20, 30), 30, "v1"), on_items(accuracy("b", 25, 30), 30, "v2")])
    assert {(e.model, e.rank, e.tie_group) for e in versions} == {("a", 1, 1), ("b", 1, 1)}


def test_snapshot_entries_are_ranked_again_within_their_item_set():
    from uep_common.analytics.leaderboards import rank_snapshot_entries

    small = _snap("S", 100, None, "", 1) | {"n": 8, "item_set": "v:8", "samples": 8}
    big = [_snap("X", 60, None, "", 2) | {"item_set": "v:100"}, _snap("Y", 40, None, "", 3) | {"item_set": "v:100"}]
    ranked = rank_snapshot_entries([small, *big])
    assert [(e["model"], e["item_set"], e["rank"], e["tie_group"]) for e in ranked] == [
        ("X", "v:100", 1, 1),
        ("Y", "v:100", 2, 2),  # 40/100 upper 0.4980 < 60/100 lower 0.5020
        ("S", "v:8", 1, 1),
    ]
