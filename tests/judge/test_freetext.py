"""Free-text verdicts read as a careful reader would (uep_judge.freetext, through parse_rubric and
parse_pairwise when a reply holds no JSON object): labelled scores and rating phrases are recovered, quoted
scales and ranges are never read as the rating, a value off the declared scale or a fraction on an integer
scale is an invalid verdict (never clamped), and a reply with no score is unparsed (never a default).

Every input is written here by hand; the expected value is the number a person reading the reply would take
as the judge's rating, or none."""

import pytest

from uep_common.contract.judge_config import Dimension, JudgeConfig
from uep_judge.freetext import read_score, read_winner
from uep_judge.parsing import InvalidVerdictError, UnparsedAnswerError, failure_status, parse_pairwise, parse_rubric

# a 0-3 integer scale, as a customer-service rubric might use, with no score_label: prose is read only
# because the reply has no JSON object
ZERO_TO_THREE = JudgeConfig(
    judges=["j"],
    dimensions=[Dimension(name="politeness", min=0, max=3, integer=True)],
    overall_min=0,
    overall_max=3,
    overall_integer=True,
)
ONE_TO_FIVE = ZERO_TO_THREE.model_copy(update={"overall_min": 1, "overall_max": 5})


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        # labelled scores
        ("The agent apologised and fixed the order.\nScore: 3", 3),
        ("rating: 2", 2),
        ("Overall score = 1 because the refund was not offered.", 1),
        ("**Final score:** 2", 2),
        ("Score (0 to 3): 2", 2),  # the note between label and colon is a quoted scale, not the score
        ("Score: [[1]]", 1),
        ("My rating: 3/3", 3),  # the quoted top is the declared top
        ("Score: 1\nActually the reply did answer the question.\nScore: 2", 2),  # the judge's last word
        # rating phrases
        ("I would give it 3.", 3),
        ("I'd give this reply a 2 since it ignores the second question.", 2),
        ("Judged on a 0 to 3 scale, I rate the response 1.", 1),
        ("It deserves a 0: the agent was rude.", 0),
        ("I would not give it a 3; I give it a 2.", 2),  # the negated phrase is skipped
        ("Given the missing tracking number, a score of 1 out of 3.", 1),
        # MT-bench's brackets, fractions of the declared top, a bare number
        ("Polite and complete. [[3]]", 3),
        ("This gets two points from me: 2/3", 2),
        ("2", 2),
        ("**3**.", 3),
    ],
)
def test_a_given_score_is_recovered(reply, score):
    v = parse_rubric(reply, ZERO_TO_THREE)
    assert v.overall == score and v.reasoning == reply.strip()


@pytest.mark.parametrize(
    "reply",
    [
        "Rate the reply on a 0 to 3 scale.",  # a quoted scale with nothing given
        "Scores run 0-3; this one is fine.",
        "Score: 0-3",  # a range after the label is not a score
        "Rating: 1 to 3, depending on tone.",
        "I would give it a score between 0 and 3.",
        "The customer asked 3 questions and got 2 answers.",  # numbers mentioned, none given as the rating
        "Good job overall!",
        "",
    ],
)
def test_a_quoted_scale_or_a_mentioned_number_is_never_the_rating(reply):
    with pytest.raises(UnparsedAnswerError) as info:
        parse_rubric(reply, ZERO_TO_THREE)
    assert failure_status(info.value) == "unparsed"


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("Score: 4", r'"overall" 4 is outside the scale \[0, 3\]'),  # never clamped to 3
        ("I would give it 5.", r"outside the scale \[0, 3\]"),
        ("Rating: -1", "outside the scale"),
        ("Score: 2.5", "not a whole number"),  # never rounded on an integer scale
        ("I'd rate it 1.5", "not a whole number"),
        ("Score: 2 out of 5", "out of 5, but the scale's top is 3"),
        ("Score: 2\npoliteness: 7", r'"politeness" 7 is outside the scale \[0, 3\]'),
    ],
)
def test_a_value_off_the_scale_or_a_fraction_is_an_invalid_verdict(reply, why):
    with pytest.raises(InvalidVerdictError, match=why) as info:
        parse_rubric(reply, ZERO_TO_THREE)
    assert failure_status(info.value) == "invalid"


def test_the_declared_scale_decides_what_a_fraction_means():
    # "3/5" is a rating on a 1-5 scale, and an unrelated ratio on a 0-3 scale
    assert parse_rubric("Helpful overall, 3/5.", ONE_TO_FIVE).overall == 3
    with pytest.raises(UnparsedAnswerError):
        parse_rubric("Helpful overall, 3/5.", ZERO_TO_THREE)


def test_dimension_scores_are_read_from_their_labels_and_missing_ones_listed():
    v = parse_rubric("politeness: 3\nScore: 2", ZERO_TO_THREE)
    assert (v.overall, v.scores, v.missing) == (2, {"politeness": 3}, [])
    assert parse_rubric("Score: 2", ZERO_TO_THREE).missing == ["politeness"]


def test_a_json_object_with_overall_is_the_answer_never_the_prose_around_it():
    # the object's off-scale overall is invalid, though the prose after it gives a 2
    with pytest.raises(InvalidVerdictError, match="outside the scale"):
        parse_rubric('{"overall": 9, "scores": {}} Score: 2', ZERO_TO_THREE)
    # an object without "overall" is no answer: the text is read, and without a score there it is unparsed
    assert parse_rubric('{"reasoning": "fine"} Score: 2', ZERO_TO_THREE).overall == 2
    with pytest.raises(UnparsedAnswerError, match='no "overall" score, nor does the text give one'):
        parse_rubric('{"reasoning": "fine", "scores": {"politeness": 2}}', ZERO_TO_THREE)


def test_a_truncated_json_reply_is_read_for_its_labelled_fields():
    # max_tokens cut the reply inside "reasoning": no object decodes, the keys are still there to read
    reply = '{"scores": {"politeness": 2}, "overall": 3, "reasoning": "the agent answered every ques'
    v = parse_rubric(reply, ZERO_TO_THREE)
    assert (v.overall, v.scores) == (3, {"politeness": 2})


def test_read_score_names_the_rule_that_found_it():
    s = read_score("Score: 2 out of 3", ("score",), 3)
    assert s is not None and (s.value, s.quoted_top, s.form) == (2, 3, "label")
    forms = [read_score(text, ("score",), 3) for text in ("I give it 1", "[[2]]", "2 out of 3", " 1 ")]
    assert [f.form if f else None for f in forms] == ["phrase", "brackets", "fraction", "bare"]
    assert read_score("on a 0-3 scale", ("score",), 3) is None


@pytest.mark.parametrize(
    ("reply", "winner"),
    [
        ("Assistant B apologises first. [[B]]", "B"),
        ("Both are equally curt. [[C]]", "tie"),
        ("Winner: A", "A"),
        ("The better response is: Assistant B", "B"),
        ("Final verdict: tie", "tie"),
        ("[[A]] at first sight, but on reflection [[B]]", "B"),
    ],
)
def test_a_pairwise_winner_is_recovered_from_prose(reply, winner):
    assert parse_pairwise(reply).winner == winner
    assert read_winner(reply) == winner


@pytest.mark.parametrize("reply", ["A is better.", "Verdict: a tie would be unfair", "I prefer the second one.", ""])
def test_a_pairwise_reply_without_a_stated_winner_is_unparsed(reply):
    with pytest.raises(UnparsedAnswerError):
        parse_pairwise(reply)
