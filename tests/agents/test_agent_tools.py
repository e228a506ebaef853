"""The agent tools (uep_inference.agent.tools) through the registry, in the real bubblewrap sandbox: results,
bounds, and hostile arguments (writes outside the sandbox, network, the host's environment, writes to the
database) that must be refused."""

import asyncio
import json
import os
from pathlib import Path

import pytest

from uep_common.contract.agents import AgentSpec, CorpusDocument
from uep_inference.agent.registry import BadToolCallError, ToolContext, ToolOutcome, get_tool
from uep_inference.agent.tools import bm25_rank

DB = "CREATE TABLE flowers (name TEXT, petal REAL); INSERT INTO flowers VALUES ('a', 1.5), ('b', 2.5), ('c', 4.0);"
SPEC = AgentSpec(tools=["python", "sql", "search"], database=DB, max_rows=2)
CTX = ToolContext(SPEC, timeout_s=10.0)


def call(name: str, **arguments: object) -> ToolOutcome:
    return asyncio.run(get_tool(name).call(CTX, dict(arguments)))


def test_sql_tool_schema_is_the_function_calling_shape():
    assert get_tool("sql").function_schema()["function"]["parameters"] == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 4000, "description": "One SQLite SELECT statement."}
        },
        "required": ["query"],
        "additionalProperties": False,
    }


def test_arguments_are_checked_against_the_schema():
    with pytest.raises(BadToolCallError, match="sql: sql_text: Extra inputs are not permitted"):
        call("sql", query="SELECT 1", sql_text="x")
    with pytest.raises(BadToolCallError, match="query: Field required"):
        call("sql")
    with pytest.raises(BadToolCallError, match="unknown tool 'shell'"):
        get_tool("shell")


def test_sql_returns_rows_as_json_bounded_by_max_rows():
    outcome = call("sql", query="SELECT name, petal FROM flowers ORDER BY petal DESC")
    assert outcome.status == "ok"
    assert json.loads(outcome.result) == {"columns": ["name", "petal"], "rows": [["c", 4.0], ["b", 2.5]], "truncated": True}
    # AVG(1.5, 2.5, 4.0) = 8 / 3
    assert json.loads(call("sql", query="SELECT AVG(petal) FROM flowers").result)["rows"] == [[8 / 3]]


@pytest.mark.parametrize(
    "query",
    [
        "DELETE FROM flowers",
        "INSERT INTO flowers VALUES ('x', 9)",
        "DROP TABLE flowers",
        "ATTACH DATABASE '/tmp/other.db' AS other",
        "PRAGMA query_only = OFF",
        "SELECT load_extension('/usr/lib/x86_64-linux-gnu/libsqlite3.so.0')",
        "SELECT 1; DELETE FROM flowers",
    ],
)
def test_sql_refuses_everything_but_reads(query):
    outcome = call("sql", query=query)
    assert outcome.status == "error"
    assert outcome.result.startswith("SQL error:")


def test_sql_without_a_database():
    outcome = asyncio.run(get_tool("sql").call(ToolContext(AgentSpec(tools=["sql"]), 5.0), {"query": "SELECT 1"}))
    assert outcome == ToolOutcome("error", "this task has no database")


def test_python_prints_come_back():
    outcome = call("python", code="print(sum(range(10)))")
    assert (outcome.status, outcome.result) == ("ok", "45\n")


def test_python_cannot_write_outside_the_sandbox(tmp_path: Path):
    target = tmp_path / "pwned.txt"
    os.chmod(tmp_path, 0o777)  # even a directory anyone may write to on the host is out of reach
    outcome = call("python", code=f"open({str(target)!r}, 'w').write('x')\nprint('wrote')")
    assert outcome.status == "error"
    assert "wrote" not in outcome.result
    assert not target.exists()


def test_python_has_no_network():
    # the stack's PostgreSQL listens on the host's loopback: the sandbox has a loopback of its own, down
    code = "import socket\ns = socket.create_connection(('127.0.0.1', 25432), timeout=2)\nprint('connected')"
    outcome = call("python", code=code)
    assert outcome.status == "error"
    assert "connected" not in outcome.result
    assert "OSError" in outcome.result or "Error" in outcome.result


def test_python_does_not_see_the_host_environment(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("UEP_AGENT_TEST_SECRET", "s3cret-value")
    code = "import os\nprint(sorted(os.environ))\nprint(open('/proc/1/environ').read())"
    outcome = call("python", code=code)
    assert "s3cret-value" not in outcome.result
    assert "UEP_AGENT_TEST_SECRET" not in outcome.result
    assert outcome.result.splitlines()[0] == "['HOME', 'LANG', 'LC_ALL', 'PATH', 'TMPDIR']"


def test_python_time_limit_holds():
    outcome = asyncio.run(get_tool("python").call(ToolContext(SPEC, 1.0), {"code": "while True:\n    pass"}))
    assert outcome.status == "timed_out"


def test_python_result_is_bounded():
    outcome = call("python", code="print('x' * 10000)")
    assert (outcome.status, len(outcome.result)) == ("ok", 2000)


def test_bm25_ranks_the_matching_document_first():
    corpus = [
        CorpusDocument(id="iris", text="The iris data set has 150 flowers of three species."),
        CorpusDocument(id="wine", text="The wine data set has 178 wines from three cultivars."),
        CorpusDocument(id="other", text="Nothing here."),
    ]
    ranked = bm25_rank("how many wines", corpus)
    # only 'wine' holds a query term ("wines"; "how" and "many" occur nowhere)
    assert [doc for doc, _ in ranked] == ["wine"]
    outcome = asyncio.run(
        get_tool("search").call(ToolContext(AgentSpec(tools=["search"], corpus=corpus), 5.0), {"query": "three species"})
    )
    assert outcome.result.splitlines()[0].startswith("[iris]")


def test_submit_returns_its_answer():
    assert call("submit", answer="5.84") == ToolOutcome("ok", "5.84")
