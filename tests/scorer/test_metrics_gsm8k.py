"""gsm8k_numeric_exact_match.

Expected values come from lm-evaluation-harness ``lm_eval/tasks/gsm8k/gsm8k.yaml`` (v3.0):
strict-match = first ``#### (\\-?[0-9\\.\\,]+)`` match, flexible-extract = last match of
``(-?[$0-9.,]{2,})|(-?[0-9]+)``; and from the number rules documented in uep_scorer.metrics.numeric
where we deliberately differ (exact decimals instead of string compare, thousands groups only).
"""

import time

import pytest

from uep_scorer.metrics import MetricInputError, get_metric

METRIC = get_metric("gsm8k_numeric_exact_match")


def score(output, answer, **params):
    return METRIC.score(output, {"answer": answer}, params)


def test_strict_and_flexible_disagree_on_one_output():
    # lm-eval: strict regex takes the first '#### N' -> "72"; flexible takes the last number -> "24".
    out = "#### 72\nSo she sold 72 clips in total, 24 more than in May."
    flexible = score(out, "72")
    assert (flexible.is_correct, flexible.score, flexible.extracted) == (False, 0.0, "24")
    assert flexible.details["strict_extracted"] == "72"
    assert flexible.details["flexible_extracted"] == "24"
    assert (flexible.details["strict_match"], flexible.details["flexible_match"]) == (1, 0)

    strict = score(out, "72", variant="strict")
    assert (strict.is_correct, strict.score, strict.extracted) == (True, 1.0, "72")
    assert strict.details["variant"] == "strict"
    # Both verdicts are reported whichever variant decides.
    assert (strict.details["strict_match"], strict.details["flexible_match"]) == (1, 0)


def test_lm_eval_variant_names_are_accepted():
    out = "#### 72\nand 24"
    assert score(out, "72", variant="strict-match").is_correct is True
    assert score(out, "72", variant="flexible-extract").is_correct is False


def test_strict_without_marker_is_no_answer_but_flexible_finds_the_number():
    # lm-eval's strict filter returns its "[invalid]" fallback when there is no '#### '.
    out = "She has 5 apples and buys 13 more, so 18 in total."
    strict = score(out, "18", variant="strict")
    assert (strict.is_correct, strict.extracted) == (False, None)
    assert strict.details["extraction"] == "no_answer"
    assert score(out, "18").extracted == "18"


def test_dollar_thousands_and_trailing_zero_decimals_match_numerically():
    # lm-eval flexible token is "$1,234.00"; after its ignore-regexes (',' '$') it compares the
    # *string* "1234.00" with "1234" and would say wrong. We compare Decimal values: correct.
    result = score("The answer is $1,234.00", "1234")
    assert (result.is_correct, result.extracted) == (True, "1234")
    assert result.details["flexible_raw"] == "$1,234.00"


def test_unicode_minus_equals_ascii_minus():
    result = score("The temperature fell to \u22125 degrees.", "-5")
    assert (result.is_correct, result.extracted) == (True, "-5")
    assert score("#### \u22125", "-5", variant="strict").is_correct is True


def test_full_width_digits_are_folded():
    result = score("答案是１８", "18")
    assert (result.is_correct, result.extracted) == (True, "18")


def test_comma_space_separates_two_numbers():
    # "1, 2" is the list 1, 2 - never 12 (a naive strip-all-commas would read 12).
    result = score("The first two are 1, 2", "12")
    assert (result.is_correct, result.extracted) == (False, "2")
    assert score("1,2", "12").extracted == "2"  # not a well-formed thousands group either
    assert score("1,234,567 people", "1234567").is_correct is True


@pytest.mark.parametrize(
    ("output", "answer", "extracted"),
    [
        ("18.0", "18", "18"),  # Decimal("18.0") == Decimal("18")
        ("The answer is 18.", "18", "18"),  # trailing period is punctuation
        ("That is 50%.", "50", "50"),  # '%' stripped
        ("It costs -$5", "-5", "-5"),  # sign before the currency symbol
        ("pages 10-12", "12", "12"),  # '-' glued to a number is a range, not a sign
        ("The area is 25 m²", "25", "25"),  # superscript is not a digit (no global NFKC)
        ("x = .5", "0.5", "0.5"),
    ],
)
def test_normalisation_rules(output, answer, extracted):
    result = score(output, answer)
    assert (result.is_correct, result.extracted) == (True, extracted)


def test_no_number_is_false_with_no_answer():
    result = score("I cannot solve this.", "3")
    assert (result.is_correct, result.score, result.extracted) == (False, 0.0, None)
    assert result.details["extraction"] == "no_answer"
    assert result.details["flexible_extracted"] is None


def test_reference_may_be_a_full_gsm8k_solution_or_a_number():
    solution = "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n48+24 = <<48+24=72>>72\n#### 72"
    assert score("72", solution).is_correct is True
    assert score("1,234", 1234).is_correct is True


@pytest.mark.parametrize(
    ("reference", "params"),
    [({}, {}), ({"answer": "twelve"}, {}), ({"answer": "1 2"}, {}), ({"answer": "3"}, {"variant": "x"})],
)
def test_bad_reference_or_params_raise(reference, params):
    with pytest.raises(MetricInputError):
        METRIC.score("3", reference, params)


def test_degenerate_output_is_scored_quickly():
    start = time.perf_counter()
    result = score("1," * 50_000 + " " * 50_000 + "-" * 50_000, "1")
    # A guard against catastrophic regex backtracking (which takes minutes on this input), not a speed target:
    # the bound is loose because these machines are noisy (~0.1 s when idle, over 1 s under heavy load).
    assert time.perf_counter() - start < 15.0
    assert result.extracted == "1"
