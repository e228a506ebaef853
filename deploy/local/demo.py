"""``make demo``: a real evaluation end to end.

Starts the local stack (unless one is already running), submits evaluations of the embedded default model
(SmolLM2-135M-Instruct served by Triton on CPU) on real MMLU, GSM8K and HumanEval items through the
gateway (and a few GSM8K answers graded by the same embedded model as an LLM judge), follows their progress, prints the summary table and a few answers, says where the web UI is and
how to sign in, and stops the stack it started — unless ``KEEP=1`` (``make demo KEEP=1``) asks to leave it
up for a look around (``make down`` stops it). Sizes can be changed with ``UEP_DEMO_MMLU``,
``UEP_DEMO_GSM8K``, ``UEP_DEMO_HUMANEVAL`` and ``UEP_DEMO_JUDGED``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
import servers
import uep_stack

MODEL = os.environ.get("UEP_DEMO_MODEL", "smollm2-135m-instruct")
PLAN = [
    ("mmlu", int(os.environ.get("UEP_DEMO_MMLU", 40))),
    ("gsm8k", int(os.environ.get("UEP_DEMO_GSM8K", 15))),
    ("humaneval", int(os.environ.get("UEP_DEMO_HUMANEVAL", 5))),
    ("gsm8k-judged", int(os.environ.get("UEP_DEMO_JUDGED", 5))),
]
CHANCE = {"mmlu": "25 % (4 options)", "gsm8k": "~0 %", "humaneval": "0 %", "gsm8k-judged": "judged"}
JUDGE_NOTE = (
    "gsm8k-judged is graded by the embedded SmolLM2-135M-Instruct as an LLM judge (reference-guided, integer 1-5,\n"
    "correct = overall >= 3): its verdicts are decoded under a JSON-schema grammar, so every one parses and lies on\n"
    "the scale, but a 135M-parameter judge is a weak one. Name a stronger registered model as judge for real use."
)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _fmt(x: float | None, pct: bool = True) -> str:
    if x is None:
        return "—"
    return f"{100 * x:5.1f} %" if pct else f"{x:,.0f}"


def follow(client: httpx.Client, evaluations: dict[str, str], timeout_s: float = 1800) -> dict[str, dict]:
    """Poll every evaluation until all are finished, printing one progress line per second."""
    final: dict[str, dict] = {}
    t0 = time.monotonic()
    tty = sys.stdout.isatty()
    last_line = ""
    while len(final) < len(evaluations):
        if time.monotonic() - t0 > timeout_s:
            raise SystemExit(f"demo: evaluations did not finish within {timeout_s:.0f} s")
        parts = []
        for slug, eid in evaluations.items():
            body = final.get(slug) or client.get(f"/v1/evaluations/{eid}").json()
            if body["status"] in ("completed", "failed", "cancelled"):
                final[slug] = body
            p = body["progress"]
            parts.append(f"{slug} {p['completed']}/{p['total']}" + (" ✓" if slug in final else ""))
        line = f"[{time.monotonic() - t0:5.0f} s] " + " | ".join(parts)
        if tty:
            print("\r" + line.ljust(len(last_line)), end="", flush=True)
        elif line.split("] ", 1)[1] != last_line.split("] ", 1)[-1]:
            print(line, flush=True)
        last_line = line
        time.sleep(1)
    if tty:
        print()
    return final


def report(client: httpx.Client, final: dict[str, dict]) -> None:
    """Print the summary table, honest notes and a few of the model's answers."""
    print(f"\nModel: {MODEL} (SmolLM2-135M-Instruct, Q4_1, Triton on CPU)\n")
    head = f"{'benchmark':<12} {'status':<10} {'n':>4} {'correct':>7} {'accuracy':>9} {'95% Wilson CI':>17} {'errors':>6} {'p50 ms':>8} {'p90 ms':>8} {'tokens in/out':>14}  chance"
    print(head)
    print("-" * len(head))
    for slug, body in final.items():
        s = body.get("summary") or {}
        ci = f"[{_fmt(s.get('ci_low'))}, {_fmt(s.get('ci_high'))}]" if s.get("ci_low") is not None else "—"
        print(
            f"{slug:<12} {body['status']:<10} {s.get('n', 0):>4} {s.get('correct', 0):>7} {_fmt(s.get('accuracy')):>9} "
            f"{ci:>17} {s.get('errors', 0):>6} {_fmt(s.get('latency_ms_p50'), False):>8} {_fmt(s.get('latency_ms_p90'), False):>8} "
            f"{s.get('prompt_tokens', 0):>6}/{s.get('completion_tokens', 0):<7}  {CHANCE.get(slug, '')}"
        )
        if s.get("extraction_failure_rate") is not None:
            print(f"{'':<12} no answer could be extracted from {_fmt(s['extraction_failure_rate']).strip()} of the replies")
        extra = {k: v for k, v in (s.get("metric_means") or {}).items() if k in ("strict_match", "flexible_match")}
        if extra:
            print(
                f"{'':<12} gsm8k strict (#### answer): {_fmt(extra.get('strict_match'))}, flexible (last number): {_fmt(extra.get('flexible_match'))}"
            )
    print(
        "\nA 135M-parameter model is near chance on MMLU and rarely solves GSM8K or HumanEval; the intervals are "
        "wide because n is small. These numbers show the pipeline working on real data, not a good model."
    )
    judged = final.get("gsm8k-judged")
    if judged is not None:
        means = (judged.get("summary") or {}).get("metric_means") or {}
        invalid = means.get("judge_invalid")
        print("\n" + JUDGE_NOTE)
        if invalid is not None:
            print(f"Judge verdicts without a valid score: {_fmt(invalid).strip()} of the items.")
    print("\nSome answers:")
    for slug, body in final.items():
        items = client.get(f"/v1/evaluations/{body['id']}/results", params={"limit": 2}).json()["items"]
        for it in items:
            out = (it["output"] or f"<error: {it['error']}>").strip().replace("\n", " ⏎ ")
            extracted = (it["extracted"] or "—").strip().replace("\n", " ⏎ ")
            extracted = extracted if len(extracted) <= 40 else extracted[:37] + "…"
            print(f"  {slug}#{it['sample_ordinal']} [{'✓' if it['is_correct'] else '✗'} extracted: {extracted}] {out[:100]}")


def main() -> int:
    """Run the demo; returns the exit status (non-zero if an evaluation did not complete)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so `finally` stops the stack
    cfg = uep_stack.config()
    started, servers_started = False, []
    if not _ready(cfg.gateway_url):
        servers_started = uep_stack.up(cfg)
        started = True
    else:
        print(f"using the stack already running at {cfg.gateway_url}")
    try:
        print(
            f"signed in as the local stack's admin: user 'admin' and an API key, both in {cfg.credentials_path}\n"
            '  (curl -H "Authorization: Bearer $(jq -r .api_key < that file)" …; POST /v1/auth/login with the password)'
        )
        with httpx.Client(base_url=cfg.gateway_url, timeout=30, headers=cfg.auth_headers()) as client:
            evaluations = {}
            for slug, n in PLAN:
                r = client.post("/v1/evaluations", json={"benchmark": slug, "model": MODEL, "sample_limit": n})
                if r.status_code != 202:
                    print(f"demo: the gateway refused {slug}: {r.status_code} {r.text}", file=sys.stderr)
                    return 1
                evaluations[slug] = r.json()["id"]
                print(f"submitted {slug} ({n} items): evaluation {evaluations[slug]}")
            final = follow(client, evaluations)
            report(client, final)
            ok = all(b["status"] == "completed" for b in final.values())
        keep = os.environ.get("KEEP", "") not in ("", "0")
        print(
            f"\nWeb UI: {cfg.gateway_url}/ui/ — sign in as 'admin' with the password in {cfg.credentials_path}"
            + ("" if keep or not started else "\n  (the stack stops now: `make demo KEEP=1` leaves it up to look around)")
            + f"\nCommand line: .venv/bin/uep login --url {cfg.gateway_url} --username admin"
        )
        if keep:
            started = False  # leave it up
            print("the stack stays up (KEEP=1): `make down` stops it")
        return 0 if ok else 1
    finally:
        if started:
            print("\nstopping the stack …")
            uep_stack.down(cfg)
            if servers_started:
                for name in servers.stop_all():
                    print(f"stopped {name}")


if __name__ == "__main__":
    sys.exit(main())
