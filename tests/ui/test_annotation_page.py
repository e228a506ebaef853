"""The annotation page (GET /annotate/{task_id}) in headless Chromium (Debian's chromium, driven by
Playwright; no browser is downloaded): one item at a time, guidelines visible, keyboard shortcuts, progress;
each submission is checked in the API's stored results. The browser is a signed-in annotator (session and
CSRF cookies); the page's own requests carry them."""

from __future__ import annotations

import os
import shutil
import uuid
from urllib.parse import urlsplit

import pytest

from integration.helpers import submit, wait_done
from integration.session_helpers import signed_in

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
GUIDELINES = "Pass only when the final number equals the reference answer."

pytestmark = pytest.mark.skipif(
    not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM), reason="needs Debian's chromium (make chromium)"
)


@pytest.fixture(scope="module")
def task(gateway):
    evaluation_id = submit(gateway, benchmark="gsm8k", model="uep-oracle", sample_limit=3)
    assert wait_done(gateway, evaluation_id)["status"] == "completed"
    r = gateway.post(
        "/v1/annotation-tasks",
        json={
            "name": "UI check",
            "evaluation_id": evaluation_id,
            "guidelines": GUIDELINES,
            "annotations_per_item": 1,
            "questions": [
                {"name": "correct", "type": "pass_fail", "prompt": "Is the final answer correct?"},
                {"name": "quality", "type": "rating", "scale_min": 1, "scale_max": 5, "prompt": "Reasoning quality"},
                {"name": "note", "type": "comment"},
            ],
        },
    )
    assert r.status_code == 201, r.text
    return r.json()


def test_annotate_with_the_keyboard(gateway, stack, db, task, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    user = signed_in(db, "default", "annotator", f"ui-annotator-{uuid.uuid4().hex[:6]}")
    host = urlsplit(stack.gateway_url).hostname
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 860})
            context.add_cookies(
                [
                    {
                        "name": "uep_session",
                        "value": user["cookies"]["uep_session"],
                        "domain": host,
                        "path": "/",
                        "httpOnly": True,
                    },
                    {"name": "uep_csrf", "value": user["csrf"], "domain": host, "path": "/"},
                ]
            )
            page = context.new_page()
            page.goto(f"{stack.gateway_url}/annotate/{task['id']}")
            expect(page.locator("#who")).to_have_text(user["username"])
            expect(page.locator("#guidelines")).to_have_text(GUIDELINES)
            expect(page.locator("#progress")).to_have_text("0/3")
            expect(page.locator("#prompt")).not_to_be_empty()
            first_item = page.locator("#item").get_attribute("data-item-id")
            expect(page.locator("#submit")).to_be_disabled()  # nothing answered yet

            page.keyboard.press("p")
            page.keyboard.press("4")
            expect(page.locator("fieldset[data-question=correct] button[data-value=pass]")).to_have_attribute(
                "aria-pressed", "true"
            )
            expect(page.locator("fieldset[data-question=quality] button[data-value='4']")).to_have_attribute(
                "aria-pressed", "true"
            )
            page.screenshot(path=str(tmp_path / "annotate.png"), full_page=True)
            page.keyboard.press("Enter")
            expect(page.locator("#progress")).to_have_text("1/3")
            expect(page.locator("#mine")).to_have_text("1")
            expect(page.locator("#item")).not_to_have_attribute("data-item-id", first_item)

            # the second item: a comment typed in the text box does not trigger shortcuts; Ctrl+Enter submits
            page.keyboard.press("f")
            page.keyboard.press("2")
            page.locator("fieldset[data-question=note] textarea").fill("final number is off by one p f 3")
            second_item = page.locator("#item").get_attribute("data-item-id")
            page.locator("fieldset[data-question=note] textarea").press("Control+Enter")
            expect(page.locator("#progress")).to_have_text("2/3")
            expect(page.locator("#item")).not_to_have_attribute("data-item-id", second_item)

            page.keyboard.press("p")
            page.keyboard.press("5")
            page.keyboard.press("Enter")
            expect(page.locator("#finished")).to_be_visible()
            expect(page.locator("#progress")).to_have_text("3/3")
        finally:
            browser.close()
    shot = tmp_path / "annotate.png"
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")

    results = gateway.get(f"/v1/annotation-tasks/{task['id']}/results").json()["items"]
    stored = [(i["answers"][0]["annotator"], i["answers"][0]["answers"]) for i in results]
    name = user["username"]
    assert stored == [
        (name, {"correct": "pass", "quality": 4}),
        (name, {"correct": "fail", "quality": 2, "note": "final number is off by one p f 3"}),
        (name, {"correct": "pass", "quality": 5}),
    ]
    assert all(i["status"] == "complete" for i in results)


def _signed_in_page(p, stack, user, width: int):
    browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
    context = browser.new_context(viewport={"width": width, "height": 820})
    host = urlsplit(stack.gateway_url).hostname
    context.add_cookies(
        [
            {"name": "uep_session", "value": user["cookies"]["uep_session"], "domain": host, "path": "/", "httpOnly": True},
            {"name": "uep_csrf", "value": user["csrf"], "domain": host, "path": "/"},
        ]
    )
    return browser, context.new_page()


def test_skip_back_errors_and_phone_width(gateway, stack, db, task, tmp_path):
    """At 390 px the text keeps the column's width and the page does not widen; ``s`` skips an item (it is not
    handed back, and stays open for others), ``[`` shows the previous answer read-only and ``]`` returns; a
    forbidden annotator sees the API's reason instead of an empty page."""
    from playwright.sync_api import expect, sync_playwright

    r = gateway.post(
        "/v1/annotation-tasks",
        json={
            "name": "UI skip check",
            "evaluation_id": task["source_evaluation_id"],
            "annotations_per_item": 2,
            "questions": [{"name": "correct", "type": "pass_fail", "prompt": "Is the final answer correct?"}],
        },
    )
    assert r.status_code == 201, r.text
    task_id = r.json()["id"]
    user = signed_in(db, "default", "annotator", f"ui-skipper-{uuid.uuid4().hex[:6]}")
    shots = os.environ.get("UEP_UI_SHOTS") or str(tmp_path)
    with sync_playwright() as p:
        browser, page = _signed_in_page(p, stack, user, 390)
        try:
            page.goto(f"{stack.gateway_url}/annotate/{task_id}")
            expect(page.locator("#prompt")).not_to_be_empty()
            assert page.locator("#prompt").bounding_box()["width"] >= 300
            assert page.evaluate("document.documentElement.scrollWidth") <= 390
            page.screenshot(path=f"{shots}/annotate-390.png", full_page=True)
            skipped = page.locator("#item").get_attribute("data-item-id")
            page.keyboard.press("s")
            expect(page.locator("#status")).to_contain_text("Skipped item")
            expect(page.locator("#item")).not_to_have_attribute("data-item-id", skipped)
            answered = page.locator("#item").get_attribute("data-item-id")
            page.keyboard.press("p")
            page.keyboard.press("Enter")
            expect(page.locator("#item")).not_to_have_attribute("data-item-id", answered)
            third = page.locator("#item").get_attribute("data-item-id")
            assert third != skipped
            page.keyboard.press("[")
            expect(page.locator("#review-banner")).to_be_visible()
            expect(page.locator("#item")).to_have_attribute("data-item-id", answered)
            expect(page.locator("fieldset[data-question=correct] button[data-value=pass]")).to_have_attribute(
                "aria-pressed", "true"
            )
            expect(page.locator("#submit")).to_be_disabled()
            page.keyboard.press("]")
            expect(page.locator("#review-banner")).to_be_hidden()
            expect(page.locator("#item")).to_have_attribute("data-item-id", third)

            page.goto(f"{stack.gateway_url}/annotate/{task_id}?annotator=someone-else")
            expect(page.locator("#failure")).to_be_visible()
            expect(page.locator("#failure-reason")).to_contain_text("works as itself")
            page.screenshot(path=f"{shots}/annotate-forbidden-390.png", full_page=True)
        finally:
            browser.close()
        browser, page = _signed_in_page(p, stack, user, 1280)
        try:
            page.goto(f"{stack.gateway_url}/annotate/{task_id}")
            expect(page.locator("#prompt")).not_to_be_empty()
            page.screenshot(path=f"{shots}/annotate-1280.png", full_page=True)
        finally:
            browser.close()

    results = gateway.get(f"/v1/annotation-tasks/{task_id}/results").json()["items"]
    by_item = {str(i["id"]): [a["annotator"] for a in i["answers"]] for i in results}
    assert by_item[answered] == [user["username"]]
    assert by_item[skipped] == []  # skipped: open for the others, never handed back to this annotator
    nxt = gateway.get(f"/v1/annotation-tasks/{task_id}/next", params={"annotator": "another-one"}).json()
    assert str(nxt["item"]["id"]) == skipped  # the first open item in hand-out order is the skipped one
