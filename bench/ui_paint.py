"""bench/ui_paint: time to the first meaningful paint of the web UI's evaluations list and of a report page.

Headless Debian Chromium (Playwright, no browser downloaded) against a running stack (``make up``, or any
gateway URL): the bench signs in as the stack's site admin (``admin-credentials.json``: username and
password) through ``POST /v1/auth/login``, gives the browser the session cookies, and loads

- ``/ui/evaluations`` — meaningful paint: the moment the list's table (or its "no evaluations" line) is in
  the DOM, recorded in the page by a MutationObserver as ``performance.now()`` (milliseconds since the
  navigation started: HTML, modules, ``GET /v1/auth/me``, ``GET /v1/evaluations`` and the render);
- ``/ui/evaluations/{id}?tab=report`` — meaningful paint: the ``load`` event of the report's iframe (the
  report's HTML parsed and painted), for the evaluation given (default: the newest completed one).

Each page is loaded ``--runs`` times in a fresh browser context (cold cache each time); printed: each run
and the median, against the target of 2 s for the list. One run of the whole bench is the measure; nothing
here is a test.

Usage: ``python bench/ui_paint.py [--url http://127.0.0.1:8080] [--credentials .run/dev/admin-credentials.json]
[--evaluation ID] [--runs 3]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from urllib.parse import urlsplit

import httpx

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
OBSERVER = """
(() => {
  const seen = () => {
    if (!window.__uepListPaint && document.querySelector('#evaluation-list table, #evaluation-list .empty')) {
      window.__uepListPaint = performance.now();
    }
    const frame = document.querySelector('#report-frame');
    if (frame && !frame.__uepWatched) {
      frame.__uepWatched = true;
      frame.addEventListener('load', () => { window.__uepReportPaint = performance.now(); });
    }
  };
  new MutationObserver(seen).observe(document, { subtree: true, childList: true });
})();
"""


def sign_in(url: str, credentials: Path) -> tuple[dict[str, str], str]:
    """The session and CSRF cookies of the credentials' user, and its admin API key."""
    creds = json.loads(credentials.read_text())
    r = httpx.post(f"{url}/v1/auth/login", json={"username": creds["username"], "password": creds["password"]}, timeout=30)
    r.raise_for_status()
    return dict(r.cookies), creds["api_key"]


def newest_completed(url: str, key: str) -> str:
    """The newest completed evaluation's id (SystemExit when there is none)."""
    r = httpx.get(f"{url}/v1/evaluations", params={"status": "completed", "limit": 1}, headers={"Authorization": f"Bearer {key}"})
    r.raise_for_status()
    items = r.json()["items"]
    if not items:
        sys.exit("no completed evaluation on this stack: run one first (e.g. make demo KEEP=1), or pass --evaluation")
    return items[0]["id"]


def measure(url: str, cookies: dict[str, str], path: str, key: str, runs: int) -> list[float]:
    """Milliseconds to the paint named by ``key`` (``__uepListPaint`` or ``__uepReportPaint``), one per run."""
    from playwright.sync_api import sync_playwright

    host = urlsplit(url).hostname
    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            for _ in range(runs):
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                context.add_cookies(
                    [
                        {"name": k, "value": v, "domain": host, "path": "/", "httpOnly": k == "uep_session"}
                        for k, v in cookies.items()
                    ]
                )
                context.add_init_script(OBSERVER)
                page = context.new_page()
                page.goto(url + path)
                page.wait_for_function(f"() => window.{key} !== undefined", timeout=120_000)
                out.append(float(page.evaluate(f"window.{key}")))
                context.close()
        finally:
            browser.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--credentials", type=Path, default=Path(".run/dev/admin-credentials.json"))
    parser.add_argument("--evaluation", default=None)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    url = args.url.rstrip("/")
    cookies, key = sign_in(url, args.credentials)
    evaluation = args.evaluation or newest_completed(url, key)
    lists = measure(url, cookies, "/ui/evaluations", "__uepListPaint", args.runs)
    reports = measure(url, cookies, f"/ui/evaluations/{evaluation}?tab=report", "__uepReportPaint", args.runs)
    fmt = ", ".join
    print(
        f"evaluations list, first meaningful paint: {fmt(f'{x:.0f}' for x in lists)} ms; median {statistics.median(lists):.0f} ms "
        f"(target < 2000 ms: {statistics.median(lists) / 2000:.2f} of it)"
    )
    print(
        f"report page ({evaluation}), report frame loaded: {fmt(f'{x:.0f}' for x in reports)} ms; median {statistics.median(reports):.0f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
