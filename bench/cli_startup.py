"""``uep --help`` and ``uep status ID`` start-up time (target < 0.3 s each), against the bare interpreter's.

Runs ``uep --help``, ``uep status ID`` and ``python -c pass`` interleaved (A, B, C, A, B, C, ...) ``--rounds``
times and prints the median and spread of each and their ratios, so a loaded machine shows as a slow baseline
rather than a slow command. ``uep status`` asks a small HTTP server that this bench runs in a thread on a free
loopback port (no stack needed): it answers ``GET /v1/evaluations/ID`` with a finished evaluation, so the run
covers the whole command (start-up, credentials, one request, the printed lines) and fails if the output
differs.

Each command is timed twice: as this environment runs it (with ``PYTHONDONTWRITEBYTECODE`` set and no
bytecode in the virtual environment, every run compiles every module it imports), and with a bytecode cache
(``PYTHONPYCACHEPREFIX``: a temporary folder, filled by one untimed run first).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

UEP = str(Path(sys.executable).with_name("uep"))
EVALUATION_ID = "0f6c1a52-8f5e-4e0b-9d43-6a1d2b3c4d5e"
VIEW = {
    "id": EVALUATION_ID,
    "status": "completed",
    "arm": "main",
    "benchmark": {"slug": "mmlu"},
    "model": {"name": "smollm2-135m", "version": "1"},
    "progress": {"completed": 60, "total": 60, "errors": 0},
    "summary": {"accuracy": 0.25, "ci_low": 0.158, "ci_high": 0.372, "n": 60},
    "error": None,
}
EXPECTED_STATUS = (
    f"mmlu × smollm2-135m 1 [main] completed 60/60 errors 0\n"
    f"{EVALUATION_ID} completed: accuracy 0.250 [0.158, 0.372] n=60 errors=0\n"
)
TARGET_MS = 300


class _Gateway(BaseHTTPRequestHandler):
    """Answers ``GET /v1/evaluations/{EVALUATION_ID}`` with :data:`VIEW`; anything else is a 404."""

    def do_GET(self) -> None:
        """Send the evaluation's JSON view (or a 404)."""
        found = self.path == f"/v1/evaluations/{EVALUATION_ID}"
        body = json.dumps(VIEW if found else {"detail": "Not Found"}).encode()
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Log nothing: the bench prints only its figures."""


@contextmanager
def gateway() -> Iterator[str]:
    """A :class:`_Gateway` on a free loopback port for the block's duration; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Gateway)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _time(cmd: list[str], env: dict[str, str], expected: str | None = None) -> float:
    """Seconds ``cmd`` took to run to its end; raises ``RuntimeError`` if it fails or prints other than
    ``expected`` (when given)."""
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if r.returncode != 0 or (expected is not None and r.stdout != expected):
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    return elapsed


def _line(label: str, samples: list[float], target: bool) -> str:
    m = statistics.median(samples)
    return f"{label:<34} median {m * 1000:6.0f} ms  (min {min(samples) * 1000:.0f}, max {max(samples) * 1000:.0f})" + (
        f"  target < {TARGET_MS} ms" if target else ""
    )


def main() -> int:
    """Print the medians (ms), their spread and the ratios to the bare interpreter; exit 0."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=10)
    args = p.parse_args()
    with gateway() as url, tempfile.TemporaryDirectory(prefix="uep-cli-bench-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("UEP_")}
        env |= {"UEP_CONFIG": str(Path(tmp) / "config.json"), "UEP_URL": url, "UEP_API_KEY": "uep_bench", "COLUMNS": "120"}
        cached = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        commands = {
            "uep --help": ([UEP, "--help"], None),
            "uep status ID": ([UEP, "status", EVALUATION_ID], EXPECTED_STATUS),
        }
        for cmd, expected in commands.values():  # fills the cache, and checks the output before timing
            _time(cmd, cached, expected)
        times: dict[str, list[float]] = {}
        for _ in range(args.rounds):
            for regime, e in (("", env), (", bytecode cached", cached)):
                for name, (cmd, expected) in commands.items():
                    times.setdefault(name + regime, []).append(_time(cmd, e, expected))
            times.setdefault("python -c pass", []).append(_time([sys.executable, "-c", "pass"], env))
    no_pyc = os.environ.get("PYTHONDONTWRITEBYTECODE")
    print(f"environment: PYTHONDONTWRITEBYTECODE {'set' if no_pyc else 'unset'}; {args.rounds} interleaved rounds")
    for name, samples in times.items():
        print(_line(name, samples, target=name != "python -c pass"))
    bare = statistics.median(times["python -c pass"])
    print(
        "ratios to the bare interpreter: "
        + ", ".join(f"{n} {statistics.median(s) / bare:.1f}" for n, s in times.items() if n != "python -c pass")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
