"""Log lines (uep_common.runtime.logs): one JSON object per line with the span's trace and span ids (W3C hex) and the
bound evaluation and tenant; plain text without ANSI codes; uvicorn's and FastStream's loggers routed to the
one handler."""

from __future__ import annotations

import io
import json
import logging
import uuid

import pytest
from opentelemetry.sdk.trace import TracerProvider

from uep_common.runtime import logs
from uep_common.runtime.settings import CommonSettings

pytestmark = pytest.mark.unit

E, T = uuid.UUID(int=21), uuid.UUID(int=22)


def _record(msg: str, *args: object, exc: BaseException | None = None, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord("uep.test", logging.WARNING, __file__, 1, msg, args, (type(exc), exc, None) if exc else None)
    record.__dict__.update(extra)
    return record


def test_a_json_line_carries_the_span_and_the_bound_ids():
    tracer = TracerProvider().get_tracer("test")
    formatter = logs.JsonFormatter("scorer")
    with tracer.start_as_current_span("work") as span, logs.log_context(evaluation_id=E, tenant_id=T):
        line = formatter.format(_record("scored %d of %s", 3, "x", topic="uep.output.generated.v1", group_id="uep.scorer"))
    ctx = span.get_span_context()
    doc = json.loads(line)
    assert doc["level"] == "WARNING" and doc["service"] == "scorer" and doc["logger"] == "uep.test"
    assert doc["message"] == "scored 3 of x"
    assert doc["trace_id"] == f"{ctx.trace_id:032x}" and len(doc["trace_id"]) == 32
    assert doc["span_id"] == f"{ctx.span_id:016x}" and len(doc["span_id"]) == 16
    assert (doc["evaluation_id"], doc["tenant_id"]) == (str(E), str(T))
    assert (doc["topic"], doc["group_id"]) == ("uep.output.generated.v1", "uep.scorer")
    assert doc["time"].endswith("+00:00") and "T" in doc["time"]
    # outside the span and the context: none of those fields
    after = json.loads(formatter.format(_record("later")))
    assert not {"trace_id", "span_id", "evaluation_id", "tenant_id"} & set(after)


def test_ansi_codes_never_reach_a_line():
    coloured = "\x1b[32mINFO\x1b[0m:     Started server process"
    for formatter in (logs.JsonFormatter("gateway"), logs.TextFormatter("gateway")):
        line = formatter.format(_record(coloured))
        assert "\x1b" not in line and "\\u001b" not in line and "Started server process" in line


def test_exceptions_are_one_json_line():
    try:
        raise ValueError("bad value")
    except ValueError as exc:
        line = logs.JsonFormatter("judge").format(_record("failed", exc=exc))
    assert "\n" not in line
    assert "ValueError: bad value" in json.loads(line)["exception"]


def test_auto_is_json_unless_stderr_is_a_terminal():
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert logs.use_json("auto", io.StringIO()) and not logs.use_json("auto", Tty())
    assert logs.use_json("json", Tty()) and not logs.use_json("text", io.StringIO())


def test_configure_routes_uvicorn_and_faststream_to_the_one_handler():
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    fs = logging.getLogger("faststream")
    fs_saved = (list(fs.handlers), fs.propagate)
    try:
        logs.configure_logging(CommonSettings(service_name="reporter", log_format="json"), force=True)
        ours = [h for h in root.handlers if isinstance(h.formatter, logs.JsonFormatter)]
        assert len(root.handlers) == 1 and len(ours) == 1 and ours[0].formatter.service == "reporter"
        for name in ("faststream", "faststream.access.kafka", "uvicorn.error", "uvicorn.access"):
            logger = logging.getLogger(name)
            assert logger.handlers == [] and logger.propagate, name
        logs.configure_logging(CommonSettings(log_format="text"))  # again: replaces its own handler only
        assert len(root.handlers) == 1 and isinstance(root.handlers[0].formatter, logs.TextFormatter)
        foreign = logging.NullHandler()  # e.g. a test runner's capture: left alone without force
        root.addHandler(foreign)
        logs.configure_logging(CommonSettings(log_format="json"))
        assert foreign in root.handlers and isinstance(root.handlers[0].formatter, logs.TextFormatter)
    finally:
        logging.captureWarnings(False)
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in saved_handlers:
            root.addHandler(h)
        root.setLevel(saved_level)
        fs.handlers[:], fs.propagate = fs_saved
