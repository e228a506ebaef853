"""Parsing and validating custom benchmark uploads (gateway, no server): row shapes, line/field errors."""

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from uep_gateway.uploads import UploadInvalid, detect_format, read_records, validate_rows

TEMPLATE = "Q: {{ question }}\nA:"


def rows_of(data: bytes, fmt: str, template: str = TEMPLATE, max_rows: int = 100):
    return validate_rows(read_records(data, fmt), template, max_rows)


def test_jsonl_nested_and_flat_rows():
    data = b'{"id": "a", "input": {"question": "2+2?"}, "reference": "4"}\n\n{"id": "b", "question": "3+3?", "answer": 6, "reference.unit": "apples"}\n'
    rows = rows_of(data, "jsonl")
    assert [(r.ordinal, r.external_id, r.input, r.reference) for r in rows] == [
        (0, "a", {"question": "2+2?"}, {"answer": "4"}),
        (1, "b", {"question": "3+3?"}, {"answer": 6, "unit": "apples"}),
    ]


def test_csv_rows_and_line_numbers_count_the_header():
    data = "id,question,answer\nq1,Capital of France?,Paris\nq2,,\n".encode()
    with pytest.raises(UploadInvalid) as exc:
        rows_of(data, "csv")
    (p,) = exc.value.problems
    assert p.loc == ["body", "file", "line 3", "reference"] and p.msg.startswith("line 3: field 'reference' is required")


def test_parquet_rows():
    buf = io.BytesIO()
    pq.write_table(pa.table({"question": ["a?", "b?"], "answer": ["x", "y"]}), buf)
    rows = rows_of(buf.getvalue(), "parquet")
    assert [(r.input, r.reference) for r in rows] == [({"question": "a?"}, {"answer": "x"}), ({"question": "b?"}, {"answer": "y"})]


def test_every_bad_line_is_named_with_its_field():
    data = b'{"input": {"question": "ok"}, "reference": "1"}\nnot json\n{"input": {"prompt": "x"}, "reference": "2"}\n{"input": [], "reference": "3"}\n'
    with pytest.raises(UploadInvalid) as exc:
        rows_of(data, "jsonl")
    assert [p.msg for p in exc.value.problems] == ["line 2: invalid JSON: Expecting value"]
    data = b'{"input": {"question": "ok"}, "reference": "1"}\n{"input": {"prompt": "x"}, "reference": "2"}\n{"input": [], "reference": "3"}\n{"id": 1, "question": "q", "answer": 1}\n{"id": 1, "question": "r", "answer": 2}\n'
    with pytest.raises(UploadInvalid) as exc:
        rows_of(data, "jsonl")
    msgs = [p.msg for p in exc.value.problems]
    assert msgs[0] == "line 2: prompt template error: 'question' is undefined"
    assert msgs[1] == "line 3: field 'input' must be a non-empty object"
    assert msgs[2] == "line 5: field 'id' repeats line 4"


def test_limits_and_formats():
    with pytest.raises(UploadInvalid, match="no rows"):
        rows_of(b"\n\n", "jsonl")
    with pytest.raises(UploadInvalid, match="3 rows; at most 2"):
        rows_of(b'{"question":"a","answer":1}\n' * 3, "jsonl", max_rows=2)
    with pytest.raises(UploadInvalid, match="not UTF-8"):
        rows_of(b"\xff\xfe\x00bad", "jsonl")
    with pytest.raises(UploadInvalid, match="not a readable Parquet"):
        rows_of(b"PAR1 nope", "parquet")
    assert detect_format("x.ndjson", None) == "jsonl" and detect_format("x.bin", "csv") == "csv"
    with pytest.raises(UploadInvalid) as exc:
        detect_format("x.xlsx", None)
    assert exc.value.problems[0].loc == ["body", "format"]
