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

Execution (:func:`build_task`, :func:`uep_common.sandbox.run_task`): the program is not run as one piece. The
part from steps 1-3 (prompt + completion, or preamble + full solution) is the *candidate* and runs in its own
process; the benchmark's prompt (for its helper functions) and test run in the sandbox's trusted runner, whose
``check`` gets a proxy of the candidate's entry point (arguments and return values cross as plain values),
so nothing the model wrote can reach the verdict. Consequences for fidelity: an argument the candidate
mutates in place is not mutated in the test's copy, and arguments/return values must be plain data
(``None``/bool/int/float/complex/str/bytes and lists, tuples, dicts, sets of them) - true of every HumanEval
test. Sandboxed code sees only the standard library. Under ``UEP_SANDBOX_MODE=unsafe_process`` the single
program of step 4 runs in one plain process, as human-eval does.

Failure detail (:func:`describe_failure`): a program that did not pass gets ``failure``, one line naming the
assertion or exception and where it was raised (``AssertionError (test.py line 10: assert candidate(...) ==
True)``) or the limit it ran into, and ``stderr_tail``, the end of its stderr with the source line written under
each traceback frame of the candidate, the prompt or the test (the files exist only inside the sandbox, so
Python's traceback cannot print them) and the sandbox runner's own frames left out, at most
:data:`STDERR_TAIL_BYTES` bytes of UTF-8.
"""

from __future__ import annotations

import re
from typing import Any

from uep_common.contract.metric_params.answers import HumanEvalParams

from .base import MetricInputError, MetricResult, Params, binary_result, read_params
from .registry import register_metric
from .sandbox import CodeTask, SandboxLimits, SandboxResult, run_task, status

STOP_SEQUENCES = ("\nclass", "\ndef", "\n#", "\nif", "\nprint")
# Any info string is accepted after the opening fence so that a non-Python first block cannot make
# its closing fence pair up as an opening one.
_FENCE = re.compile(r"```[ \t]*[\w+.#-]*[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
STDERR_TAIL_BYTES = 2048
"""Bytes (UTF-8) of a failed or timed-out program's annotated stderr kept in ``details["stderr_tail"]``."""
MAX_FAILURE_CHARS = 500
"""Characters of ``details["failure"]``."""
_FRAME = re.compile(r'^  File "([^"]+)", line (\d+)(?:, in .*)?$')
_CODE_FILES = ("candidate.py", "test.py", "prompt.py")


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
    """The program split by trust for :func:`uep_common.sandbox.run_task`.

    Returns:
        ``(task, code, kind)``: candidate = :func:`build_candidate`'s body; prompt, test and entry point from the
        benchmark; ``code`` and ``kind`` as in :func:`build_program`.
    """
    body, code, kind = build_candidate(output, prompt, entry_point)
    return CodeTask(candidate=body, entry_point=entry_point, prompt=prompt, test=test), code, kind


def _sources(task: CodeTask) -> dict[str, str]:
    """The text of each file the run's tracebacks name (the unsafe fallback runs one whole program)."""
    if status().mode == "unsafe_process":
        return {"candidate.py": task.full_program()}
    check = f"check({task.entry_point})\n" if task.entry_point else ""
    return {"candidate.py": task.candidate, "test.py": task.test, "prompt.py": task.prompt, "check.py": check}


def _source_line(sources: dict[str, str], name: str, line: int) -> str | None:
    lines = sources.get(name, "").splitlines()
    return lines[line - 1].strip() or None if 0 < line <= len(lines) else None


def annotate_traceback(stderr: str, sources: dict[str, str]) -> str:
    """``stderr`` with the source line under every traceback frame of a file in ``sources`` that lacks one,
    and the frames of code outside them (the sandbox runner's ``<string>`` frames) dropped."""
    lines = stderr.splitlines()
    out: list[str] = []
    for i, line in enumerate(lines):
        frame = _FRAME.match(line)
        if frame is None:
            out.append(line)
            continue
        name, number = frame[1], int(frame[2])
        if name not in sources:
            continue
        out.append(line)
        has_source = i + 1 < len(lines) and lines[i + 1].startswith("    ") and not _FRAME.match(lines[i + 1])
        text = None if has_source else _source_line(sources, name, number)
        if text is not None:
            out.append(f"    {text}")
    return "\n".join(out) + ("\n" if stderr.endswith("\n") else "")


def _tail_bytes(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    return text if len(data) <= limit else data[-limit:].decode("utf-8", "ignore")


def _last_exception(block: list[str]) -> str | None:
    return next((ln.strip() for ln in reversed(block) if ln.strip() and not ln.startswith((" ", "\t"))), None)


def _innermost(block: list[str], sources: dict[str, str]) -> str | None:
    for line in reversed(block):
        frame = _FRAME.match(line)
        if frame and frame[1] in _CODE_FILES:
            text = _source_line(sources, frame[1], int(frame[2]))
            return f"{frame[1]} line {frame[2]}" + (f": {text}" if text else "")
    return None


def describe_failure(run: SandboxResult, sources: dict[str, str], timeout_s: float) -> str | None:
    """One line saying why a program did not pass; None when it passed or never ran.

    ``failed``: the last exception of the run's stderr and where it was raised - the innermost frame in
    the candidate, prompt or test (``sources``: file name -> text), and first the candidate's own frame when
    the test's exception came from a call of the candidate. Without a traceback: how the candidate ended
    (``reason``, ``returncode``). ``timed_out``: the limit (wall clock or CPU) and its seconds. At most
    :data:`MAX_FAILURE_CHARS` characters.
    """
    if run.status == "timed_out":
        limit = "CPU" if run.reason == "cpu_limit" else "wall-clock"
        return f"timed out: {limit} limit of {timeout_s:g} s"
    if run.status != "failed":
        return None
    blocks: list[list[str]] = []
    for line in run.stderr_tail.splitlines():
        if line.startswith("Traceback (most recent call last):") or not blocks:
            blocks.append([])
        blocks[-1].append(line)
    exception = _last_exception(blocks[-1]) if blocks else None
    if exception is None or exception.startswith("Traceback"):
        ended = {
            "candidate_exited": f"the candidate's process exited with status {run.returncode}",
            "candidate_killed": f"the candidate's process was killed by signal {-(run.returncode or 0)}",
            "candidate_protocol_violation": "the candidate broke the call protocol of the sandbox",
        }
        return ended.get(run.reason or "", f"failed ({run.reason or 'no traceback'})")[:MAX_FAILURE_CHARS]
    where = [_innermost(blocks[-1], sources)]
    if len(blocks) > 1 and _last_exception(blocks[-2]) == exception:  # raised in the candidate, seen by the test
        where.insert(0, _innermost(blocks[-2], sources))
    located = "; ".join(w for w in where if w)
    text = f"{exception} ({located})" if located else exception
    return text if len(text) <= MAX_FAILURE_CHARS else text[: MAX_FAILURE_CHARS - 1] + "…"


def _reference(reference: dict[str, Any]) -> tuple[str, str, str]:
    try:
        prompt, test, entry_point = reference["prompt"], reference["test"], reference["entry_point"]
    except KeyError as exc:
        raise MetricInputError(f"humaneval reference needs prompt, test, entry_point; missing {exc}") from exc
    if not all(isinstance(v, str) for v in (prompt, test, entry_point)) or not entry_point.isidentifier():
        raise MetricInputError("humaneval prompt/test must be strings and entry_point an identifier")
    return prompt, test, entry_point


@register_metric
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
    ``stderr_tail`` (annotated and bounded for ``failed``/``timed_out``, see the module docstring; raw
    otherwise), and for ``failed``/``timed_out`` ``failure`` (:func:`describe_failure`).

    Raises:
        MetricInputError: missing reference keys or a bad ``timeout_s``.
    """

    name = "humaneval_pass_at_1"
    version = "1"
    params_model = HumanEvalParams
    reference_schema: dict[str, Any] = {
        "type": "object",
        "properties": {k: {"type": "string", "minLength": 1} for k in ("prompt", "test", "entry_point")},
        "required": ["prompt", "test", "entry_point"],
    }
    source = "Chen et al. 2021 (HumanEval); program assembly and stop sequences as in openai/human-eval"

    def score(self, output: str, reference: dict[str, Any], params: Params) -> MetricResult:
        """Score one model output; see the class docstring for shapes."""
        timeout_s = read_params(HumanEvalParams, params).timeout_s
        prompt, test, entry_point = _reference(reference)
        task, code, kind = build_task(output or "", prompt, test, entry_point)
        run = run_task(task, SandboxLimits(timeout_s=timeout_s))
        details: dict[str, Any] = {
            "status": run.status,
            "reason": run.reason,
            "kind": kind,
            "returncode": run.returncode,
            "duration_s": round(run.duration_s, 3),
            "stderr_tail": run.stderr_tail,
        }
        if run.status in ("failed", "timed_out"):
            sources = _sources(task)
            details["failure"] = describe_failure(run, sources, timeout_s)
            details["stderr_tail"] = _tail_bytes(annotate_traceback(run.stderr_tail, sources), STDERR_TAIL_BYTES)
        extracted = code if code.strip() else None
        if run.status in ("error", "sandbox_unavailable"):
            return MetricResult(self.name, self.version, None, None, extracted, details)
        return binary_result(self, correct=run.status == "passed", extracted=extracted, details=details)
