"""The tools the platform ships: ``python`` and ``sql`` run in the code sandbox (:mod:`uep_common.sandbox`:
no network, read-only root, empty environment, a private 16 MiB ``/tmp``, no fork, CPU, memory and wall-clock
limits), ``search`` ranks the benchmark's corpus in this process (no program of the model runs), ``submit``
ends the run with its answer.

What the model writes reaches a sandboxed program only as data: ``sql`` embeds the query and the benchmark's
SQL script as Python string literals (``repr``), never as code. Every result is cut to the last
:data:`~uep_common.contract.agents.MAX_RESULT_CHARS` characters (the sandbox keeps no more of a run's output).
"""

from __future__ import annotations

import asyncio
import math
import re
from collections import Counter
from typing import Annotated

from pydantic import Field

from uep_common.contract.agents import MAX_RESULT_CHARS, CorpusDocument
from uep_common.sandbox import SandboxLimits, SandboxResult, run_python

from .registry import ToolContext, ToolOutcome, tool

_SANDBOX_STATUS = {"passed": "ok", "failed": "error", "timed_out": "timed_out", "sandbox_unavailable": "sandbox_unavailable"}

_PYTHON_PRELUDE = "import sys\nsys.stdout = sys.stderr\n"
"""Put before the model's program: the sandbox keeps stderr only (stdout is ``/dev/null``), so prints go there."""

_TRACEBACK_NOISE = re.compile(r'  File "<string>", line \d+, in _candidate\n')


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_RESULT_CHARS else text[-MAX_RESULT_CHARS:]


def _outcome(result: SandboxResult) -> ToolOutcome:
    status = _SANDBOX_STATUS.get(result.status, "error")
    text = _TRACEBACK_NOISE.sub("", result.stderr_tail)
    if status == "timed_out":
        text = f"{text}\n[timed out after {result.duration_s:.1f} s]".lstrip()
    elif status == "error" and not text.strip():
        text = f"[the run failed: {result.reason or result.status}]"
    return ToolOutcome(status, _bounded(text))


async def _sandboxed(program: str, ctx: ToolContext) -> ToolOutcome:
    limits = SandboxLimits(timeout_s=max(0.1, ctx.timeout_s))
    return _outcome(await asyncio.to_thread(run_python, program, limits))


@tool(
    "python",
    "Run a Python 3 program (standard library only, no network, no files outside /tmp) and return what it "
    "prints, or its traceback.",
)
async def python(
    ctx: ToolContext,
    code: Annotated[str, Field(min_length=1, max_length=4000, description="The program; print what you need.")],
) -> ToolOutcome:
    """Run ``code`` in the sandbox; its prints (last 2000 characters) or its traceback are the result."""
    return await _sandboxed(_PYTHON_PRELUDE + code, ctx)


_SQL_PROGRAM = """
import json, sqlite3, sys
con = sqlite3.connect(":memory:")
con.executescript({database})
def _only_reads(action, arg1, arg2, db, trigger):
    return sqlite3.SQLITE_OK if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION) else sqlite3.SQLITE_DENY
con.execute("PRAGMA query_only = ON")
con.set_authorizer(_only_reads)
try:
    cur = con.execute({query})
    rows = cur.fetchmany({max_rows} + 1)
except sqlite3.Error as exc:
    print("SQL error: %s" % exc, file=sys.stderr, flush=True)
    raise SystemExit(1)
columns = [d[0] for d in cur.description or []]
print(json.dumps({{"columns": columns, "rows": rows[:{max_rows}], "truncated": len(rows) > {max_rows}}}), file=sys.stderr, flush=True)
"""
"""The ``sql`` program: the benchmark's database built in memory from its script, then only reads allowed
(``query_only``, and an authorizer denying every action but SELECT, column reads and functions: no write, ATTACH, PRAGMA or
extension loading), one statement run, at most ``max_rows`` rows returned as JSON."""


@tool(
    "sql",
    "Run one read-only SQLite query (SELECT) on the task's database and return the columns and rows as JSON.",
)
async def sql(
    ctx: ToolContext,
    query: Annotated[str, Field(min_length=1, max_length=4000, description="One SQLite SELECT statement.")],
) -> ToolOutcome:
    """Run ``query`` on a fresh in-memory copy of the benchmark's database, in the sandbox (see :data:`_SQL_PROGRAM`)."""
    if ctx.spec.database is None:
        return ToolOutcome("error", "this task has no database")
    program = _SQL_PROGRAM.format(database=repr(ctx.spec.database), query=repr(query), max_rows=ctx.spec.max_rows)
    outcome = await _sandboxed(program, ctx)
    if outcome.status == "error" and "SQL error:" in outcome.result:
        return ToolOutcome("error", outcome.result[outcome.result.index("SQL error:") :].strip())
    return outcome


_WORD = re.compile(r"\w+")


def bm25_rank(query: str, corpus: list[CorpusDocument], k1: float = 1.2, b: float = 0.75) -> list[tuple[str, float]]:
    """Okapi BM25 scores of ``corpus`` for ``query`` (Robertson and Zaragoza, "The Probabilistic Relevance
    Framework: BM25 and Beyond", 2009, eq. 3.15, with the non-negative idf ln(1 + (N - n + 0.5) / (n + 0.5))),
    lower-cased word tokens; ``[(document id, score)]`` of the documents sharing a term, best first."""
    docs = [Counter(_WORD.findall(d.text.lower())) for d in corpus]
    avg = sum(sum(c.values()) for c in docs) / max(1, len(docs))
    terms = set(_WORD.findall(query.lower()))
    scored = []
    for doc, counts in zip(corpus, docs, strict=True):
        length, score = sum(counts.values()), 0.0
        for term in terms & counts.keys():
            n = sum(1 for c in docs if term in c)
            idf = math.log(1 + (len(docs) - n + 0.5) / (n + 0.5))
            tf = counts[term]
            score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / max(avg, 1e-9)))
        if score > 0:
            scored.append((doc.id, score))
    return sorted(scored, key=lambda pair: -pair[1])


@tool("search", "Search the task's documents by keywords; returns the best three documents' ids and text.")
async def search(
    ctx: ToolContext,
    query: Annotated[str, Field(min_length=1, max_length=500, description="Keywords to search for.")],
) -> ToolOutcome:
    """The three best documents of the corpus for ``query`` (:func:`bm25_rank`), each ``[id] text``."""
    corpus = ctx.spec.corpus or []
    if not corpus:
        return ToolOutcome("error", "this task has no documents")
    ranked = await asyncio.to_thread(bm25_rank, query, corpus)
    texts = {d.id: d.text for d in corpus}
    if not ranked:
        return ToolOutcome("ok", "no document matches")
    return ToolOutcome("ok", _bounded("\n".join(f"[{doc}] {texts[doc][:600]}" for doc, _ in ranked[:3])))


@tool("submit", "Give your final answer and end the task.")
async def submit(
    ctx: ToolContext,
    answer: Annotated[str, Field(max_length=1000, description="The final answer, as short as possible.")],
) -> ToolOutcome:
    """End the run: the answer is the result."""
    return ToolOutcome("ok", answer)
