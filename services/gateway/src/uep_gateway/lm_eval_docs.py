"""The documents of an imported lm-evaluation-harness task (:mod:`uep_gateway.lm_eval_tasks`) as benchmark rows:
each document's ``doc_to_text``, ``doc_to_target`` and ``doc_to_choice`` applied as lm-eval applies them (a
field's value, a template rendered in the bounded sandbox of :mod:`uep_common.prompting.templating`, or the
literal), the text stored as the input field ``text`` (and the choices as ``choices``), the target as the
reference, and the original document kept in the row's metadata (``lm_eval_doc``) for the lm-eval export.
"""

from __future__ import annotations

import ast
from typing import Any

from uep_common.prompting.prompts import PromptRenderError, render_prompt
from uep_gateway.lm_eval_tasks import LmEvalTask
from uep_gateway.upload_worker import set_phase
from uep_gateway.uploads import UploadInvalid, UploadLimits, UploadProblem, read_records, validate_rows


def _apply(rule: Any, doc: dict[str, Any]) -> Any:
    """lm-eval's reading of a doc_to_* rule: a field's value, a rendered template, or the literal itself.

    Raises:
        PromptRenderError: the template fails on the document (in the sandbox).
    """
    if isinstance(rule, str):
        return doc[rule] if rule in doc else render_prompt(rule, doc)
    return rule


def _choices(task: LmEvalTask, doc: dict[str, Any]) -> list[str]:
    value = _apply(task.doc_to_choice, doc)
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            raise ValueError(f"doc_to_choice rendered {value[:200]!r}, not a list") from None
    if isinstance(value, dict):
        value = list(value.values())
    if not isinstance(value, list) or not value:
        raise ValueError("doc_to_choice gave no list of choices")
    return [str(c) for c in value]


def _record(task: LmEvalTask, doc: dict[str, Any]) -> dict[str, Any]:
    """One document as our nested row ``{"input", "reference", "metadata"}``.

    Raises:
        PromptRenderError, ValueError, KeyError: a rule does not fit the document (the message says which).
    """
    text = _apply(task.doc_to_text, doc)
    target = _apply(task.doc_to_target, doc)
    row_input: dict[str, Any] = {"text": str(text)}
    if task.output_type == "multiple_choice":
        choices = _choices(task, doc)
        if isinstance(target, str) and target.strip().isdigit():
            target = int(target.strip())
        gold = target if isinstance(target, int) else choices.index(str(target)) if str(target) in choices else None
        if gold is None or not 0 <= gold < len(choices):
            raise ValueError(f"doc_to_target {target!r} is neither a choice nor an index of one")
        row_input["choices"] = choices
        reference: dict[str, Any] = {"gold": gold, "choices": choices}
    elif isinstance(target, list):
        reference = {"answers": [str(t) for t in target]}
    else:
        reference = {"answer": str(target)}
    return {"input": row_input, "reference": reference, "metadata": {"lm_eval_doc": doc}}


def check_lm_eval_upload(
    data: bytes,
    fmt: str,
    task: LmEvalTask,
    limits: UploadLimits,
    config: dict[str, Any],
    reference_schemas: dict[str, dict[str, Any]],
) -> tuple[list[Any], str | None]:
    """The worker job of an import: read the documents, render each through the task's rules (problems name
    the line), then check and version the rows as any upload (:func:`uep_gateway.uploads.check_upload`'s
    result).

    Raises:
        UploadInvalid: as :func:`uep_gateway.uploads.read_records`, a rule that fails on a document, or
            :func:`uep_gateway.uploads.validate_rows`.
    """
    set_phase("parse")
    docs = read_records(data, fmt, limits)
    set_phase("render")
    records: list[tuple[int, object]] = []
    problems: list[UploadProblem] = []
    for number, doc in docs:
        if not isinstance(doc, dict):
            problems.append(
                UploadProblem(["body", "file", f"line {number}"], f"line {number}: a document must be an object", "bad_row")
            )
            continue
        try:
            records.append((number, _record(task, doc)))
        except (PromptRenderError, ValueError, KeyError, IndexError, TypeError) as exc:
            problems.append(
                UploadProblem(
                    ["body", "file", f"line {number}"], f"line {number}: {type(exc).__name__}: {exc}"[:500], "bad_document"
                )
            )
        if len(problems) >= 20:
            break
    if problems:
        raise UploadInvalid(problems)
    rows = validate_rows(records, task.template(), limits.max_rows, limits, reference_schemas)
    from uep_common.contract.benchmarks import content_hash

    return rows, content_hash(config, rows)
