"""Parsing and validating custom benchmark uploads (gateway, no server): row shapes, line/field errors."""

import asyncio
import io
import json
import math
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from uep_gateway.body_limit import BodyLimitMiddleware
from uep_gateway.upload_worker import BudgetExceeded, WorkerPool
from uep_gateway.uploads import (
    TEMPLATE_LOC,
    UploadInvalid,
    UploadLimits,
    check_parquet_metadata,
    check_upload,
    detect_format,
    read_records,
    render_previews,
    spec_problems,
    validate_rows,
)

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
    data = b"id,question,answer\nq1,Capital of France?,Paris\nq2,,\n"
    with pytest.raises(UploadInvalid) as exc:
        rows_of(data, "csv")
    (p,) = exc.value.problems
    assert p.loc == ["body", "file", "line 3", "reference"] and p.msg.startswith("line 3: field 'reference' is required")


def test_parquet_rows():
    buf = io.BytesIO()
    pq.write_table(pa.table({"question": ["a?", "b?"], "answer": ["x", "y"]}), buf)
    rows = rows_of(buf.getvalue(), "parquet")
    assert [(r.input, r.reference) for r in rows] == [
        ({"question": "a?"}, {"answer": "x"}),
        ({"question": "b?"}, {"answer": "y"}),
    ]


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


# ------------------------------------------------------------------ bounds: Parquet metadata, CSV/JSONL, values


def parquet_bytes(table: pa.Table, **kw) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, **kw)
    return buf.getvalue()


def parquet_bomb(rows: int) -> bytes:
    """A constant column, dictionary- and RLE-encoded: a few hundred bytes declaring ``rows`` rows."""
    return parquet_bytes(
        pa.table({"question": pa.repeat("q", rows).dictionary_encode(), "answer": pa.repeat("a", rows).dictionary_encode()}),
        compression="zstd",
        row_group_size=rows,
    )


def problem(exc_info) -> tuple[list, str, str]:
    (p,) = exc_info.value.problems
    return p.loc, p.type, p.msg


def test_parquet_row_count_is_refused_from_the_metadata():
    data = parquet_bomb(1_000_000)
    assert len(data) < 3000
    with pytest.raises(UploadInvalid) as exc:
        check_parquet_metadata(data, UploadLimits(max_rows=200_000))
    assert problem(exc) == (["body", "file"], "too_many_rows", "the file declares 1000000 rows; at most 200000 are accepted")
    with pytest.raises(UploadInvalid) as exc:  # the same through the reader
        read_records(data, "parquet", UploadLimits(max_rows=10))
    assert problem(exc)[1] == "too_many_rows"


def test_parquet_decoded_size_is_refused_from_the_metadata_and_the_dictionary():
    # 1 M values count 8 bytes each from the metadata (their RLE runs store almost nothing).
    with pytest.raises(UploadInvalid) as exc:
        check_parquet_metadata(parquet_bomb(1_000_000), UploadLimits(max_rows=2_000_000, max_decoded_bytes=4_000_000))
    loc, kind, msg = problem(exc)
    assert (loc, kind) == (["body", "file"], "too_large_decoded") and msg.startswith(
        "the file's rows decompress to more than 4000000 bytes"
    )
    # 2000 rows of one 50 kB string: the dictionary holds it once (~50 kB in the metadata), the rows hold 100 MB.
    data = parquet_bytes(
        pa.table({"question": pa.repeat("x" * 50_000, 2000), "answer": pa.repeat("a", 2000)}), compression="zstd"
    )
    limits = UploadLimits(max_decoded_bytes=10_000_000)
    assert len(data) < 10_000
    check_parquet_metadata(data, limits)  # the metadata alone does not see it ...
    with pytest.raises(UploadInvalid) as exc:  # ... the dictionary-expanded size of the first batch does
        read_records(data, "parquet", limits)
    loc, kind, msg = problem(exc)
    assert (loc, kind) == (["body", "file"], "too_large_decoded") and "decode to more than 10000000 bytes" in msg
    wide = parquet_bytes(pa.table({f"c{i}": [1] for i in range(30)}))
    with pytest.raises(UploadInvalid) as exc:
        check_parquet_metadata(wide, UploadLimits(max_columns=20))
    assert problem(exc)[1:] == ("too_many_columns", "the file has 30 columns; at most 20 are accepted")


def test_csv_and_jsonl_row_count_is_checked_while_reading():
    # Line 4 is not JSON: with 2 rows allowed the reader stops at row 3 and never gets there.
    data = b'{"question":"a","answer":1}\n' * 3 + b"not json\n"
    with pytest.raises(UploadInvalid) as exc:
        read_records(data, "jsonl", UploadLimits(max_rows=2))
    assert problem(exc) == (["body", "file"], "too_many_rows", "more than 2 rows; at most 2 are accepted")
    csv_data = b"question,answer\n" + b"q,a\n" * 3 + b'"unclosed\n'
    with pytest.raises(UploadInvalid) as exc:
        read_records(csv_data, "csv", UploadLimits(max_rows=2))
    assert problem(exc)[1] == "too_many_rows"
    assert len(read_records(csv_data[:-11], "csv", UploadLimits(max_rows=3))) == 3


def test_csv_and_jsonl_lines_and_fields_are_bounded():
    limits = UploadLimits(max_row_bytes=1000)
    with pytest.raises(UploadInvalid) as exc:
        read_records(b'{"question":"a","answer":1}\n{"question":"' + b"x" * 2000 + b'","answer":1}\n', "jsonl", limits)
    assert problem(exc) == (["body", "file", "line 2"], "row_too_large", "line 2: longer than 1000 characters")
    with pytest.raises(UploadInvalid) as exc:  # one field over the limit (the csv module's field limit)
        read_records(b"question,answer\nq,a\n" + b"x" * 1500 + b",a\n", "csv", limits)
    loc, kind, msg = problem(exc)
    assert (loc, kind) == (["body", "file", "line 3"], "bad_row") and "field larger than field limit (1000)" in msg
    with pytest.raises(UploadInvalid) as exc:  # fields under the limit, the record over it
        read_records(b"a,b,answer\n" + b"x" * 600 + b"," + b"y" * 600 + b",1\n", "csv", limits)
    assert problem(exc)[:2] == (["body", "file", "line 2"], "row_too_large")
    with pytest.raises(UploadInvalid) as exc:
        read_records(b"a,b,c\n1,2,3\n", "csv", UploadLimits(max_columns=2))
    assert problem(exc)[:2] == (["body", "file", "line 1"], "too_many_columns")
    with pytest.raises(UploadInvalid) as exc:  # deep nesting is a JSON problem of the line, not a crash
        read_records(b"[" * 100_000 + b"]" * 100_000 + b"\n", "jsonl")
    assert problem(exc) == (["body", "file", "line 1"], "bad_json", "line 1: invalid JSON: nested too deeply")
    with pytest.raises(UploadInvalid) as exc:  # each row as JSON is bounded in bytes whatever the format
        validate_rows(
            read_records(parquet_bytes(pa.table({"question": ["é" * 600], "answer": ["a"]})), "parquet"), TEMPLATE, 5, limits
        )
    assert problem(exc) == (
        ["body", "file", "line 1"],
        "row_too_large",
        "line 1: the row is 1231 bytes as JSON; at most 1000 are accepted",
    )


def test_nul_and_unstorable_values_name_the_line_and_field():
    def loc_of(data: bytes, fmt: str = "jsonl"):
        with pytest.raises(UploadInvalid) as exc:
            rows_of(data, fmt)
        (p,) = exc.value.problems
        return p.loc, p.type, p.msg

    assert loc_of(b'{"question":"ok","answer":"a"}\n{"question":"a\\u0000b","answer":"a"}\n') == (
        ["body", "file", "line 2", "question"],
        "bad_value",
        "line 2: field 'question' contains a NUL character (\\x00), which cannot be stored",
    )
    assert loc_of(b'{"input":{"question":"q","extra":["x","\\u0000"]},"reference":"a"}\n')[0] == [
        "body",
        "file",
        "line 1",
        "input",
        "extra",
        "[1]",
    ]
    assert loc_of(b'{"question":"q","answer":"a","k\\u0000":1}\n')[:2] == (["body", "file", "line 1", "k\\x00"], "bad_value")
    assert loc_of(b'{"id":"a\\u0000","question":"q","answer":"a"}\n')[0] == ["body", "file", "line 1", "id"]
    assert loc_of(b'{"id":"' + b"i" * 201 + b'","question":"q","answer":"a"}\n')[:2] == (
        ["body", "file", "line 1", "id"],
        "bad_id",
    )
    assert loc_of(b"question,answer\nq,a\x00b\n", "csv")[0] == ["body", "file", "line 2", "answer"]
    assert loc_of(parquet_bytes(pa.table({"question": ["q", "r\x00"], "answer": ["a", "b"]})), "parquet")[0] == [
        "body",
        "file",
        "line 2",
        "question",
    ]
    assert loc_of(b'{"question":"q","answer":NaN}\n')[::2] == (
        ["body", "file", "line 1", "answer"],
        "line 1: field 'answer' is nan, which JSON cannot hold",
    )
    assert (
        loc_of(b'{"question":"\\ud800","answer":"a"}\n')[2]
        == "line 1: field 'question' contains a lone surrogate, which is not valid Unicode"
    )
    loc, _, msg = loc_of(parquet_bytes(pa.table({"question": ["q"], "answer": ["a"], "blob": [b"\x00\x01"]})), "parquet")
    assert loc == ["body", "file", "line 1", "blob"] and "binary data" in msg


def test_spec_strings_with_nul_are_named():
    spec = {"slug": "s", "name": "a\x00b", "prompt": {"template": "{{ q }}", "stop": ["ok", "x\x00"]}}
    (p,) = spec_problems(spec)
    assert (p.loc, p.type) == (["body", "spec", "name"], "bad_value")
    del spec["name"]
    assert spec_problems(spec)[0].loc == ["body", "spec", "prompt", "stop", "[1]"]
    assert spec_problems({"slug": "s", "name": "fine", "judge": {"rubric": "é ü"}}) == []


def test_template_problems_name_the_template_and_row_problems_the_row():
    rows = b'{"question":"a","answer":1}\n' * 5
    with pytest.raises(UploadInvalid) as exc:  # a sandbox work limit: the template, once
        rows_of(rows, "jsonl", template="{{ 'a' * 100000000 }}")
    loc, kind, msg = problem(exc)
    assert (loc, kind) == (TEMPLATE_LOC, "template_error") and msg.startswith("line 1: ")
    with pytest.raises(UploadInvalid) as exc:  # a prompt over max_prompt_chars: the template, once
        validate_rows(read_records(rows, "jsonl"), "{{ question * 200 }}", 10, UploadLimits(max_prompt_chars=100))
    assert problem(exc) == (
        TEMPLATE_LOC,
        "prompt_too_long",
        "line 1: the template renders a prompt of 200 characters; at most 100 are accepted",
    )
    with pytest.raises(UploadInvalid) as exc:  # a syntax error: the template
        rows_of(rows, "jsonl", template="{{ question ")
    assert problem(exc)[0] == TEMPLATE_LOC
    with pytest.raises(UploadInvalid) as exc:  # a type error on one row's value: that row
        rows_of(b'{"question":1,"answer":1}\n{"question":"a","answer":1}\n', "jsonl", template="{{ question + 1 }}")
    loc, kind, msg = problem(exc)
    assert (loc, kind) == (["body", "file", "line 2"], "template_error") and "TypeError" in msg


def test_preview_prompts_are_cut():
    out = render_previews("{{ question * 100 }}", [{"question": "ab"}, {"question": "a"}, {}], 150)
    assert out[0] == ("ab" * 75, True, None) and out[1] == ("a" * 100, False, None)
    assert out[2][:2] == ("", False) and "undefined" in out[2][2]


# ----------------------------------------------------------------------------- the bounded worker processes
def test_worker_budgets_stop_the_job_and_the_worker_is_replaced():
    async def scenario():
        pool = WorkerPool(1, 1.0, 1 << 30)
        try:
            assert await pool.run(pow, 2, 10) == 1024
            t0 = time.monotonic()
            with pytest.raises(BudgetExceeded) as exc:
                await pool.run(time.sleep, 30)
            assert exc.value.kind == "time" and 1.0 <= time.monotonic() - t0 < 3.0
            with pytest.raises(BudgetExceeded) as exc:  # past RLIMIT_AS: a MemoryError in the worker
                await pool.run(bytearray, 3 << 30)
            assert exc.value.kind == "memory" and exc.value.limit == 1 << 30
            with pytest.raises(ValueError, match="invalid literal"):  # the job's own exception passes through
                await pool.run(int, "x")
            assert await pool.run(pow, 3, 3) == 27 and pool.replaced == 2
            # A job killed for its time names its phase: rendering (every row takes ~100 k sandbox steps).
            heavy = "{% for i in range(300) %}{% for j in range(300) %}{% endfor %}{% endfor %}{{ question }}"
            data = b'{"question":"a","answer":1}\n' * 200
            with pytest.raises(BudgetExceeded) as exc:
                await pool.run(check_upload, data, "jsonl", heavy, UploadLimits())
            assert (exc.value.kind, exc.value.phase) == ("time", "render")
            big = b"".join(b'{"question":"%d","answer":1,"x":[1,2,3,4,5,6,7,8]}\n' % i for i in range(200_000))
            with pytest.raises(BudgetExceeded) as exc:
                await pool.run(check_upload, big, "jsonl", "{{ question }}", UploadLimits(), timeout_s=0.3)
            assert (exc.value.kind, exc.value.phase) == ("time", "parse")
            rows, version = await pool.run(check_upload, data[:56], "jsonl", "{{ question }}", UploadLimits(), {"prompt": {}})
            assert [r.input for r in rows] == [{"question": "a"}] * 2 and len(version) == 64
        finally:
            await pool.close()

    asyncio.run(scenario())


def test_loop_keeps_answering_while_a_worker_is_busy():
    async def scenario():
        pool = WorkerPool(1, 5.0, 1 << 30)
        await pool.start()
        lags: list[float] = []

        async def tick():
            while True:
                t = time.monotonic()
                await asyncio.sleep(0.005)
                lags.append(time.monotonic() - t - 0.005)

        ticker = asyncio.create_task(tick())
        try:
            with pytest.raises(UploadInvalid):
                await pool.run(check_upload, parquet_bomb(2_000_000), "parquet", "{{ question }}", UploadLimits())
            with pytest.raises(BudgetExceeded):
                await pool.run(math.factorial, 10**7, timeout_s=1.0)
        finally:
            ticker.cancel()
            await pool.close()
        assert len(lags) > 50 and max(lags) < 0.1

    asyncio.run(scenario())


# ------------------------------------------------------------------------------------ streamed body limit
def test_body_limit_counts_streamed_bytes():
    async def app(scope, receive, send):
        got = 0
        while True:
            m = await receive()
            got += len(m.get("body", b""))
            if not m.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": json.dumps({"got": got}).encode()})

    async def call(chunks: int, headers=()):
        sent, pulled = [], 0

        async def receive():
            nonlocal pulled
            pulled += 1
            return {"type": "http.request", "body": b"x" * 65_536, "more_body": pulled < chunks}

        async def send(m):
            sent.append(m)

        await BodyLimitMiddleware(app, lambda scope: 200_000)({"type": "http", "headers": list(headers)}, receive, send)
        return sent[0]["status"], json.loads(sent[1]["body"]), pulled

    assert asyncio.run(call(3)) == (200, {"got": 196_608}, 3)
    status, body, pulled = asyncio.run(call(1000))  # no Content-Length: stopped at the 4th chunk, not the 1000th
    assert (status, body["detail"][0]["loc"], body["detail"][0]["type"], pulled) == (413, ["body"], "too_large", 4)
    status, _, pulled = asyncio.run(call(1000, [(b"content-length", b"65536000")]))
    assert (status, pulled) == (413, 0)
