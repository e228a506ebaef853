"""Leaderboard score types from set-level metrics: the primary metric of a benchmark is the recorded score type,
a set-level score is the summary's value with its bootstrap interval, and lower-is-better metrics (log loss,
Brier, ECE) rank in increasing order with the tie-group rule mirrored (no database)."""

import asyncio
import uuid
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from uep_common.analytics.leaderboards import BoardEntry, compute_score, primary_of, rank_entries, score_type_of, set_metric_of
from uep_common.contract.configs import LOWER_IS_BETTER, is_set_metric, parse_benchmark_config

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SUMMARY = {
    "accuracy": 0.8,
    "correct": 8,
    "scored": 10,
    "set_metrics": {
        "kind": "classification",
        "n": 10,
        "primary": "f1_macro",
        "method": "bootstrap over items, percentile, 1000 resamples",
        "headline": {"f1_macro": {"value": 0.75, "ci_low": 0.5, "ci_high": 0.9}, "roc_auc": {"value": None}},
    },
}


def entry(model: str, score: float, ci: tuple[float, float]) -> BoardEntry:
    return BoardEntry(model, "1", uuid.uuid4(), score, ci[0], ci[1], 100, "bootstrap", 1, T0, "v1")


def test_the_primary_set_metric_is_the_score_type_and_its_score():
    assert primary_of(SUMMARY) == "f1_macro"
    assert score_type_of("automatic", "label_match", primary_of(SUMMARY)) == "f1_macro"
    assert score_type_of("automatic", "label_match", None) == "label_match"
    assert score_type_of("llm_judge", "label_match", "f1_macro") == "judge"
    assert set_metric_of(SUMMARY, "roc_auc") is None  # undefined value: no score
    ev = type("Ev", (), {"summary": SUMMARY, "id": uuid.uuid4(), "details_cleaned_at": None})()
    score = asyncio.run(compute_score(None, ev, "f1_macro"))  # type: ignore[arg-type]  # a set-level score reads no row
    assert score == {
        "score": 0.75,
        "ci_low": 0.5,
        "ci_high": 0.9,
        "n": 10,
        "method": "bootstrap",
        "method_detail": "bootstrap over items, percentile, 1000 resamples",
    }
    none = asyncio.run(compute_score(None, ev, "roc_auc"))  # type: ignore[arg-type]
    assert none["score"] is None and none["method"] == "none"


def test_benchmark_configs_name_their_primary_metric():
    assert parse_benchmark_config({"metric": {"name": "ndcg", "params": {"k": 5}}}).primary_score == "ndcg@5"
    cfg = parse_benchmark_config(
        {"metric": {"name": "label_match"}, "metrics": [{"name": "roc_auc"}, {"name": "f1_macro", "primary": True}]}
    )
    assert (
        cfg.primary_score == "f1_macro"
        and cfg.metric_name == "label_match"
        and [m.name for m in cfg.item_metrics] == ["label_match"]
    )
    assert parse_benchmark_config({"metric": {"name": "exact_match"}}).primary_score is None
    assert all(is_set_metric(n) for n in ("f1_macro", "ndcg@10", "map@5", "mrr", "hit@1")) and not is_set_metric("ndcg")
    with pytest.raises(ValidationError, match="at most one entry may be primary"):
        parse_benchmark_config({"metrics": [{"name": "mrr", "primary": True}, {"name": "ndcg@10", "primary": True}]})
    with pytest.raises(ValidationError, match="class_names must be distinct"):
        parse_benchmark_config({"class_names": ["a", "a"]})


def test_lower_is_better_boards_rank_the_lowest_first_with_mirrored_tie_groups():
    assert {"log_loss", "brier", "ece"} == LOWER_IS_BETTER
    board = rank_entries(
        [entry("worst", 0.9, (0.8, 1.0)), entry("best", 0.2, (0.15, 0.25)), entry("close", 0.22, (0.18, 0.3))],
        lower_is_better=True,
    )
    assert [(e.model, e.rank, e.tie_group, e.score) for e in board] == [
        ("best", 1, 1, 0.2),  # scores and intervals come back as they were
        ("close", 1, 1, 0.22),  # its interval reaches the leader's: not separable
        ("worst", 3, 2, 0.9),  # its lower bound 0.8 is above the leader's upper bound 0.25: a new group
    ]
    assert (board[0].ci_low, board[0].ci_high) == (0.15, 0.25)
