"""One log format for every uep process: our loggers', uvicorn's and FastStream's lines all go through the
root logger's one handler (stderr).

``UEP_LOG_FORMAT`` picks the format: ``json`` (one JSON object per line), ``text``, or ``auto`` (the default:
text when stderr is a terminal, JSON otherwise — a file, a pipe, a container runtime). Neither format has
ANSI colour codes; escape sequences inside a message are removed.

A JSON line has ``time`` (UTC, ISO 8601 with milliseconds), ``level``, ``service`` (``UEP_SERVICE_NAME``),
``logger`` (the logger's name), ``message``; ``trace_id`` and ``span_id`` of the current OpenTelemetry span
(W3C hex: 32 and 16 digits) when there is one; ``evaluation_id`` and ``tenant_id`` when known — the consumer
path (:func:`uep_common.runtime.consuming.consume`) binds those of the event being handled, the gateway those of the
request (:func:`log_context`); FastStream's ``topic``, ``group_id`` and ``message_id`` on its lines;
``exception`` (the formatted traceback) when one is logged.

Why not a library (python-json-logger, structlog): the line is a dict built from the record and two context
variables and written with :func:`json.dumps`; the formatter below is that and nothing more.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from opentelemetry import trace

if TYPE_CHECKING:
    from uep_common.runtime.settings import CommonSettings

EVALUATION_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("uep_log_evaluation_id", default=None)
"""The evaluation the current code works for (None: not known)."""
TENANT_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("uep_log_tenant_id", default=None)
"""The tenant the current code works for (None: not known)."""

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_FASTSTREAM_FIELDS = ("topic", "group_id", "message_id")
_HANDLER_FLAG = "_uep_log_handler"


def bind(evaluation_id: object | None = None, tenant_id: object | None = None) -> tuple[contextvars.Token[Any], ...]:
    """Set the evaluation and tenant of the current context (those given); returns the tokens for :func:`unbind`."""
    tokens = []
    if evaluation_id is not None:
        tokens.append(EVALUATION_ID.set(str(evaluation_id)))
    if tenant_id is not None:
        tokens.append(TENANT_ID.set(str(tenant_id)))
    return tuple(tokens)


def unbind(tokens: tuple[contextvars.Token[Any], ...]) -> None:
    """Restore what :func:`bind` changed."""
    for token in reversed(tokens):
        token.var.reset(token)


@contextlib.contextmanager
def log_context(evaluation_id: object | None = None, tenant_id: object | None = None) -> Iterator[None]:
    """Within the block, log lines carry ``evaluation_id`` / ``tenant_id`` (those given; the others unchanged)."""
    tokens = bind(evaluation_id, tenant_id)
    try:
        yield
    finally:
        unbind(tokens)


def _clean(text: str) -> str:
    return _ANSI.sub("", text) if "\x1b" in text else text


def _context_fields() -> dict[str, str]:
    out: dict[str, str] = {}
    ctx = trace.get_current_span().get_span_context()
    if ctx.is_valid:
        out["trace_id"] = f"{ctx.trace_id:032x}"
        out["span_id"] = f"{ctx.span_id:016x}"
    if (evaluation_id := EVALUATION_ID.get()) is not None:
        out["evaluation_id"] = evaluation_id
    if (tenant_id := TENANT_ID.get()) is not None:
        out["tenant_id"] = tenant_id
    return out


class JsonFormatter(logging.Formatter):
    """One JSON object per record (fields: see the module docstring).

    Args:
        service: the ``service`` field of every line.
    """

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        """``record`` as one line of JSON (non-ASCII escaped), with the exception and stack when it has them."""
        doc: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "service": self.service,
            "logger": record.name,
            "message": _clean(record.getMessage()),
            **_context_fields(),
        }
        for name in _FASTSTREAM_FIELDS:
            if value := getattr(record, name, None):
                doc[name] = str(value)
        if record.exc_info:
            doc["exception"] = _clean(self.formatException(record.exc_info))
        if record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        return json.dumps(doc, ensure_ascii=True, default=str)  # one line per record: U+0085, U+2028… escaped too


class TextFormatter(logging.Formatter):
    """``<time> <LEVEL> <service> <logger>: <message>``, then ``[trace=… evaluation=… tenant=…]`` where known;
    never coloured.

    Args:
        service: the service named on every line.
    """

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        """``record`` as one line (time in UTC, to the millisecond), its exception's traceback on the lines below."""
        when = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        ctx = _context_fields()
        tags = " ".join(f"{k.removesuffix('_id')}={ctx[k]}" for k in ("trace_id", "evaluation_id", "tenant_id") if k in ctx)
        line = f"{when} {record.levelname} {self.service} {record.name}: {_clean(record.getMessage())}"
        if tags:
            line += f" [{tags}]"
        if record.exc_info:
            line += "\n" + _clean(self.formatException(record.exc_info))
        return line


def use_json(log_format: str, stream: Any = None) -> bool:
    """Whether ``log_format`` (json | text | auto) means JSON on ``stream`` (default stderr): auto is JSON
    unless the stream is a terminal."""
    if log_format == "auto":
        stream = stream or sys.stderr
        return not (hasattr(stream, "isatty") and stream.isatty())
    return log_format == "json"


_THIRD_PARTY = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi", "faststream", "faststream.access.kafka")
"""Loggers that install handlers of their own (FastStream's are coloured); ours replace them."""


def configure_logging(settings: CommonSettings, *, force: bool = False) -> None:
    """Route every record to one stderr handler with the format of ``settings.log_format`` at
    ``settings.log_level``; uvicorn's and FastStream's loggers lose their own handlers and propagate to it, and
    Python warnings are logged (``py.warnings``) rather than printed.

    Without ``force`` nothing changes when some other code installed root handlers (a test runner's capture:
    the way ``logging.basicConfig`` behaves); with it (a service's entry point) they are replaced. Calling it
    again replaces the handler it installed before.
    """
    root = logging.getLogger()
    ours = [h for h in root.handlers if getattr(h, _HANDLER_FLAG, False)]
    foreign = [h for h in root.handlers if not getattr(h, _HANDLER_FLAG, False)]
    if foreign and not force:
        return
    for handler in ours + foreign:
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    formatter = JsonFormatter if use_json(settings.log_format) else TextFormatter
    handler.setFormatter(formatter(settings.service_name))
    setattr(handler, _HANDLER_FLAG, True)
    root.addHandler(handler)
    root.setLevel(settings.log_level.upper())
    logging.captureWarnings(True)  # warnings.warn → logger py.warnings, in the same format
    for name in _THIRD_PARTY:
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.propagate = True
