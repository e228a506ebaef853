"""Parsing judge answers: strict JSON first, then recovery from code fences and prose (raw_decode scanning,
string contents untouched); scores off their scale or of the wrong type are invalid, never defaulted."""

import pytest

from uep_common.contract.judge_config import Dimension, JudgeConfig
from uep_judge.parsing import (
    JudgeParseError,
    extract_json_object,
    parse_labelled,
    parse_pairwise,
    parse_rubric,
    repair_trailing_commas,
)
from uep_judge.templates import rubric_schema

CFG = JudgeConfig(judges=["uep-judge"])  # the default five dimensions on 0-10, overall on 0-10


def test_worked_case_fenced_json_gives_overall_8_and_accuracy_8():
    text = '```json\n{"scores": {"accuracy": 8}, "overall": 8, "reasoning": "fine"}\n```'
    v = parse_rubric(text, CFG)
    assert v.overall == 8 and v.scores == {"accuracy": 8} and v.reasoning == "fine"
    # the other four default dimensions were not given: listed as missing, never filled in
    assert v.missing == ["relevance", "completeness", "clarity", "safety"]


def test_worked_case_prose_is_invalid():
    with pytest.raises(JudgeParseError, match="no JSON object"):
        parse_rubric("I would rate it highly.", CFG)


def test_strict_json_first():
    assert extract_json_object('{"overall": 3}') == {"overall": 3}


def test_prose_around_json_keeps_string_contents_exact():
    reasoning = 'uses {braces}, ```fences``` and "quotes" \\ backslash'
    import json

    body = json.dumps({"overall": 7, "scores": {"clarity": 6.5}, "reasoning": reasoning})
    text = f"Sure! Here is my verdict {{not json}}: {body} Hope that helps {{x}}."
    v = parse_rubric(text, CFG)
    assert (v.overall, v.scores, v.reasoning) == (7, {"clarity": 6.5}, reasoning)


def test_first_object_with_expected_keys_wins():
    assert extract_json_object('{"note": 1} then {"overall": 5}', ("overall",)) == {"overall": 5}
    assert extract_json_object('{"note": 1} only', ("overall",)) == {"note": 1}


@pytest.mark.parametrize(
    "text, msg",
    [
        ('{"overall": 14}', r'"overall" 14 is outside the scale \[0, 10\]'),
        ('{"overall": -1}', "outside the scale"),
        ('{"overall": "8"}', '"overall" must be a number'),
        ('{"overall": true}', '"overall" must be a number'),
        ('{"scores": {"accuracy": 8}}', 'no "overall"'),
        ('{"overall": 8, "scores": {"accuracy": 11}}', r'"scores.accuracy" 11 is outside'),
        ('{"overall": 8, "scores": [8]}', '"scores" must be an object'),
        ('{"overall": NaN}', "must be a number"),
    ],
)
def test_invalid_rubric_answers(text, msg):
    with pytest.raises(JudgeParseError, match=msg):
        parse_rubric(text, CFG)


def test_custom_scale_and_unknown_dimensions_ignored():
    cfg = JudgeConfig(judges=["j"], dimensions=[{"name": "helpful", "min": 1, "max": 5}], overall_min=1, overall_max=5)
    v = parse_rubric('{"scores": {"helpful": 5, "other": 99}, "overall": 4}', cfg)
    assert v.scores == {"helpful": 5} and v.overall == 4
    with pytest.raises(JudgeParseError, match=r"outside the scale \[1, 5\]"):
        parse_rubric('{"overall": 0}', cfg)


@pytest.mark.parametrize(
    "text, winner", [('{"winner": "A"}', "A"), ('x {"winner": " b "} y', "B"), ('```\n{"winner": "Tie"}\n```', "tie")]
)
def test_pairwise(text, winner):
    assert parse_pairwise(text).winner == winner


@pytest.mark.parametrize("text", ['{"winner": "C"}', '{"winner": 1}', "A is better.", '{"better": "A"}'])
def test_pairwise_invalid(text):
    with pytest.raises(JudgeParseError):
        parse_pairwise(text)


# --- integer scales, the trailing-comma repair and labelled free-text scores (values by hand) ----------


LIKERT = JudgeConfig(
    judges=["uep-judge"],
    dimensions=[Dimension(name="accuracy", min=1, max=5, integer=True), Dimension(name="clarity", min=0, max=10)],
    overall_min=1,
    overall_max=5,
    overall_integer=True,
)
LABELLED = LIKERT.model_copy(update={"score_label": "Rating"})


def test_an_integer_scale_refuses_a_fraction():
    with pytest.raises(JudgeParseError, match="not a whole number"):
        parse_rubric('{"overall": 2.5}', LIKERT)
    with pytest.raises(JudgeParseError, match="scores.accuracy"):
        parse_rubric('{"scores": {"accuracy": 3.5}, "overall": 3}', LIKERT)
    # 4.0 is the whole number 4; a dimension without the flag keeps fractions
    v = parse_rubric('{"scores": {"accuracy": 4.0, "clarity": 6.5}, "overall": 4.0}', LIKERT)
    assert (v.overall, v.scores) == (4, {"accuracy": 4, "clarity": 6.5})
    # the default configuration has no integer scale: 2.5 is fine there
    assert parse_rubric('{"overall": 2.5}', CFG).overall == 2.5


def test_an_integer_scale_needs_integer_bounds():
    with pytest.raises(ValueError, match="integer scale"):
        Dimension(name="accuracy", min=0.5, max=5, integer=True)
    with pytest.raises(ValueError, match="integer overall"):
        JudgeConfig(judges=["j"], overall_min=0, overall_max=4.5, overall_integer=True)


def test_a_trailing_comma_is_repaired_after_strict_parsing_fails():
    v = parse_rubric('{"overall": 4, "reasoning": "fine",}', LIKERT)
    assert (v.overall, v.reasoning) == (4, "fine")
    fenced = '```json\n{"scores": {"accuracy": 3,}, "overall": 3, "reasoning": "ok",\n}\n```'
    assert parse_rubric(fenced, LIKERT).scores == {"accuracy": 3}


def test_the_repair_never_changes_string_contents():
    # strict JSON: decoded as written, no repair involved
    v = parse_rubric('{"overall": 3, "reasoning": "steps 1, ] done"}', LIKERT)
    assert v.reasoning == "steps 1, ] done"
    # repaired: only the comma outside the string goes; ", ]" and ",}" inside strings stay
    text = 'Verdict: {"overall": 3, "reasoning": "steps 1, ] done, ,} \\" quoted,]",}'
    assert parse_rubric(text, LIKERT).reasoning == 'steps 1, ] done, ,} " quoted,]'
    assert repair_trailing_commas('{"a": [1, 2,], "b": "x,]",}', 0) == '{"a": [1, 2], "b": "x,]"}'
    assert repair_trailing_commas('{"a": 1,', 0) is None  # never closed


def test_a_strict_object_wins_over_a_repairable_one():
    # the first object needs a repair, the second parses strictly: strict parsing comes first
    text = '{"overall": 1,} and then {"overall": 5}'
    assert parse_rubric(text, LIKERT).overall == 5


@pytest.mark.parametrize(
    ("text", "overall"),
    [
        ("Rating: 4 out of 5", 4),
        ("The answer is mostly right.\nRating: 4", 4),
        ("I grade on a 1 to 5 scale.\nRating: 2/5", 2),
        ("**Rating:** [[3]]", 3),  # MT-bench style brackets, markdown bold
        ("Rating (1 to 5): 5", 5),
        ("rating = 1", 1),
        ("Rating: 2\nOn reflection:\nRating: 3", 3),  # the last rating line wins
        ("On a 1 to 5 scale, I give it a 4.", 4),  # the quoted scale is not read; the phrase's number is
        ("Rating: 1-5 scale, I give 3", 3),
    ],
)
def test_labelled_free_text_scores(text, overall):
    v = parse_rubric(text, LABELLED)
    assert v.overall == overall and v.reasoning == text.strip()


@pytest.mark.parametrize(
    ("text", "msg"),
    [
        ("On a 1 to 5 scale, this one is good.", 'no "Rating: <number>" or other score'),  # a scale is not a score
        ("Rating: 1 to 5, and this one is good", 'no "Rating: <number>" or other score'),
        ("Rating: 8 out of 10", "out of 10"),
        ("Rating: 2.5", "not a whole number"),
        ("Rating: 6", "outside the scale"),
    ],
)
def test_labelled_answers_that_are_invalid(text, msg):
    with pytest.raises(JudgeParseError, match=msg):
        parse_labelled(text, LABELLED)


def test_labelled_dimensions_are_read_when_given():
    v = parse_rubric("accuracy: 4 out of 5\nClarity: 7.5\nRating: 4", LABELLED)
    assert (v.overall, v.scores, v.missing) == (4, {"accuracy": 4, "clarity": 7.5}, [])
    v = parse_rubric("Rating: 4", LABELLED)
    assert v.missing == ["accuracy", "clarity"]


def test_score_label_is_for_graded_modes_only():
    with pytest.raises(ValueError, match="score_label"):
        JudgeConfig(judges=["j"], mode="pairwise", score_label="Rating")


def test_the_schema_shown_to_the_judge_names_integer_scales_and_the_label():
    assert rubric_schema(LIKERT) == (
        '{"scores": {"accuracy": <integer 1-5>, "clarity": <number 0-10>}, "overall": <integer 1-5>, '
        '"reasoning": "<one or two sentences>"}'
    )
    assert rubric_schema(LABELLED).splitlines() == [
        "<one or two sentences of reasoning>",
        "accuracy: <integer 1-5>",
        "clarity: <number 0-10>",
        "Rating: <integer 1-5>",
    ]
