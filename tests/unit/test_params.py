"""Metric parameter checks shared by the gateway and the scorer CLI."""

from uep_common.contract.params import param_problems

TYPES = {
    "ignore_case": "bool",
    "pattern": "string",
    "threshold": "number",
    "k": "integer",
    "regexes_to_ignore": "string_list",
    "choices": "letters",
    "variant": "enum:strict|flexible",
}


def test_good_params_pass():
    good = {
        "ignore_case": True,
        "pattern": "x",
        "threshold": 0.5,
        "k": 3,
        "regexes_to_ignore": ["a"],
        "choices": "ABCDE",
        "variant": "strict",
    }
    assert param_problems(good, TYPES, ["pattern"]) == []
    assert param_problems({"pattern": "x", "choices": ["A", "B"], "threshold": None}, TYPES, ["pattern"]) == []


def test_each_problem_is_named():
    problems = dict(
        param_problems(
            {
                "ignore_case": "maybe",
                "k": 2.5,
                "threshold": True,
                "regexes_to_ignore": "a",
                "choices": ["AB"],
                "variant": "loose",
                "colour": 1,
            },
            TYPES,
            ["pattern"],
        )
    )
    assert problems == {
        "colour": "unknown parameter; the metric takes ['choices', 'ignore_case', 'k', 'pattern', 'regexes_to_ignore', 'threshold', 'variant']",
        "pattern": "is required",
        "ignore_case": "must be true or false; got 'maybe'",
        "k": "must be an integer; got 2.5",
        "threshold": "must be a number; got True",
        "regexes_to_ignore": "must be a list of strings; got 'a'",
        "choices": "must be a string of letters or a list of letters; got ['AB']",
        "variant": "must be one of 'strict', 'flexible'; got 'loose'",
    }
