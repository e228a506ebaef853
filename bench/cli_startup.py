"""``uep --help`` start-up time (target < 0.5 s), against the bare interpreter's start-up in the same run.

Runs ``uep --help`` and ``python -c pass`` interleaved (A, B, A, B, ...) ``--rounds`` times and prints the
median and spread of each and their ratio, so a loaded machine shows as a slow baseline rather than a slow
command. The CLI imports httpx and rich only inside the commands that use them (``uep_cli.main``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

UEP = str(Path(sys.executable).with_name("uep"))


def _time(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    """Print the medians (seconds) and the ratio; exit 0."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=10)
    args = p.parse_args()
    cli, bare = [], []
    for _ in range(args.rounds):
        cli.append(_time([UEP, "--help"]))
        bare.append(_time([sys.executable, "-c", "pass"]))
    m_cli, m_bare = statistics.median(cli), statistics.median(bare)
    print(
        f"uep --help      median {m_cli * 1000:6.0f} ms  (min {min(cli) * 1000:.0f}, max {max(cli) * 1000:.0f})  target < 500 ms"
    )
    print(f"python -c pass  median {m_bare * 1000:6.0f} ms  (min {min(bare) * 1000:.0f}, max {max(bare) * 1000:.0f})")
    print(f"ratio uep / bare interpreter: {m_cli / m_bare:.1f}  ({args.rounds} interleaved rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
