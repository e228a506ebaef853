"""Conversation items in the item browser, in headless Chromium on the real stack, at 1280 px and 390 px
(screenshots to ``UEP_UI_SCREENSHOTS``, default the test's tmp dir): a given conversation of the built-in
``support-dialogues`` and a simulated customer of ``support-simulated`` (the embedded LLM on every side) show as
chat bubbles with the judge's verdict, overall score, per-dimension scores and reasons beside them; a hybrid
evaluation whose judge sent items to people shows "awaiting human review: 2 items" with a link to the
annotation task, not "running"."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

import pytest

from integration.helpers import submit, wait_done
from integration.session_helpers import signed_in
from integration.test_judge import upload

from .test_web_ui import CHROMIUM, NARROW, WIDE, _browser, _shot, _with_session

pytestmark = pytest.mark.skipif(
    not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM), reason="needs Debian's chromium (make chromium)"
)
LLM = "smollm2-135m-instruct"


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    where = Path(os.environ.get("UEP_UI_SCREENSHOTS") or tmp_path_factory.mktemp("ui-shots"))
    where.mkdir(parents=True, exist_ok=True)
    return where


@pytest.fixture(scope="module")
def conversations(gateway) -> dict[str, str]:
    """A completed evaluation of each conversation benchmark (2 items each) by the embedded LLM."""
    runs = {
        "dialogue": submit(gateway, benchmark="support-dialogues", model=LLM, sample_limit=2),
        "simulated": submit(gateway, benchmark="support-simulated", model=LLM, sample_limit=2),
    }
    for evaluation_id in runs.values():
        assert wait_done(gateway, evaluation_id, timeout_s=900)["status"] == "completed"
    return runs


@pytest.fixture(scope="module")
def awaiting(gateway) -> tuple[str, str]:
    """A hybrid evaluation whose stand-in jury sends items 3 and 4 to people (as integration.test_judge's hybrid
    test), with an annotation task over them; returns (evaluation id, task id)."""
    rows = [
        "[[say:The answer is (B).]]",
        "[[say:The answer is (C).]]",
        "[[say:I cannot tell. JUDGE:SCORE=2]]",
        "[[say:Unsure. JUDGE:SCORE=8]]",
        "[[say:No idea. JUDGE:PROSE]]",
    ]
    slug = f"ui-hybrid-{uuid.uuid4().hex[:8]}"
    judge = {"mode": "rubric", "judges": ["uep-judge", "uep-judge-first"], "max_retries": 1}
    r = upload(gateway, slug, rows, "hybrid", judge, metric={"name": "multiple_choice_letter", "params": {"choices": "ABCD"}})
    assert r.status_code == 201, r.text
    evaluation_id = submit(gateway, benchmark=slug, model="uep-judge")
    deadline = time.monotonic() + 120
    view: dict = {}
    while time.monotonic() < deadline:
        view = gateway.get(f"/v1/evaluations/{evaluation_id}").json()
        if view["progress"]["completed"] == 3 and view["awaiting_human"] == 2:
            break
        time.sleep(0.3)
    assert (view["status"], view["awaiting_human"]) == ("running", 2), view
    task = gateway.post(
        "/v1/annotation-tasks",
        json={"name": "ui-awaiting", "source": "hybrid", "evaluation_id": evaluation_id,
              "questions": [{"name": "correct", "type": "pass_fail"}], "annotations_per_item": 1},
    )  # fmt: skip
    assert task.status_code == 201, task.text
    return evaluation_id, task.json()["id"]


@pytest.mark.slow  # minutes of the embedded LLM: make test-slow
def test_conversations_show_as_chat_bubbles_beside_the_verdicts(gateway, stack, db, conversations, shots):
    from playwright.sync_api import expect, sync_playwright

    user = signed_in(db, "default", "viewer")
    with sync_playwright() as p:
        browser = _browser(p)
        try:
            for kind, evaluation_id in conversations.items():
                first = gateway.get(f"/v1/evaluations/{evaluation_id}/results", params={"limit": 1}).json()["items"][0]
                verdict = gateway.get(
                    "/v1/judges/verdicts", params={"evaluation_id": evaluation_id, "sample_ordinal": first["sample_ordinal"]}
                ).json()[0]
                for width, viewport in (("1280", WIDE), ("390", NARROW)):
                    context = _with_session(browser, stack, user, viewport)
                    page = context.new_page()
                    page.goto(f"{stack.gateway_url}/ui/evaluations/{evaluation_id}")
                    page.locator("#tab-items").click()
                    item = page.locator("details.item").first
                    item.locator("summary").click()
                    chat = item.locator(".chat")
                    expect(chat.locator(".bubble")).to_have_count(len(first["transcript"]["messages"]))
                    expect(chat.locator(".bubble.assistant").last).to_contain_text(
                        first["transcript"]["messages"][-1]["content"][:40]
                    )
                    card = item.locator(".verdict-card").first
                    expect(card).to_contain_text(f"Overall {verdict['overall']:g}")  # as JavaScript writes 1.0
                    for name, value in verdict["scores"].items():
                        expect(card.locator("table.dims tr", has_text=name)).to_contain_text(f"{value:g}")
                    if kind == "simulated":
                        expect(chat.locator(".persona")).to_contain_text(first["transcript"]["persona"])
                    else:
                        expect(chat.locator(".bubble.user .reference").last).to_contain_text("Reference reply")
                    _shot(page, shots, f"conversation-{kind}-{width}")
                    context.close()
        finally:
            browser.close()


def test_a_hybrid_run_waiting_for_people_says_so_with_a_link(gateway, stack, db, awaiting, shots):
    from playwright.sync_api import expect, sync_playwright

    evaluation_id, task_id = awaiting
    user = signed_in(db, "default", "viewer")
    with sync_playwright() as p:
        browser = _browser(p)
        try:
            for width, viewport in (("1280", WIDE), ("390", NARROW)):
                context = _with_session(browser, stack, user, viewport)
                page = context.new_page()
                page.goto(f"{stack.gateway_url}/ui/evaluations/{evaluation_id}")
                expect(page.locator("#awaiting-human")).to_contain_text("awaiting human review: 2 items")
                expect(page.locator("#awaiting-human a")).to_have_attribute("href", f"/annotate/{task_id}")
                expect(page.locator(".page-head .badge").first).to_contain_text("awaiting human review")
                _shot(page, shots, f"awaiting-human-{width}")
                context.close()
        finally:
            browser.close()
