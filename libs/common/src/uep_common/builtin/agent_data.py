"""The built-in agent benchmark ``sklearn-data-agent``: data questions over a SQLite database built from two of
scikit-learn's bundled tables, each with its gold answer and the query that proves it.

Data: Fisher's iris (150 flowers, 4 measurements in cm, 3 species; ``sklearn.datasets.load_iris``) and the UCI
wine recognition data (178 wines, 13 chemical measurements, 3 cultivars; ``load_wine``), read from the copies
scikit-learn installs (nothing is downloaded). Tables ``iris`` and ``wine`` (:func:`database_script`); the
answers are computed here by running each question's query on the same script with the standard library's
``sqlite3`` (:func:`load_sklearn_data_agent`), so every gold answer is exactly what its query returns.
Licences: :data:`uep_common.builtin.datasets.LICENSES` (``sklearn_tables``).
"""

from __future__ import annotations

import functools
import re
import sqlite3

from uep_common.builtin.datasets import DatasetItem

QUESTIONS: list[tuple[str, str, float]] = [
    ("How many flowers are in the iris table?", "SELECT COUNT(*) FROM iris", 0),
    ("What is the mean sepal length of all iris flowers, rounded to 2 decimals?",
     "SELECT ROUND(AVG(sepal_length), 2) FROM iris", 0.005),
    ("What is the smallest sepal width in the iris table?", "SELECT MIN(sepal_width) FROM iris", 0.001),
    ("What is the largest petal width of an iris of species setosa?",
     "SELECT MAX(petal_width) FROM iris WHERE species = 'setosa'", 0.001),
    ("What is the mean petal length of the versicolor irises, rounded to 2 decimals?",
     "SELECT ROUND(AVG(petal_length), 2) FROM iris WHERE species = 'versicolor'", 0.005),
    ("How many virginica irises have a petal length greater than 6?",
     "SELECT COUNT(*) FROM iris WHERE species = 'virginica' AND petal_length > 6", 0),
    ("Which iris species has the largest mean petal length?",
     "SELECT species FROM iris GROUP BY species ORDER BY AVG(petal_length) DESC LIMIT 1", -1),
    ("How many wines of cultivar class_0 are in the wine table?", "SELECT COUNT(*) FROM wine WHERE cultivar = 'class_0'", 0),
    ("What is the highest alcohol content among the wines?", "SELECT MAX(alcohol) FROM wine", 0.001),
    ("What is the mean alcohol content of the class_2 wines, rounded to 2 decimals?",
     "SELECT ROUND(AVG(alcohol), 2) FROM wine WHERE cultivar = 'class_2'", 0.005),
    ("How many wines have an alcohol content above 14?", "SELECT COUNT(*) FROM wine WHERE alcohol > 14", 0),
    ("Which wine cultivar has the highest mean proline?",
     "SELECT cultivar FROM wine GROUP BY cultivar ORDER BY AVG(proline) DESC LIMIT 1", -1),
]  # fmt: skip
"""``(question, query, tolerance)``: a numeric answer is right within ``tolerance`` (absolute); -1 marks a
text answer (compared after normalisation)."""


def _column(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower().replace(" (cm)", "")).strip("_")


@functools.cache
def database_script() -> str:
    """The SQL script (``CREATE TABLE`` and one ``INSERT`` per table) of tables ``iris`` (``id``,
    ``sepal_length``, ``sepal_width``, ``petal_length``, ``petal_width`` in cm, ``species``) and ``wine``
    (``id``, its 13 measurements with scikit-learn's feature names made SQL names, ``cultivar`` ``class_0``..
    ``class_2``). About 30 KB."""
    from sklearn.datasets import load_iris, load_wine

    parts = []
    for table, data, label in (("iris", load_iris(), "species"), ("wine", load_wine(), "cultivar")):
        columns = [_column(n) for n in data.feature_names]
        parts.append(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, {', '.join(c + ' REAL' for c in columns)}, {label} TEXT);")
        rows = [
            "(" + ", ".join([str(i), *(repr(float(v)) for v in row), f"'{data.target_names[t]}'"]) + ")"
            for i, (row, t) in enumerate(zip(data.data, data.target, strict=True))
        ]
        parts.append(f"INSERT INTO {table} VALUES {', '.join(rows)};")
    return "\n".join(parts)


def schema_text() -> str:
    """The tables and their columns, one line each (``iris(id, sepal_length, ...)``): what the agent is told."""
    return "\n".join(
        f"{m.group(1)}({', '.join(c.split()[0] for c in m.group(2).split(', '))})"
        for m in re.finditer(r"CREATE TABLE (\w+) \((.*?)\);", database_script())
    )


def _answer(value: object) -> str:
    if isinstance(value, float):
        return repr(round(value, 6))
    return str(value)


def load_sklearn_data_agent() -> list[DatasetItem]:
    """The benchmark's items, one per question of :data:`QUESTIONS`, in order.

    Returns:
        ``input = {"question"}``; ``reference = {"answer", "query", "must_call": ["sql"], "must_not_call": []}``
        plus ``tolerance`` for numeric answers (the reference of :mod:`uep_scorer`'s ``agent_*`` metrics);
        ``external_id = "sklearn-data-agent/<n>"``. The answer is the query's result on :func:`database_script`.
    """
    con = sqlite3.connect(":memory:")
    con.executescript(database_script())
    items = []
    for i, (question, query, tolerance) in enumerate(QUESTIONS):
        (value,) = con.execute(query).fetchone()
        reference: dict[str, object] = {"answer": _answer(value), "query": query, "must_call": ["sql"], "must_not_call": []}
        if tolerance >= 0:
            reference["tolerance"] = tolerance
        items.append(DatasetItem(i, f"sklearn-data-agent/{i}", {"question": question}, reference))
    con.close()
    return items
