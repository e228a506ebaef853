"""``uep`` run as a user runs it (a subprocess of the console script) against a small HTTP gateway of the test's
own: a thread of this process on a free loopback port, answering canned JSON (no stack)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

UEP = str(Path(sys.executable).with_name("uep"))
EID = "0f6c1a52-8f5e-4e0b-9d43-6a1d2b3c4d5e"


class FakeGateway:
    """Canned answers by (method, path); every request is recorded as (method, path, JSON body or None)."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Any] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.url = ""


@pytest.fixture()
def fake_gateway() -> Iterator[FakeGateway]:
    fake = FakeGateway()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            path = self.path.split("?", 1)[0]
            fake.requests.append((self.command, path, body))
            found = (self.command, path) in fake.routes
            data = json.dumps(fake.routes[(self.command, path)] if found else {"detail": "Not Found"}).encode()
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def _env(fake: FakeGateway, tmp_path: Path, columns: int = 80) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UEP_") and k not in ("COLUMNS", "LINES")}
    return env | {
        "UEP_URL": fake.url,
        "UEP_API_KEY": "uep_test",
        "UEP_CONFIG": str(tmp_path / "config.json"),
        "COLUMNS": str(columns),
    }


def _view(eid: str, arm: str, experiment_id: str | None = None) -> dict[str, Any]:
    return {
        "id": eid,
        "status": "completed",
        "arm": arm,
        "experiment_id": experiment_id,
        "benchmark": {"slug": "gsm8k"},
        "model": {"name": "uep-oracle", "version": "1"},
        "progress": {"completed": 6, "total": 6, "errors": 0},
        "summary": {"accuracy": 0.6667, "ci_low": 0.29999, "ci_high": 0.90324, "n": 6},
        "error": None,
    }


def test_status_prints_the_evaluation_without_importing_pydantic_rich_or_click(fake_gateway, tmp_path):
    fake_gateway.routes[("GET", f"/v1/evaluations/{EID}")] = _view(EID, "main")
    # the console script's main, with the modules loaded by the end written to stderr
    program = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
        f"sys.argv = ['uep', 'status', '{EID}']\n"
        "from uep_cli.main import main\n"
        "main()\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", program], env=_env(fake_gateway, tmp_path), capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == (
        f"gsm8k × uep-oracle 1 [main] completed 6/6 errors 0\n{EID} completed: accuracy 66.7 % [30.0–90.3] Wilson n=6 errors=0\n"
    )
    assert fake_gateway.requests == [("GET", f"/v1/evaluations/{EID}", None)]
    modules = set(r.stderr.split("MODULES ", 1)[1].split())
    assert {"typer", "httpx"} <= modules
    assert {m.split(".")[0] for m in modules} & {"pydantic", "pydantic_core", "rich", "click", "pygments"} == set()


def test_a_string_option_still_reaches_the_command_and_a_bad_one_is_refused(fake_gateway, tmp_path):
    env = _env(fake_gateway, tmp_path)
    r = subprocess.run([UEP, "results", EID, "--format", "xml"], env=env, capture_output=True, text=True, timeout=60)
    assert (r.returncode, "jsonl or csv" in r.stderr) == (2, True)
    fake_gateway.routes[("GET", f"/v1/evaluations/{EID}/results")] = {
        "items": [{"sample_ordinal": 0, "is_correct": True}],
        "next_cursor": None,
    }
    r = subprocess.run([UEP, "results", EID, "--format", "csv"], env=env, capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout.splitlines()) == (0, ["sample_ordinal,is_correct", "0,True"])


def test_benchmarks_list_never_cuts_a_slug_at_80_columns(fake_gateway, tmp_path):
    slugs = ["humaneval-retrieval-multilingual-2025", "mmlu-topic", "gsm8k"]
    fake_gateway.routes[("GET", "/v1/benchmarks")] = [
        {
            "slug": slug,
            "name": f"{slug} with a long descriptive name",
            "category": "reasoning",
            "evaluation_type": "classification",
            "metric": "exact_match",
            "sample_count": 1319,
            "version": "3f2a9c0d41b7e5a6",
            "status": "active",
        }
        for slug in slugs
    ]
    r = subprocess.run(
        [UEP, "benchmarks", "list"], env=_env(fake_gateway, tmp_path, 80), capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    # each slug whole in its cell, "│ <slug> … │" padded to the longest slug (the old table showed "humane…")
    width = max(map(len, slugs))
    cells = [line.split("│")[1] for line in lines if line.startswith("│ ")]
    assert [c for c in cells if c.strip()] == [f" {slug:<{width}} " for slug in slugs]
    assert max(len(line) for line in lines) == 80
    # the other columns shrank instead: "classification" is cut in each row
    assert sum("classification" in line for line in lines) == 0
    assert sum("…" in line for line in lines if line.startswith("│ ")) >= 3


def test_ab_progress_bars_name_their_arm_even_one_called_main(fake_gateway, tmp_path):
    a, b, experiment = "aaaaaaaa-0000-0000-0000-000000000001", "bbbbbbbb-0000-0000-0000-000000000002", "e-1"
    fake_gateway.routes[("POST", "/v1/evaluations")] = {
        "id": a,
        "status": "queued",
        "experiment_id": experiment,
        "evaluations": [{"id": a, "arm": "main"}, {"id": b, "arm": "terse"}],
    }
    fake_gateway.routes[("GET", f"/v1/evaluations/{a}")] = _view(a, "main", experiment)
    fake_gateway.routes[("GET", f"/v1/evaluations/{b}")] = _view(b, "terse", experiment)
    r = subprocess.run(
        [UEP, "run", "-b", "gsm8k", "--arm", "main:model=uep-oracle", "--arm", "terse:model=uep-oracle,fewshot=0", "--follow"],
        env=_env(fake_gateway, tmp_path, 80),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    # one bar per arm, its label whole in a column as wide as the longer one (the old bars both read
    # "gsm8k × uep-oracle": rich took "[terse]" for a style tag, and "main" was never shown)
    bars = [line for line in r.stdout.splitlines() if line.startswith("gsm8k × uep-oracle")]
    assert [line[:27] for line in bars] == ["gsm8k × uep-oracle [main]  ", "gsm8k × uep-oracle [terse] "]
    assert all(" 6/6 " in line and line.endswith("completed") for line in bars), bars
    assert fake_gateway.requests[0][2]["arms"] == [
        {"name": "main", "model": "uep-oracle"},
        {"name": "terse", "model": "uep-oracle", "fewshot_k": 0},
    ]
