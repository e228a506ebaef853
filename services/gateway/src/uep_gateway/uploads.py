"""Custom benchmark uploads: parse JSONL, CSV or Parquet, validate every row, build the benchmark version.

Row shapes (any format):

- nested (JSONL): ``{"id": "q1", "input": {"question": "..."}, "reference": {"answer": "..."}}``; a scalar
  ``reference`` means ``{"answer": scalar}``; optional ``metadata`` object.
- flat (JSONL, CSV, Parquet): ``id`` (or ``external_id``) is the sample id; ``reference`` or ``answer`` is
  the answer; ``reference.<field>`` columns go to the reference; every other column is an input field.

Every row must render the benchmark's prompt template (so a template naming a missing field fails at
upload, not mid-evaluation). Errors name the line (1-based; CSV counts the header as line 1, Parquet rows
count from 1) and the field; nothing is stored unless every row is valid.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field

from uep_common.prompts import PromptRenderError, render_prompt

FORMATS = ("jsonl", "csv", "parquet")
MAX_ERRORS = 20


@dataclass
class UploadProblem:
    """One problem with the upload: where (``loc``), what (``msg``) and its kind (``type``)."""

    loc: list[str]
    msg: str
    type: str


class UploadInvalid(Exception):
    """The upload cannot be stored; ``problems`` lists up to :data:`MAX_ERRORS` of them."""

    def __init__(self, problems: list[UploadProblem]) -> None:
        super().__init__("; ".join(p.msg for p in problems))
        self.problems = problems


@dataclass
class Row:
    """A validated sample: ``ordinal`` in file order, ``external_id``, ``input`` and ``reference`` dicts."""

    ordinal: int
    external_id: str | None
    input: dict
    reference: dict
    meta: dict = field(default_factory=dict)


def detect_format(filename: str | None, declared: str | None) -> str:
    """The declared format, else the file extension. Raises UploadInvalid naming ``format`` otherwise."""
    fmt = (declared or (filename or "").rsplit(".", 1)[-1]).lower()
    fmt = {"ndjson": "jsonl", "json": "jsonl", "pq": "parquet"}.get(fmt, fmt)
    if fmt not in FORMATS:
        raise UploadInvalid([UploadProblem(["body", "format"], f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}", "bad_format")])
    return fmt


def read_records(data: bytes, fmt: str) -> list[tuple[int, object]]:
    """``(line number, record)`` pairs of the file. Raises UploadInvalid for an unreadable file."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(io.BytesIO(data)).to_pylist()
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
            raise UploadInvalid([UploadProblem(["body", "file"], f"not a readable Parquet file: {exc}", "bad_file")]) from None
        return [(i, r) for i, r in enumerate(rows, start=1)]
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UploadInvalid([UploadProblem(["body", "file"], f"not UTF-8 text: {exc}", "bad_encoding")]) from None
    if fmt == "csv":
        reader = csv.DictReader(io.StringIO(text))
        out = []
        for rec in reader:
            if None in rec:
                raise UploadInvalid([UploadProblem(["body", "file", f"line {reader.line_num}"], f"line {reader.line_num}: more values than header columns", "bad_row")])
            out.append((reader.line_num, rec))
        return out
    out, problems = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            problems.append(UploadProblem(["body", "file", f"line {number}"], f"line {number}: invalid JSON: {exc.msg}", "bad_json"))
            if len(problems) >= MAX_ERRORS:
                break
    if problems:
        raise UploadInvalid(problems)
    return out


def to_row(ordinal: int, number: int, rec: object) -> Row:
    """One record as a Row. Raises UploadInvalid (one problem) naming the line and the field."""

    def bad(fld: str, msg: str, kind: str) -> UploadInvalid:
        return UploadInvalid([UploadProblem(["body", "file", f"line {number}", fld], f"line {number}: field {fld!r} {msg}", kind)])

    if not isinstance(rec, dict):
        raise bad("<row>", "must be an object", "bad_row")
    ext = rec.get("id", rec.get("external_id"))
    ext = None if ext in (None, "") else str(ext)
    if "input" in rec:
        if not isinstance(rec["input"], dict) or not rec["input"]:
            raise bad("input", "must be a non-empty object", "bad_input")
        if rec.get("reference") in (None, "", {}):
            raise bad("reference", "is required", "missing_reference")
        ref = rec["reference"] if isinstance(rec["reference"], dict) else {"answer": rec["reference"]}
        meta = rec.get("metadata") or {}
        if not isinstance(meta, dict):
            raise bad("metadata", "must be an object", "bad_metadata")
        return Row(ordinal, ext, rec["input"], ref, meta)
    ref: dict = {}
    inp: dict = {}
    for k, v in rec.items():
        if k in ("id", "external_id"):
            continue
        if k in ("reference", "answer"):
            if v not in (None, ""):
                ref["answer"] = v
        elif k.startswith("reference."):
            ref[k.split(".", 1)[1]] = v
        else:
            inp[k] = v
    if not ref:
        raise bad("reference", "is required (a 'reference' or 'answer' column)", "missing_reference")
    if not inp:
        raise bad("input", "no input columns besides id and reference", "bad_input")
    return Row(ordinal, ext, inp, ref)


def validate_rows(records: list[tuple[int, object]], template: str, max_rows: int) -> list[Row]:
    """Rows of ``records``, each checked and rendered through ``template``.

    Raises:
        UploadInvalid: no rows, too many rows, or up to :data:`MAX_ERRORS` bad rows (line and field named).
    """
    if not records:
        raise UploadInvalid([UploadProblem(["body", "file"], "the file holds no rows", "empty_file")])
    if len(records) > max_rows:
        raise UploadInvalid([UploadProblem(["body", "file"], f"{len(records)} rows; at most {max_rows} are accepted", "too_many_rows")])
    rows: list[Row] = []
    problems: list[UploadProblem] = []
    seen_ids: dict[str, int] = {}
    for ordinal, (number, rec) in enumerate(records):
        try:
            row = to_row(ordinal, number, rec)
            render_prompt(template, row.input)
        except UploadInvalid as exc:
            problems += exc.problems
        except PromptRenderError as exc:
            problems.append(UploadProblem(["body", "file", f"line {number}"], f"line {number}: {exc}", "template_error"))
        else:
            if row.external_id is not None and row.external_id in seen_ids:
                problems.append(UploadProblem(["body", "file", f"line {number}", "id"],
                                              f"line {number}: field 'id' repeats line {seen_ids[row.external_id]}", "duplicate_id"))
            elif row.external_id is not None:
                seen_ids[row.external_id] = number
            rows.append(row)
        if len(problems) >= MAX_ERRORS:
            break
    if problems:
        raise UploadInvalid(problems)
    return rows
