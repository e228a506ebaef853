"""Parsing judge answers: strict JSON first, then recovery from code fences and prose (raw_decode scanning,
string contents untouched); scores off their scale or of the wrong type are invalid, never defaulted."""

import pytest

from uep_common.judge_config import JudgeConfig
from uep_judge.parsing import JudgeParseError, extract_json_object, parse_pairwise, parse_rubric

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
