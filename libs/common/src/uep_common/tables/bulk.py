"""Many rows in one short statement: column arrays unnested by PostgreSQL.

A multi-row ``VALUES`` (SQLAlchemy's insertmanyvalues, an ``IN`` list of tuples) is a statement whose text and
parameter count grow with the rows. psycopg caches the conversion of a statement to PostgreSQL's ``$n`` form,
and prepares it on the server after five runs, only for short statements with few parameters
(``psycopg._queries``: at most 4096 characters and 50 parameters); past that it parses every statement anew on
both sides. Here each column is one array parameter, so a statement's text is the same for any number of rows::

    INSERT INTO t (a, b) SELECT u.a, u.b FROM unnest(:a::UUID[], :b::INTEGER[]) AS u (a, b)

(PostgreSQL's multi-argument ``unnest`` in ``FROM``: one row per array position, "Array Functions and
Operators" of the PostgreSQL manual.) :func:`insert_from_arrays` builds such an insert and :func:`column_arrays`
its parameters; :func:`rows_from_arrays` the same row source for a join (look-ups and updates of many keys), with
:func:`key_arrays` its parameters from key tuples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Table, bindparam, func, select
from sqlalchemy.dialects.postgresql import ARRAY, Insert
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.sql.selectable import TableValuedAlias

PREFIX = "col_"
"""Name prefix of the array parameters (``col_<column>``)."""

ITEM_KEY = ("evaluation_id", "sample_id", "repeat", "arm")
"""The columns naming one item of an evaluation (the event contract's item key; unique in ``sample_leases`` and
``sample_results``): the keys of :func:`key_arrays`."""


def rows_from_arrays(table: Table, columns: Sequence[str], name: str = "u") -> TableValuedAlias:
    """``unnest(:col_<c>::<type>[], …) AS <name> (<c>, …)``: a row source of ``columns`` of ``table``,
    each bound as one array of the column's type (:func:`column_arrays`). Arrays of unequal length are padded
    with NULLs by PostgreSQL, so give every column the same number of values."""
    # typed binds: each list passes through its elements' bind processing (JSONB, UUID), and the psycopg dialect
    # renders the cast (``%(col_a)s::UUID[]``)
    arrays = [bindparam(PREFIX + c, type_=ARRAY(table.c[c].type)) for c in columns]
    return func.unnest(*arrays).table_valued(*columns).render_derived(name=name)


def insert_from_arrays(table: Table, columns: Sequence[str]) -> Insert:
    """``INSERT INTO table (columns) SELECT … FROM unnest(…)``: one fixed statement for any number of rows, run
    with :func:`column_arrays` as its parameters. Columns left out get their server defaults (Python-side
    defaults are not applied). Chain ``on_conflict_do_nothing`` / ``returning`` as on any PostgreSQL insert;
    PostgreSQL returns the rows in no promised order."""
    source = rows_from_arrays(table, columns)
    return pg_insert(table).from_select(list(columns), select(*(source.c[c] for c in columns)), include_defaults=False)


def column_arrays(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> dict[str, list[Any]]:
    """The parameters of :func:`insert_from_arrays` / :func:`rows_from_arrays` for ``rows`` (dicts by column
    name): ``{"col_<c>": [row[c] for row in rows]}``. Raises KeyError for a row without one of ``columns``."""
    return {PREFIX + c: [row[c] for row in rows] for c in columns}


def key_arrays(keys: Sequence[Sequence[Any]], columns: Sequence[str] = ITEM_KEY) -> dict[str, list[Any]]:
    """:func:`column_arrays` of rows given as tuples in ``columns`` order, e.g. item keys ``(evaluation_id,
    sample_id, repeat, arm)``. Raises ValueError for a tuple of another length."""
    arrays: dict[str, list[Any]] = {PREFIX + c: [] for c in columns}
    for key in keys:
        for c, value in zip(columns, key, strict=True):
            arrays[PREFIX + c].append(value)
    return arrays
