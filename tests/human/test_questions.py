"""Questions, answer validation, gold checks and per-item aggregation (uep_gateway.annotation.questions)."""

import pytest
from pydantic import ValidationError

from uep_gateway.annotation.questions import Question, aggregate, gold_check, item_score, validate_answers

QS = [
    Question(name="correct", type="pass_fail"),
    Question(name="quality", type="rating", scale_min=1, scale_max=5),
    Question(name="pref", type="pairwise", allow_tie=False),
    Question(name="note", type="comment"),
]


def test_question_specs_are_checked():
    with pytest.raises(ValidationError, match="scale_min must be below scale_max"):
        Question(name="q", type="rating", scale_min=5, scale_max=5)
    with pytest.raises(ValidationError, match="at most 11 scale points"):
        Question(name="q", type="rating", scale_min=0, scale_max=20)
    with pytest.raises(ValidationError):
        Question(name="Bad Name", type="pass_fail")
    assert Question(name="note", type="comment").required is False
    assert Question(name="ok_now", type="pass_fail").prompt == "ok now"


def test_answers_are_validated_per_question_and_named_in_problems():
    clean, problems = validate_answers(QS, {"correct": "pass", "quality": 4, "pref": "a"})
    assert problems == [] and clean == {"correct": "pass", "quality": 4, "pref": "a"}
    _, problems = validate_answers(QS, {"correct": "yes", "quality": 7, "pref": "tie", "extra": 1})
    by_loc = {tuple(p["loc"]): p for p in problems}
    assert by_loc[("body", "answers", "extra")]["type"] == "unknown_question"
    assert "'pass' or 'fail'" in by_loc[("body", "answers", "correct")]["msg"]
    assert "outside the scale 1..5" in by_loc[("body", "answers", "quality")]["msg"]
    assert "'a', 'b'" in by_loc[("body", "answers", "pref")]["msg"]  # no tie allowed here
    _, problems = validate_answers(QS, {"correct": "pass"})
    assert {tuple(p["loc"])[-1] for p in problems} == {"quality", "pref"}  # the comment is optional
    _, problems = validate_answers(QS, {"correct": "pass", "quality": True, "pref": "a"})
    assert problems[0]["loc"][-1] == "quality"  # a bool is not a rating
    _, problems = validate_answers(QS, {}, partial=True)
    assert problems[0]["type"] == "missing_answer"  # gold needs at least one known answer


def test_gold_check_counts_checked_and_correct_questions():
    gold = {"correct": "pass", "quality": 4}
    assert gold_check(QS, gold, {"correct": "pass", "quality": 5, "pref": "a"}) == (2, 1)
    assert gold_check(QS, gold, {"correct": "pass", "quality": 5, "pref": "a"}, rating_tolerance=1) == (2, 2)
    assert gold_check(QS, gold, {"correct": "fail", "quality": 4}) == (2, 1)


def test_aggregate_and_item_score():
    answers = [
        {"correct": "pass", "quality": 4, "pref": "a", "note": "fine"},
        {"correct": "fail", "quality": 2, "pref": "a"},
        {"correct": "pass", "quality": 3, "pref": "b"},
    ]
    agg = aggregate(QS, answers)
    assert agg["correct"] == {"n": 3, "pass_rate": pytest.approx(2 / 3), "majority": "pass"}
    assert agg["quality"] == {"n": 3, "mean": 3.0, "normalized": 0.5}  # (3 − 1) / (5 − 1)
    assert agg["pref"]["a_win_rate"] == pytest.approx(2 / 3) and agg["pref"]["majority"] == "a"
    assert agg["note"] == {"n": 1, "comments": ["fine"]}
    is_correct, score, extracted, metrics = item_score(QS, agg)
    assert (is_correct, score, extracted) == (True, pytest.approx(2 / 3), "pass")
    assert metrics == {
        "correct_pass_rate": pytest.approx(2 / 3),
        "quality_mean": 3.0,
        "quality_normalized": 0.5,
        "pref_a_win_rate": pytest.approx(2 / 3),
    }
    # a tie has no majority: no verdict, the pass rate is still the score
    tie = aggregate(QS, answers[:2])
    assert item_score(QS, tie)[:3] == (None, 0.5, None)
    # a rating primary question gives a graded score and no verdict
    assert item_score([QS[1]], aggregate([QS[1]], answers))[:3] == (None, 0.5, "3")
