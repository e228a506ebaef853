"""HumanEval functional correctness, pass@1 of a single completion.

Program construction (source: openai/human-eval ``human_eval/execution.py`` builds
``prompt + completion + "\\n" + test + "\\n" + f"check({entry_point})"``; the stop sequences
``["\\nclass", "\\ndef", "\\n#", "\\nif", "\\nprint"]`` are those of the Codex paper, Chen et al. 2021,
and of lm-eval's ``humaneval.yaml`` ``until``):

1. If the output has a fenced code block (```` ```python ````, a bare ```` ``` ```` or any other info
   string), the first block is the code; an unterminated fence (generation cut off) runs to the end
   of the output. Without a fence the whole output is the code.
2. If that code came from a fence and defines ``def <entry_point>(`` at top level, it is a *full
   solution*: it is used as is, preceded by the part of the prompt before ``def <entry_point>(``.
   That part holds the imports and, for HumanEval/10, /32, /38 and /50, helper functions
   (``is_palindrome``, ``poly``, ``encode_cyclic``, ``encode_shift``) that the tests call - so it is
   taken up to the entry point rather than up to the first ``def``.
3. Otherwise the code is a *continuation* of the prompt: it is cut at the earliest stop sequence and
   appended to the prompt.
4. Then ``+ "\\n" + test + "\\n" + f"check({entry_point})\\n"`` (:func:`build_program`, the program
   human-eval would run).

Execution (:func:`build_task`, :func:`uep_scorer.sandbox.run_task`): the program is not run as one piece. The
part from steps 1-3 (prompt + completion, or preamble + full solution) is the *candidate* and runs in its own
process; the benchmark's prompt (for its helper functions) and test run in the sandbox's trusted runner, whose
``check`` gets a proxy of the candidate's entry point (arguments and return values cross as plain values),
so nothing the model wrote can reach the verdict. Consequences for fidelity: an argument the candidate
mutates in place is not mutated in the test's copy, and arguments/return values must be plain data
(``None``/bool/int/float/complex/str/bytes and lists, tuples, dicts, sets of them) - true of every HumanEval
test. Sandboxed code sees only the standard library. Under ``UEP_SANDBOX_MODE=unsafe_process`` the single
program of step 4 runs in one plain process, as human-eval does.
"""

from __future__ import annotations

import re
from typing import Any

from .base import MetricInputError, MetricResult, binary_result
from .sandbox import CodeTask, SandboxLimits, run_task

STOP_SEQUENCES = ("\nclass", "\ndef", "\n#", "\nif", "\nprint")
# Any info string is accepted after the opening fence so that a non-Python first block cannot make
# its closing fence pair up as an opening one.
_FENCE = re.compile(r"```[ \t]*[\w+.#-]*[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_MAX_TIMEOUT_S = 120.0


def truncate_at_stop(completion: str) -> str:
    """Cut ``completion`` at the earliest HumanEval stop sequence (the sequence is dropped)."""
    cut = min((i for i in (completion.find(s) for s in STOP_SEQUENCES) if i != -1), default=-1)
    return completion if cut == -1 else completion[:cut]


def build_candidate(output: str, prompt: str, entry_point: str) -> tuple[str, str, str]:
    """The candidate's part of the program (steps 1-3 of the module docstring).

    Returns:
        ``(body, code, kind)``: prompt + continuation or preamble + full solution, the part taken from the
        output, and ``kind`` = ``"full_solution"`` or ``"continuation"``.
    """
    fence = _FENCE.search(output)
    code = fence.group(1) if fence else output
    defines_entry = re.search(rf"(?m)^def\s+{re.escape(entry_point)}\s*\(", code) is not None
    if fence and defines_entry:
        entry_def = re.search(rf"(?m)^def\s+{re.escape(entry_point)}\s*\(", prompt)
        preamble = prompt[: entry_def.start()] if entry_def else ""
        kind, body = "full_solution", preamble + code
    else:
        code = truncate_at_stop(code)
        kind, body = "continuation", prompt + code
    return body, code, kind


def build_program(output: str, prompt: str, test: str, entry_point: str) -> tuple[str, str, str]:
    """Assemble the whole program human-eval would execute from a model ``output`` (module docstring).

    Returns:
        ``(program, code, kind)``: the full program text, the part taken from the output, and
        ``kind`` = ``"full_solution"`` or ``"continuation"``.
    """
    body, code, kind = build_candidate(output, prompt, entry_point)
    return f"{body}\n{test}\n" + f"check({entry_point})\n", code, kind


def build_task(output: str, prompt: str, test: str, entry_point: str) -> tuple[CodeTask, str, str]:
    """The program split by trust for :func:`uep_scorer.sandbox.run_task`.

    Returns:
        ``(task, code, kind)``: candidate = :func:`build_candidate`'s body; prompt, test and entry point from the
        benchmark; ``code`` and ``kind`` as in :func:`build_program`.
    """
    body, code, kind = build_candidate(output, prompt, entry_point)
    return CodeTask(candidate=body, entry_point=entry_point, prompt=prompt, test=test), code, kind


def _reference(reference: dict[str, Any]) -> tuple[str, str, str]:
    try:
        prompt, test, entry_point = reference["prompt"], reference["test"], reference["entry_point"]
    except KeyError as exc:
        raise MetricInputError(f"humaneval reference needs prompt, test, entry_point; missing {exc}") from exc
    if not all(isinstance(v, str) for v in (prompt, test, entry_point)) or not entry_point.isidentifier():
        raise MetricInputError("humaneval prompt/test must be strings and entry_point an identifier")
    return prompt, test, entry_point


def _timeout(params: dict[str, Any]) -> float:
    value = params.get("timeout_s", 10.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= _MAX_TIMEOUT_S:
        raise MetricInputError(f"timeout_s must be a number in (0, {_MAX_TIMEOUT_S}]; got {value!r}")
    return float(value)


class HumanEvalPassAt1:
    """``humaneval_pass_at_1``: does the completion pass the problem's unit tests?

    Reference: a HumanEval problem ``{"prompt", "test", "entry_point"}`` (extra keys such as
    ``task_id``/``canonical_solution`` are ignored). Params: ``{"timeout_s": 10.0}`` wall-clock
    seconds, at most 120. Blocking for up to ``timeout_s``; call it via ``asyncio.to_thread``.

    Result: ``is_correct`` True iff the sandbox status is ``"passed"``; ``"failed"`` and
    ``"timed_out"`` are False; ``"error"`` (sandbox could not start) and ``"sandbox_unavailable"`` (no
    isolation on this machine, nothing was run) are ``None`` with ``score=None``.
    ``extracted`` is the code taken from the output (``None`` if blank). ``details``: ``status``,
    ``reason``, ``kind`` (``"full_solution"``/``"continuation"``), ``returncode``, ``duration_s``,
    ``stderr_tail``.

    Raises:
        MetricInputError: missing reference keys or a bad ``timeout_s``.
    """

    name = "humaneval_pass_at_1"
    version = "1"
    params = {"timeout_s": "wall-clock limit per program in seconds (default 10.0)"}
    param_types = {"timeout_s": "number"}
    required_params: tuple[str, ...] = ()
    source = "Chen et al. 2021 (HumanEval); program assembly and stop sequences as in openai/human-eval"

    def score(self, output: str, reference: dict[str, Any], params: dict[str, Any]) -> MetricResult:
        """Score one model output; see the class docstring for shapes."""
        prompt, test, entry_point = _reference(reference)
        timeout_s = _timeout(params)
        task, code, kind = build_task(output or "", prompt, test, entry_point)
        run = run_task(task, SandboxLimits(timeout_s=timeout_s))
        details = {
            "status": run.status,
            "reason": run.reason,
            "kind": kind,
            "returncode": run.returncode,
            "duration_s": round(run.duration_s, 3),
            "stderr_tail": run.stderr_tail,
        }
        extracted = code if code.strip() else None
        if run.status in ("error", "sandbox_unavailable"):
            return MetricResult(self.name, self.version, None, None, extracted, details)
        return binary_result(self, correct=run.status == "passed", extracted=extracted, details=details)
