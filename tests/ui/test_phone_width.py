"""The web UI at a phone's width (390 px) in headless Chromium on the real stack: no page is wider than the
screen (what is wider scrolls inside its own box), the evaluations list keeps its headline column in view,
the report grows its frame to its own height instead of scrolling inside it, Pin and Unpin are offered one at
a time, a cancelled run shows its partial result, and the create form estimates time beside cost.
Screenshots at 390 and 1280 px go to ``UEP_UI_SCREENSHOTS`` (default: the test's tmp dir)."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from integration.helpers import submit, wait_done
from integration.session_helpers import signed_in

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
NARROW = {"width": 390, "height": 844}
WIDE = {"width": 1280, "height": 900}

pytestmark = pytest.mark.skipif(
    not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM), reason="needs Debian's chromium (make chromium)"
)


@pytest.fixture(scope="module")
def runs(gateway) -> dict[str, str]:
    """A completed gsm8k run on the oracle, and one of SmolLM2 cancelled after its first stored result."""
    done = submit(gateway, benchmark="gsm8k", model="uep-oracle", sample_limit=6)
    assert wait_done(gateway, done)["status"] == "completed"
    slow = submit(gateway, benchmark="gsm8k", model="smollm2-135m-instruct", sample_limit=20)
    deadline = time.monotonic() + 120
    while gateway.get(f"/v1/evaluations/{slow}").json()["progress"]["completed"] < 1:
        assert time.monotonic() < deadline, "no stored result within 120 s"
        time.sleep(0.1)
    r = gateway.post(f"/v1/evaluations/{slow}/cancel")
    assert r.status_code == 200 and r.json()["summary"]["n"] >= 1, r.text
    return {"done": done, "cancelled": slow}


def _page(p, stack, user: dict, viewport: dict):
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)
    browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
    context = browser.new_context(viewport=viewport)
    host = urlsplit(stack.gateway_url).hostname
    context.add_cookies(
        [
            {"name": "uep_session", "value": user["cookies"]["uep_session"], "domain": host, "path": "/", "httpOnly": True},
            {"name": "uep_csrf", "value": user["csrf"], "domain": host, "path": "/"},
        ]
    )
    return browser, context.new_page()


def _fits(page, width: int) -> None:
    page.wait_for_timeout(200)  # the last paint
    assert page.evaluate("document.documentElement.scrollWidth") <= width, page.url


def test_pages_fit_a_phone(gateway, stack, db, runs):
    from playwright.sync_api import expect, sync_playwright

    shots = Path(os.environ.get("UEP_UI_SCREENSHOTS") or "/tmp")
    admin = signed_in(db, "default", "admin", f"phone-{uuid.uuid4().hex[:6]}")
    base = stack.gateway_url
    with sync_playwright() as p:
        for name, viewport in (("390", NARROW), ("1280", WIDE)):
            browser, page = _page(p, stack, admin, viewport)
            try:
                page.goto(f"{base}/ui/evaluations")
                row = page.locator(f"#evaluation-list tr[data-id='{runs['done']}']")
                expect(row).to_be_visible()
                headline = row.locator("td.headline")
                expect(headline).to_contain_text("66.7 %")
                assert headline.bounding_box()["x"] + headline.bounding_box()["width"] <= viewport["width"]
                page.screenshot(path=str(shots / f"phone-evaluations-{name}.png"), full_page=True)
                _fits(page, viewport["width"])

                page.goto(f"{base}/ui/evaluations/new")
                expect(page.locator("#create-submit")).to_be_visible()
                page.get_by_label("Benchmark").select_option("gsm8k")
                page.locator("input[data-model='uep-oracle']").check()
                page.get_by_label("Sample limit").fill("6")
                expect(page.locator("#estimate-total")).to_contain_text("Estimated cost")
                expect(page.locator("#estimate-time")).to_contain_text("Estimated time: ")
                page.screenshot(path=str(shots / f"phone-create-{name}.png"), full_page=True)
                _fits(page, viewport["width"])

                page.goto(f"{base}/ui/evaluations/{runs['done']}")
                expect(page.locator("#progress")).to_have_attribute("data-status", "completed")
                frame = page.frame_locator("#report-frame")
                expect(frame.locator("body")).to_contain_text("gsm8k", timeout=60_000)
                # the frame takes the report's height: taller than the 75vh it starts with, no inner scroll
                page.wait_for_function(
                    "() => document.getElementById('report-frame').getBoundingClientRect().height > 0.9 * innerHeight"
                )
                page.screenshot(path=str(shots / f"phone-evaluation-{name}.png"), full_page=True)
                _fits(page, viewport["width"])

                page.goto(f"{base}/ui/evaluations/{runs['cancelled']}")
                expect(page.locator("#progress h2")).to_contain_text("Result (partial")
                expect(page.locator("#accuracy")).not_to_have_text("—")
                page.screenshot(path=str(shots / f"phone-cancelled-{name}.png"), full_page=True)
                _fits(page, viewport["width"])
            finally:
                browser.close()


def test_pin_and_unpin_one_at_a_time(gateway, stack, db, runs):
    from playwright.sync_api import expect, sync_playwright

    admin = signed_in(db, "default", "admin", f"pin-{uuid.uuid4().hex[:6]}")
    evaluation = f"{stack.gateway_url}/ui/evaluations/{runs['done']}"
    gateway.delete(f"/v1/evaluations/{runs['done']}/pin")
    with sync_playwright() as p:
        browser, page = _page(p, stack, admin, NARROW)
        try:
            page.goto(evaluation)
            expect(page.locator("#act-pin")).to_be_visible()
            expect(page.locator("#act-unpin")).to_have_count(0)
            assert gateway.post(f"/v1/evaluations/{runs['done']}/pin").status_code == 200
            page.goto(evaluation)
            expect(page.locator("#act-unpin")).to_be_visible()
            expect(page.locator("#act-pin")).to_have_count(0)
        finally:
            browser.close()
    assert gateway.get(f"/v1/evaluations/{runs['done']}").json()["pinned"] is True
