"""The declarative base of every uep table and the column helpers the table modules share.

Every table module (:mod:`.models` for the core tables, one module per later area) imports this module and
nothing imports the table modules back from here; :mod:`.tables` imports them all, so that one metadata
(``Base.metadata``) holds every table for Alembic.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import DateTime, func
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    """Declarative base of every uep table."""


def in_list(column: str, values: tuple[str, ...]) -> str:
    """SQL text of a check constraint ``column IN ('a', 'b', …)`` over ``values`` (each quoted by ``repr``)."""
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def uuid_pk() -> Mapped[uuid.UUID]:
    """A UUID primary key column, a new ``uuid4`` by default (set by Python, not by the database)."""
    return mapped_column(UUID(as_uuid=True), primary_key=True, default=uuid.uuid4)


def created_column() -> Mapped[datetime]:
    """A non-null ``timestamptz`` column set by the database to ``now()`` when the row is inserted."""
    return mapped_column(DateTime(timezone=True), server_default=func.now(), nullable=False)
