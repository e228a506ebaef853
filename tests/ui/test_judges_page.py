"""The judges page (``/ui/judges``) in headless Chromium on the real stack: the calibrated judge of
``integration.test_judge_calibration`` (22 verdicts, cost 0.044, one calibration snapshot over 20 items) with
its standing, cost per verdict and history, at 1280 px and 390 px (screenshots to ``UEP_UI_SCREENSHOTS``, default
the test's tmp dir); a viewer of another tenant sees no judge."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

from integration.session_helpers import signed_in
from integration.test_judge_calibration import calibrated, judged  # noqa: F401  (module fixtures)
from uep_common.admin import create_tenant

from .test_web_ui import CHROMIUM, NARROW, WIDE, _browser, _shot, _with_session

pytestmark = pytest.mark.skipif(
    not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM), reason="needs Debian's chromium (make chromium)"
)


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    where = Path(os.environ.get("UEP_UI_SCREENSHOTS") or tmp_path_factory.mktemp("ui-shots"))
    where.mkdir(parents=True, exist_ok=True)
    return where


def test_judges_page_wide_and_narrow(gateway, stack, db, calibrated, shots):  # noqa: F811
    from playwright.sync_api import expect, sync_playwright

    task, _, name = calibrated
    standing = next(j for j in gateway.get("/v1/judges").json()["judges"] if j["judge_model"] == name)
    user = signed_in(db, "default", "viewer")
    other_slug = f"ui-j-{uuid.uuid4().hex[:6]}"
    create_tenant(stack.database_url, other_slug)
    other = signed_in(db, other_slug, "viewer")
    with sync_playwright() as p:
        browser = _browser(p)
        try:
            for shot, viewport in (("judges-1280", WIDE), ("judges-390", NARROW)):
                context = _with_session(browser, stack, user, viewport)
                page = context.new_page()
                page.goto(stack.gateway_url + "/ui/judges")
                row = page.locator("tr", has_text=name).first
                expect(row).to_be_visible()
                expect(row).to_contain_text("0.002000")  # cost per verdict: 0.044 / 22
                expect(row).to_contain_text("flagged" if standing["flagged"] else "calibrated")
                expect(row).to_contain_text(f"{standing['agreement']:.2f}")
                history = page.locator("section.judge-history", has_text=name)
                expect(history).to_contain_text(task["source_evaluation_id"][:8])
                _shot(page, shots, shot)
                context.close()
            context = _with_session(browser, stack, other, WIDE)
            page = context.new_page()
            page.goto(stack.gateway_url + "/ui/judges")
            expect(page.get_by_text("No judge has judged this tenant's evaluations yet.")).to_be_visible()
            expect(page.locator("body")).not_to_contain_text(name)
            context.close()
        finally:
            browser.close()
