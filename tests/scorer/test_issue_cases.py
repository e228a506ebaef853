"""Worked cases of metric correctness, one test per case with the value it must give.

Each test states its case number and its expected value. Cases 5 and 6 (BLEU/ROUGE) are covered with the
text metrics, not here.
"""

import time
import warnings

import pytest

from uep_scorer.metrics import get_metric
from uep_scorer.metrics.classification import classification_report
from uep_scorer.metrics.passk import pass_at_k

GSM8K = get_metric("gsm8k_numeric_exact_match")
CHOICE = get_metric("multiple_choice_letter")
HUMANEVAL = get_metric("humaneval_pass_at_1")


def test_case_1_number_followed_by_comma_and_words():
    # case 1: extracted 72, correct (flexible variant).
    result = GSM8K.score("The total is 72, in all, so the farm earns that much.", {"answer": "72"}, {"variant": "flexible"})
    assert (result.extracted, result.is_correct) == ("72", True)


def test_case_2_full_solution_reference_and_negative_numbers():
    # case 2: a "#### -3" reference; "-3" vs "-5"; U+2212 minus sign.
    said = GSM8K.score("Subtracting 7 from 4 gives us -3, so the answer is -3", {"answer": "Step 1: 4 - 7 = -3\n#### -3"}, {})
    assert (said.extracted, said.is_correct) == ("-3", True)
    assert GSM8K.score("…so the answer is -3", {"answer": "#### -3"}, {}).is_correct is True
    wrong = GSM8K.score("5", {"answer": "-5"}, {})
    assert (wrong.extracted, wrong.is_correct) == ("5", False)
    unicode_minus = GSM8K.score("The final value is \u22123", {"answer": "-3"}, {})
    assert (unicode_minus.extracted, unicode_minus.is_correct) == ("-3", True)


def test_case_3_article_a_is_not_option_a():
    # case 3: options A-D, key B -> B, not the article "a".
    result = CHOICE.score("The answer is B because a car moves faster.", {"answer": "B"}, {"choices": "ABCD"})
    assert (result.extracted, result.is_correct) == ("B", True)


def test_case_4_last_explicit_answer_wins_and_two_letters_are_no_answer():
    # case 4: the revised answer B counts; "ANSWER: AB" is no answer.
    revised = CHOICE.score("ANSWER: A\nActually, on reflection, ANSWER: B", {"answer": "B"}, {})
    assert (revised.extracted, revised.is_correct) == ("B", True)
    double = CHOICE.score("ANSWER: AB", {"answer": "A"}, {})
    assert (double.extracted, double.is_correct, double.details["extraction"]) == (None, False, "no_answer")


def test_case_7_pass_at_k_values():
    # case 7: k > n undefined; n=10,c=3,k=5 -> 0.916667; n=200,c=1,k=100 -> 0.5.
    assert pass_at_k(2, 0, 5) is None
    assert pass_at_k(10, 3, 5) == pytest.approx(0.916667, abs=1e-6)
    assert pass_at_k(200, 1, 100) == pytest.approx(0.5, abs=1e-12)
    assert get_metric("pass_at_k").score("", {"n": 2, "c": 0}, {"k": 5}).score is None


ADD = {
    "task_id": "cases/add",
    "prompt": 'def add(a, b):\n    """Return a + b."""\n',
    "test": "def check(candidate):\n    assert candidate(2, 3) == 5",
    "entry_point": "add",
}


def test_case_8_infinite_loop_times_out_within_timeout_plus_one_second():
    # case 8: timed out, not passed, returns within timeout + 1 s (timeout_s=2).
    started = time.monotonic()
    result = HUMANEVAL.score("    while True: pass", ADD, {"timeout_s": 2})
    elapsed = time.monotonic() - started
    assert (result.is_correct, result.details["status"]) == (False, "timed_out")
    assert elapsed < 2 + 1, elapsed


def test_case_8_sys_exit_fails_and_correct_body_passes():
    # case 8: sys.exit(1) -> failed; "return a + b" -> passed.
    exited = HUMANEVAL.score("    import sys; sys.exit(1)", ADD, {"timeout_s": 2})
    assert (exited.is_correct, exited.details["status"]) == (False, "failed")
    passed = HUMANEVAL.score("    return a + b", ADD, {"timeout_s": 2})
    assert (passed.is_correct, passed.details["status"]) == (True, "passed")


def test_case_9_classification_undefined_values_are_none():
    # case 9: no positives anywhere -> precision, recall, F1 None, no exception or warning;
    # positives never predicted -> recall 0.0, F1 0.0, precision None (0/0).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        none_positive = classification_report([0, 0, 0], [0, 0, 0], positive_label=1)["binary"]
        never_predicted = classification_report([1, 0, 1], [0, 0, 0], positive_label=1)["binary"]
    assert (none_positive["precision"], none_positive["recall"], none_positive["f1"]) == (None, None, None)
    assert (never_predicted["precision"], never_predicted["recall"], never_predicted["f1"]) == (None, 0.0, 0.0)
