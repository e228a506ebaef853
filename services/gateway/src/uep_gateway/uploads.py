"""Custom benchmark uploads: parse JSONL, CSV or Parquet, validate every row, build the benchmark version.

Row shapes (any format):

- nested (JSONL): ``{"id": "q1", "input": {"question": "..."}, "reference": {"answer": "..."}}``; a scalar
  ``reference`` means ``{"answer": scalar}``; optional ``metadata`` object.
- flat (JSONL, CSV, Parquet): ``id`` (or ``external_id``) is the sample id; ``reference`` or ``answer`` is
  the answer; ``reference.<field>`` columns go to the reference; every other column is an input field.

Every row must render the benchmark's prompt template (so a template naming a missing field fails at
upload, not mid-evaluation), and every reference must fit the reference schema of the benchmark's metrics
(the JSON Schema each metric publishes in the catalogue, :func:`reference_problems`: a ``label_match``
benchmark whose rows carry an ``answer`` and no ``label`` is refused here, not failed item by item). Errors name the line (1-based; CSV counts the header as line 1, Parquet rows
count from 1) and the field; nothing is stored unless every row is valid.

Bounds (:class:`UploadLimits`, from the gateway settings): the row count is checked while reading (Parquet:
from the file's metadata, with the decompressed sizes, before any row is built); each JSONL line, CSV
field and row (as JSON) is bounded; every value must be storable as PostgreSQL jsonb (no NUL character, no
lone surrogate, no NaN or infinity, JSON types only); every rendered prompt is bounded. A row problem names
``["body", "file", "line N", field, ...]``; a template problem names :data:`TEMPLATE_LOC`.

The gateway runs :func:`check_upload` and :func:`render_previews` in a bounded worker process
(:mod:`uep_gateway.upload_worker`), which also bounds the time and memory of everything here.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from typing import Any

from jinja2.exceptions import UndefinedError

from uep_common.contract.configs import CLASSIFICATION_SET_METRICS, SET_KIND_OF_METRIC, is_set_metric
from uep_common.contract.params import param_problems
from uep_common.prompting.prompts import PromptRenderError, render_prompt
from uep_gateway.upload_worker import set_phase

# Causes of a PromptRenderError that depend on the row (a field it lacks, a value of the wrong type), not
# on the template alone.
_ROW_CAUSES: tuple[type[Exception], ...]
try:  # the bounded sandbox's wrapper of a Python exception raised by the template on a row's values
    from uep_common.prompting.templating import TemplateRenderFailure

    _ROW_CAUSES = (UndefinedError, TemplateRenderFailure)
except ImportError:  # a sandbox without it lets those exceptions through (caught below)
    _ROW_CAUSES = (UndefinedError,)

FORMATS = ("jsonl", "csv", "parquet")
MAX_ERRORS = 20
MAX_ID_CHARS = 200  # samples.external_id is VARCHAR(200)
TEMPLATE_LOC = ["body", "spec", "prompt", "template"]
FILE_LOC = ["body", "file"]
_MIN_VALUE_BYTES = 8  # a Parquet value counts at least this much against the decoded-bytes limit
_PARQUET_BATCH_ROWS = 1024


@dataclass
class UploadProblem:
    """One problem with the upload: where (``loc``), what (``msg``) and its kind (``type``)."""

    loc: list[str]
    msg: str
    type: str


class UploadInvalid(Exception):  # noqa: N818 - a public name that callers and tests catch; renaming it breaks them
    """The upload cannot be stored; ``problems`` lists up to :data:`MAX_ERRORS` of them."""

    def __init__(self, problems: list[UploadProblem]) -> None:
        super().__init__("; ".join(p.msg for p in problems))
        self.problems = problems

    def __reduce__(self) -> tuple[type[UploadInvalid], tuple[list[UploadProblem]]]:
        # pickles (it comes back from a worker process)
        return UploadInvalid, (self.problems,)


@dataclass
class Row:
    """A validated sample: ``ordinal`` in file order, ``external_id``, ``input`` and ``reference`` dicts."""

    ordinal: int
    external_id: str | None
    input: dict[str, Any]
    reference: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class UploadLimits:
    """Bounds of one upload (the gateway builds them from its settings; units in each name).

    ``max_rows`` samples; ``max_columns`` Parquet leaf columns or CSV fields; ``max_decoded_bytes`` of
    decompressed and decoded Parquet data; ``max_row_bytes`` per row as UTF-8 JSON (and characters per
    JSONL line or CSV field); ``max_prompt_chars`` per rendered prompt.
    """

    max_rows: int = 200_000
    max_columns: int = 1000
    max_decoded_bytes: int = 256 * 1_048_576
    max_row_bytes: int = 1_048_576
    max_prompt_chars: int = 262_144


def _file_problem(msg: str, kind: str, *loc: str) -> UploadInvalid:
    return UploadInvalid([UploadProblem([*FILE_LOC, *loc], msg, kind)])


def detect_format(filename: str | None, declared: str | None) -> str:
    """The declared format, else the file extension. Raises UploadInvalid naming ``format`` otherwise."""
    fmt = (declared or (filename or "").rsplit(".", 1)[-1]).lower()
    fmt = {"ndjson": "jsonl", "json": "jsonl", "pq": "parquet"}.get(fmt, fmt)
    if fmt not in FORMATS:
        raise UploadInvalid(
            [UploadProblem(["body", "format"], f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}", "bad_format")]
        )
    return fmt


def _too_many_rows(limit: int) -> UploadInvalid:
    return _file_problem(f"more than {limit} rows; at most {limit} are accepted", "too_many_rows")


def check_parquet_metadata(data: bytes, limits: UploadLimits) -> Any:
    """Open ``data`` as Parquet and check its footer metadata against ``limits`` before any row is read:
    ``num_rows`` ≤ ``max_rows``, leaf columns ≤ ``max_columns``, and the decoded size ≤
    ``max_decoded_bytes``, where each column chunk counts ``max(total_uncompressed_size, num_values × 8)``
    (RLE, dictionary and null runs decode to far more than they store). Returns the ``ParquetFile``.

    Raises:
        UploadInvalid: unreadable file, or a bound passed (naming ``["body", "file"]``).
    """
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(io.BytesIO(data))
        md = pf.metadata
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise _file_problem(f"not a readable Parquet file: {exc}", "bad_file") from None
    if md.num_rows > limits.max_rows:
        raise _file_problem(f"the file declares {md.num_rows} rows; at most {limits.max_rows} are accepted", "too_many_rows")
    if md.num_columns > limits.max_columns:
        raise _file_problem(
            f"the file has {md.num_columns} columns; at most {limits.max_columns} are accepted", "too_many_columns"
        )
    decoded = 0
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        for c in range(rg.num_columns):
            chunk = rg.column(c)
            decoded += max(chunk.total_uncompressed_size, chunk.num_values * _MIN_VALUE_BYTES)
        if decoded > limits.max_decoded_bytes:
            raise _file_problem(
                f"the file's rows decompress to more than {limits.max_decoded_bytes} bytes "
                f"(its metadata: at least {decoded} bytes by row group {g + 1})",
                "too_large_decoded",
            )
    return pf


def _read_parquet(data: bytes, limits: UploadLimits) -> list[tuple[int, object]]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    pf = check_parquet_metadata(data, limits)
    try:
        # String columns stay dictionary-encoded while read, so their expanded size is measured before the
        # rows are built (the metadata's sizes count a dictionary-encoded string once).
        strings = [
            f.name
            for f in pf.schema_arrow
            if pa.types.is_string(f.type)
            or pa.types.is_large_string(f.type)
            or pa.types.is_binary(f.type)
            or pa.types.is_large_binary(f.type)
        ]
        pf = pq.ParquetFile(io.BytesIO(data), read_dictionary=strings)
        out: list[tuple[int, object]] = []
        decoded = 0
        for batch in pf.iter_batches(batch_size=_PARQUET_BATCH_ROWS, use_threads=False):
            for col in batch.columns:
                if isinstance(col, pa.DictionaryArray):
                    lengths = pc.take(pc.binary_length(col.dictionary), col.indices)
                    decoded += (pc.sum(lengths).as_py() or 0) + len(col) * _MIN_VALUE_BYTES
                else:
                    decoded += col.nbytes
            if decoded > limits.max_decoded_bytes:
                raise _file_problem(
                    f"the file's rows decode to more than {limits.max_decoded_bytes} bytes "
                    f"(at least {decoded} bytes by row {len(out) + batch.num_rows})",
                    "too_large_decoded",
                )
            if len(out) + batch.num_rows > limits.max_rows:
                raise _too_many_rows(limits.max_rows)
            out.extend(enumerate(batch.to_pylist(), start=len(out) + 1))
        return out
    except UploadInvalid:
        raise
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - a corrupt page is found only while reading
        raise _file_problem(f"not a readable Parquet file: {exc}", "bad_file") from None


def _read_csv(text: str, limits: UploadLimits, max_rows: int) -> list[tuple[int, object]]:
    old = csv.field_size_limit(limits.max_row_bytes)
    try:
        reader = csv.reader(io.StringIO(text))
        out: list[tuple[int, object]] = []
        header: list[str] | None = None
        while True:
            try:
                values = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:  # e.g. a field over the limit, or an unclosed quote
                n = reader.line_num
                raise _file_problem(f"line {n}: unreadable CSV: {exc}", "bad_row", f"line {n}") from None
            n = reader.line_num
            if header is None:
                if len(values) > limits.max_columns:
                    raise _file_problem(
                        f"line {n}: {len(values)} columns; at most {limits.max_columns} are accepted",
                        "too_many_columns",
                        f"line {n}",
                    )
                header = values
                continue
            if not values:
                continue
            if len(values) > len(header):
                raise _file_problem(f"line {n}: more values than header columns", "bad_row", f"line {n}")
            if sum(map(len, values)) > limits.max_row_bytes:
                raise _file_problem(
                    f"line {n}: the row is longer than {limits.max_row_bytes} characters", "row_too_large", f"line {n}"
                )
            if len(out) >= max_rows:
                raise _too_many_rows(max_rows)
            out.append((n, dict(zip(header, values + [None] * (len(header) - len(values)), strict=True))))
        return out
    finally:
        csv.field_size_limit(old)


def _read_jsonl(text: str, limits: UploadLimits, max_rows: int) -> list[tuple[int, object]]:
    out: list[tuple[int, object]] = []
    problems: list[UploadProblem] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(line) > limits.max_row_bytes:
            problems.append(
                UploadProblem(
                    [*FILE_LOC, f"line {number}"],
                    f"line {number}: longer than {limits.max_row_bytes} characters",
                    "row_too_large",
                )
            )
        elif len(out) >= max_rows:
            raise _too_many_rows(max_rows)
        else:
            try:
                out.append((number, json.loads(line)))
            except (ValueError, RecursionError) as exc:  # JSONDecodeError, an int of too many digits, deep nesting
                reason = (
                    exc.msg
                    if isinstance(exc, json.JSONDecodeError)
                    else ("nested too deeply" if isinstance(exc, RecursionError) else str(exc))
                )
                problems.append(
                    UploadProblem([*FILE_LOC, f"line {number}"], f"line {number}: invalid JSON: {reason}", "bad_json")
                )
        if len(problems) >= MAX_ERRORS:
            break
    if problems:
        raise UploadInvalid(problems)
    return out


def read_records(data: bytes, fmt: str, limits: UploadLimits | None = None) -> list[tuple[int, object]]:
    """``(line number, record)`` pairs of the file, read within ``limits`` (default :class:`UploadLimits`;
    at most ``max_rows + 1`` records are read when ``limits`` is not given, so the caller names the count).

    Raises:
        UploadInvalid: an unreadable file, a line or field over its bound, or more rows than allowed.
    """
    max_rows = limits.max_rows if limits is not None else UploadLimits.max_rows + 1
    limits = limits or UploadLimits(max_rows=max_rows)
    if fmt == "parquet":
        return _read_parquet(data, limits)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _file_problem(f"not UTF-8 text: {exc}", "bad_encoding") from None
    if fmt == "csv":
        return _read_csv(text, limits, max_rows)
    return _read_jsonl(text, limits, max_rows)


def _show(key: object) -> str:
    return str(key).replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode()


def value_problem(value: object, path: tuple[Any, ...] = ()) -> tuple[list[str], str] | None:
    """The first part of ``value`` that PostgreSQL jsonb/text cannot store, as ``(path, reason)``: a NUL
    character or lone surrogate in a string or key, NaN or infinity, or a non-JSON type. None if all is
    storable. ``path`` elements are keys (``str``) and list indexes (``"[i]"``)."""
    if isinstance(value, str):
        if "\x00" in value:
            return [*path], "contains a NUL character (\\x00), which cannot be stored"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return [*path], "contains a lone surrogate, which is not valid Unicode"
        return None
    if value is None or isinstance(value, (bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else ([*path], f"is {value}, which JSON cannot hold")
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                return [*path, _show(k)], f"has a key of type {type(k).__name__}; keys must be strings"
            bad = value_problem(k, ())
            if bad:
                return [*path, _show(k)], f"name {bad[1]}"
            bad = value_problem(v, (*path, k))
            if bad:
                return bad
        return None
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            bad = value_problem(v, (*path, f"[{i}]"))
            if bad:
                return bad
        return None
    kind = "binary data" if isinstance(value, (bytes, bytearray)) else f"a {type(value).__module__}.{type(value).__name__} value"
    return [*path], f"is {kind}; only JSON values (strings, numbers, booleans, lists, objects) are accepted"


def _row_problem(number: int, rec: object, limits: UploadLimits) -> UploadProblem | None:
    """A problem storing record ``rec`` (line ``number``) as jsonb, or one over ``max_row_bytes``."""
    try:
        encoded = json.dumps(rec, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError):
        encoded = None
    if encoded is None or b"\\u0000" in encoded:
        bad = value_problem(rec)
        if bad:
            path, reason = bad
            path = [_show(p) for p in path] or ["<row>"]
            fld = path[0] if len(path) == 1 else ".".join(path)
            return UploadProblem([*FILE_LOC, f"line {number}", *path], f"line {number}: field {fld!r} {reason}", "bad_value")
        if encoded is None:  # e.g. nested too deeply to encode
            return UploadProblem([*FILE_LOC, f"line {number}"], f"line {number}: the row cannot be stored as JSON", "bad_value")
    if len(encoded) > limits.max_row_bytes:
        return UploadProblem(
            [*FILE_LOC, f"line {number}"],
            f"line {number}: the row is {len(encoded)} bytes as JSON; at most {limits.max_row_bytes} are accepted",
            "row_too_large",
        )
    return None


def to_row(ordinal: int, number: int, rec: object) -> Row:
    """One record as a Row. Raises UploadInvalid (one problem) naming the line and the field."""

    def bad(fld: str, msg: str, kind: str) -> UploadInvalid:
        return UploadInvalid(
            [UploadProblem(["body", "file", f"line {number}", fld], f"line {number}: field {fld!r} {msg}", kind)]
        )

    if not isinstance(rec, dict):
        raise bad("<row>", "must be an object", "bad_row")
    ext = rec.get("id", rec.get("external_id"))
    ext = None if ext in (None, "") else str(ext)
    if ext is not None and len(ext) > MAX_ID_CHARS:
        raise bad("id", f"is {len(ext)} characters; at most {MAX_ID_CHARS} are accepted", "bad_id")
    if "input" in rec:
        if not isinstance(rec["input"], dict) or not rec["input"]:
            raise bad("input", "must be a non-empty object", "bad_input")
        if rec.get("reference") in (None, "", {}):
            raise bad("reference", "is required", "missing_reference")
        ref: dict[str, Any] = rec["reference"] if isinstance(rec["reference"], dict) else {"answer": rec["reference"]}
        meta = rec.get("metadata") or {}
        if not isinstance(meta, dict):
            raise bad("metadata", "must be an object", "bad_metadata")
        return Row(ordinal, ext, rec["input"], ref, meta)
    ref = {}
    inp: dict[str, Any] = {}
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


def with_class_names(schema: dict[str, Any], class_names: list[str] | None) -> dict[str, Any]:
    """``schema`` (a metric's reference schema) with its ``label`` property restricted to ``class_names`` (a JSON
    Schema ``enum``), so that a row whose gold label is not one of the benchmark's classes is refused; unchanged
    without class names or without a ``label`` property."""
    props = schema.get("properties") or {}
    if not class_names or not isinstance(props.get("label"), dict):
        return schema
    return {**schema, "properties": {**props, "label": {**props["label"], "enum": list(class_names)}}}


def reference_problems(number: int, reference: dict[str, Any], schemas: dict[str, dict[str, Any]]) -> list[UploadProblem]:
    """What in ``reference`` (of the row on line ``number``) the metrics cannot read: each error of the JSON Schema
    of each metric (``schemas``: metric name → the ``reference_schema`` of its catalogue entry; validated with
    ``jsonschema``, draft 2020-12), named ``["body", "file", "line N", "reference", field]``. The one check of
    references against the metrics' schemas; :func:`validate_rows` calls it for every row."""
    from jsonschema import Draft202012Validator

    out: list[UploadProblem] = []
    for metric, schema in schemas.items():
        if not schema:
            continue
        for err in sorted(Draft202012Validator(schema).iter_errors(reference), key=lambda e: list(map(str, e.path))):
            path = [str(p) for p in err.absolute_path]
            if err.validator == "required":
                missing = next((m for m in err.validator_value if m not in (err.instance or {})), None)
                path, reason = [*path, str(missing)], "is required"
            elif err.validator == "anyOf" and all(set(sub) == {"required"} for sub in err.validator_value):
                names = [n for sub in err.validator_value for n in sub["required"]]
                path, reason = [*path, names[0]], "is required (or " + ", ".join(repr(n) for n in names[1:]) + ")"
            else:
                reason = err.message
            fld = ".".join(["reference", *path])
            out.append(
                UploadProblem(
                    [*FILE_LOC, f"line {number}", "reference", *path],
                    f"line {number}: field {fld!r} {reason}: metric {metric!r} reads references of the form "
                    f"{json.dumps(schema.get('properties', {}), ensure_ascii=False)[:300]}",
                    "bad_reference",
                )
            )
    return out


def _template_problem(number: int, msg: str, kind: str) -> UploadProblem:
    return UploadProblem(list(TEMPLATE_LOC), f"line {number}: {msg}", kind)


def validate_rows(
    records: list[tuple[int, object]],
    template: str,
    max_rows: int,
    limits: UploadLimits | None = None,
    reference_schemas: dict[str, dict[str, Any]] | None = None,
) -> list[Row]:
    """Rows of ``records``, each checked (storable, within ``limits.max_row_bytes``, its reference fitting
    ``reference_schemas``: :func:`reference_problems`) and rendered through ``template`` (each prompt within
    ``limits.max_prompt_chars``; default :class:`UploadLimits`).

    A render failure that depends on the row (a field it lacks, a type error) names the row's line; one of
    the template itself (syntax, sandbox refusal, a work or output limit, a prompt over the bound) names
    :data:`TEMPLATE_LOC` once, with the line it was rendering.

    Raises:
        UploadInvalid: no rows, too many rows, or up to :data:`MAX_ERRORS` problems (line and field named).
    """
    limits = limits or UploadLimits(max_rows=max_rows)
    if not records:
        raise _file_problem("the file holds no rows", "empty_file")
    if len(records) > max_rows:
        raise _file_problem(f"{len(records)} rows; at most {max_rows} are accepted", "too_many_rows")
    rows: list[Row] = []
    problems: list[UploadProblem] = []
    seen_ids: dict[str, int] = {}
    for ordinal, (number, rec) in enumerate(records):
        try:
            row = to_row(ordinal, number, rec)
            stored = _row_problem(number, rec, limits)
            if stored:
                raise UploadInvalid([stored])
            if reference_schemas and (bad_reference := reference_problems(number, row.reference, reference_schemas)):
                raise UploadInvalid(bad_reference)
            prompt = render_prompt(template, row.input)
        except UploadInvalid as exc:
            problems += exc.problems
        except PromptRenderError as exc:
            if isinstance(exc.__cause__, _ROW_CAUSES):
                problems.append(UploadProblem([*FILE_LOC, f"line {number}"], f"line {number}: {exc}", "template_error"))
            else:
                problems.append(_template_problem(number, str(exc), "template_error"))
                break
        except (OverflowError, MemoryError, RecursionError) as exc:
            problems.append(
                _template_problem(number, f"prompt template refused: {type(exc).__name__}: {exc}", "template_too_costly")
            )
            break
        except Exception as exc:  # noqa: BLE001 - a template may fail on one row's values (e.g. a type error)
            problems.append(
                UploadProblem(
                    [*FILE_LOC, f"line {number}"],
                    f"line {number}: prompt template failed on this row: {type(exc).__name__}: {exc}",
                    "template_error",
                )
            )
        else:
            if len(prompt) > limits.max_prompt_chars:
                problems.append(
                    _template_problem(
                        number,
                        f"the template renders a prompt of {len(prompt)} characters; at most {limits.max_prompt_chars} are accepted",
                        "prompt_too_long",
                    )
                )
                break
            if row.external_id is not None and row.external_id in seen_ids:
                problems.append(
                    UploadProblem(
                        ["body", "file", f"line {number}", "id"],
                        f"line {number}: field 'id' repeats line {seen_ids[row.external_id]}",
                        "duplicate_id",
                    )
                )
            elif row.external_id is not None:
                seen_ids[row.external_id] = number
            rows.append(row)
        if len(problems) >= MAX_ERRORS:
            break
    if problems:
        raise UploadInvalid(problems)
    return rows


def check_upload(
    data: bytes,
    fmt: str,
    template: str,
    limits: UploadLimits,
    config: dict[str, Any] | None = None,
    reference_schemas: dict[str, dict[str, Any]] | None = None,
) -> tuple[list[Row], str | None]:
    """Read ``data`` (format ``fmt``), validate and render every row (references checked against
    ``reference_schemas``, metric name → JSON Schema), and, given the benchmark's ``config``, compute its
    version (:func:`uep_common.contract.benchmarks.content_hash`); the worker job of an upload. Returns ``(rows,
    version or None)``.

    Raises:
        UploadInvalid: as :func:`read_records` and :func:`validate_rows`.
    """
    set_phase("parse")
    records = read_records(data, fmt, limits)
    set_phase("render")
    rows = validate_rows(records, template, limits.max_rows, limits, reference_schemas)
    if config is None:
        return rows, None
    from uep_common.contract.benchmarks import content_hash

    return rows, content_hash(config, rows)


def render_previews(template: str, inputs: list[dict[str, Any]], max_chars: int) -> list[tuple[str, bool, str | None]]:
    """Each of ``inputs`` rendered through ``template``, as ``(prompt, truncated, error)``: the prompt cut
    to ``max_chars`` characters (``truncated`` then True), or ``("", False, reason)`` when it fails (the
    preview's worker job; a template that fails on every row fails once per row)."""
    set_phase("render")
    out: list[tuple[str, bool, str | None]] = []
    for fields in inputs:
        try:
            prompt = render_prompt(template, fields)
        except Exception as exc:  # noqa: BLE001 - a stored template may fail on a row; the preview says why
            out.append(("", False, f"{type(exc).__name__}: {exc}"[:500]))
            continue
        out.append((prompt[:max_chars], len(prompt) > max_chars, None))
    return out


def spec_problems(spec: object, loc: tuple[Any, ...] = ("body", "spec")) -> list[UploadProblem]:
    """The strings of a benchmark spec (parsed JSON) that PostgreSQL cannot store (NUL character, lone
    surrogate), each named by its path under ``loc``."""
    bad = value_problem(spec)
    if not bad:
        return []
    path, reason = bad
    path = [_show(p) for p in path]
    return [UploadProblem([*loc, *path], f"field {'.'.join(path) or 'spec'!r} {reason}", "bad_value")]


METRICS_LOC = ("body", "spec", "metrics")


def metric_set_problems(
    metric_name: str,
    metric_params: dict[str, Any],
    entries: list[tuple[str, dict[str, Any], bool]],
    catalogue: dict[str, tuple[dict[str, str], list[str]]],
) -> list[UploadProblem]:
    """The problems of a spec's ``metrics`` (``entries``: ``(name, params, primary)`` in declared order), each
    named ``["body", "spec", "metrics", i, ...]``: a name that is neither a set-level metric
    (:func:`uep_common.contract.configs.is_set_metric`) nor in ``catalogue`` (per-item metric name → ``(param_types,
    required_params)`` of the scorer's registry) is ``unknown_metric``; a name given twice, or the verdict
    metric ``metric_name`` again with other parameters, is ``duplicate_metric``; a set-level metric that the
    verdict metric's items cannot give (classification ones need ``label_match``, ranking ones ``ndcg``:
    :data:`uep_common.contract.configs.SET_KIND_OF_METRIC`) is ``metric_kind_mismatch``; parameters of a set-level
    metric, or bad parameters of a per-item one, are ``unknown_param`` / ``bad_param``; a second ``primary``
    is ``several_primary``. Empty when the entries are fine."""
    problems: list[UploadProblem] = []
    seen: set[str] = set()
    primary_at: int | None = None
    verdict_kind = SET_KIND_OF_METRIC.get(metric_name)
    for i, (name, params, primary) in enumerate(entries):
        loc = [*METRICS_LOC, str(i)]
        if name in seen or (name == metric_name and params != metric_params):
            problems.append(UploadProblem([*loc, "name"], f"metric {name!r} is declared twice", "duplicate_metric"))
            continue
        seen.add(name)
        if primary:
            if primary_at is not None:
                problems.append(
                    UploadProblem([*loc, "primary"], f"entry {primary_at} is primary already; at most one is", "several_primary")
                )
            primary_at = i
        if is_set_metric(name):
            kind = "classification" if name in CLASSIFICATION_SET_METRICS else "ranking"
            if kind != verdict_kind:
                needs = "label_match" if kind == "classification" else "ndcg"
                problems.append(
                    UploadProblem(
                        [*loc, "name"],
                        f"{name!r} is a set-level {kind} metric: it needs `metric` {needs}, not {metric_name!r}",
                        "metric_kind_mismatch",
                    )
                )
            for param in sorted(params):
                problems.append(
                    UploadProblem([*loc, "params", param], f"set-level metric {name!r} takes no parameters", "unknown_param")
                )
        elif name in catalogue:
            types, required = catalogue[name]
            problems += [
                UploadProblem(
                    [*loc, "params", param],
                    f"{name} parameter {param!r} {reason}",
                    "unknown_param" if reason.startswith("unknown") else "bad_param",
                )
                for param, reason in param_problems(params, types, required)
            ]
        else:
            problems.append(
                UploadProblem(
                    [*loc, "name"],
                    f"unknown metric {name!r}: neither a metric of GET /v1/metrics ({', '.join(sorted(catalogue))}) nor a "
                    "set-level one (accuracy, f1_macro, roc_auc, pr_auc, ndcg@<k>, mrr…)",
                    "unknown_metric",
                )
            )
    return problems
