"""Opaque keyset-pagination cursors: a JSON list of the last row's sort key, base64url-encoded.

Lists pass ``next_cursor`` back as ``cursor``; a cursor that does not decode to the expected values is a 422
naming ``query.cursor``.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from datetime import datetime
from typing import Any

from uep_gateway.errors import FieldError


def bad_cursor() -> FieldError:
    """The 422 of a malformed cursor, naming ``query.cursor``."""
    return FieldError("invalid", ("query", "cursor"), "malformed cursor; pass next_cursor back unchanged", "bad_cursor")


def encode_cursor(*values: Any) -> str:
    """The cursor of a row whose sort key is ``values`` (JSON-serialisable)."""
    return base64.urlsafe_b64encode(json.dumps(list(values)).encode()).decode()


def cursor_values(cursor: str, count: int) -> list[Any]:
    """The ``count`` values ``cursor`` holds. Raises :func:`bad_cursor` when it is not such a cursor."""
    try:
        values = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, binascii.Error, UnicodeError):
        raise bad_cursor() from None
    if not isinstance(values, list) or len(values) != count:
        raise bad_cursor()
    return values


def encode_time_id(at: datetime, row_id: uuid.UUID) -> str:
    """The cursor of a list sorted by (a timestamp, a UUID id)."""
    return encode_cursor(at.isoformat(), str(row_id))


def decode_time_id(cursor: str) -> tuple[datetime, uuid.UUID]:
    """The (timezone-aware timestamp, id) of an :func:`encode_time_id` cursor. Raises :func:`bad_cursor`."""
    at, row_id = cursor_values(cursor, 2)
    if not (isinstance(at, str) and isinstance(row_id, str)):
        raise bad_cursor()
    try:
        when, ident = datetime.fromisoformat(at), uuid.UUID(row_id)
    except ValueError:
        raise bad_cursor() from None
    if when.tzinfo is None:
        raise bad_cursor()  # the cursors written here are always timezone-aware
    return when, ident
