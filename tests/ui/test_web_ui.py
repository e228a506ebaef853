"""The web UI (``/ui/``, served by the gateway) in headless Chromium (Debian's chromium driven by Playwright;
no browser is downloaded), on the real stack.

A user signs in through the form, creates an evaluation from the create form (``uep-oracle`` on gsm8k, 6
items), watches it finish, opens its report, filters the item browser (wrong only: the oracle answers an
item wrong exactly when its ordinal ≡ 2 (mod 3), so items 2 and 5 of 0..5), compares it with an earlier
identical run (no item changes), downloads the items as CSV, views a leaderboard and the radar, uploads a
benchmark with a row error (shown next to the file field) and then a valid one, uploads a judged benchmark
through the judge editor (a bad scale and a bad template shown next to their parts), and switches tenant. A
viewer sees no create or action controls, an annotator only the annotation queue, and tenant B's user
never sees tenant A's evaluations. Screenshots of every page go to ``UEP_UI_SCREENSHOTS`` (default: the
test's tmp dir) at 1280 px, and one at 390 px.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from sqlalchemy import text

from integration.helpers import submit, wait_done
from integration.session_helpers import signed_in
from uep_common.admin import create_tenant
from uep_common.runtime.passwords import hash_password

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WIDE = {"width": 1280, "height": 900}
NARROW = {"width": 390, "height": 844}
WRONG = [2, 5]  # ordinals in 0..5 with ordinal % 3 == 2: where uep-oracle answers wrong (README)

pytestmark = pytest.mark.skipif(
    not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM), reason="needs Debian's chromium (make chromium)"
)


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    where = Path(os.environ.get("UEP_UI_SCREENSHOTS") or tmp_path_factory.mktemp("ui-shots"))
    where.mkdir(parents=True, exist_ok=True)
    return where


@pytest.fixture(scope="module")
def people(stack, db) -> dict:
    """A password user (admin of ``default`` and viewer of tenant B), tenant B and its builder's session."""
    suffix = uuid.uuid4().hex[:6]
    tenant_b = f"ui-b-{suffix}"
    create_tenant(stack.database_url, tenant_b)
    username, password = f"ui-admin-{suffix}", f"pw-{uuid.uuid4().hex}"
    user_id = uuid.uuid4()
    with db.begin() as c:
        c.execute(
            text("INSERT INTO users (id, username, display_name, password_hash, site_admin) VALUES (:i, :u, :u, :p, false)"),
            {"i": user_id, "u": username, "p": hash_password(password)},
        )
    for slug, role in (("default", "admin"), (tenant_b, "viewer")):  # one transaction each: default is the oldest
        with db.begin() as c:
            c.execute(
                text("INSERT INTO memberships (id, user_id, tenant_id, role) SELECT :i, :u, id, :r FROM tenants WHERE slug = :t"),
                {"i": uuid.uuid4(), "u": user_id, "r": role, "t": slug},
            )
    return {"username": username, "password": password, "tenant_b": tenant_b, "b_builder": signed_in(db, tenant_b, "builder")}


@pytest.fixture(scope="module")
def baseline(gateway) -> str:
    """An earlier identical run (the comparison's baseline), finished before the UI creates its own."""
    evaluation_id = submit(gateway, benchmark="gsm8k", model="uep-oracle", sample_limit=6)
    assert wait_done(gateway, evaluation_id)["status"] == "completed"
    return evaluation_id


def _browser(p):
    from playwright.sync_api import expect

    expect.set_options(timeout=30_000)  # a loaded 2-core machine answers slowly; nothing here is timed
    return p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)


def _with_session(browser, stack, user: dict, viewport=WIDE):
    context = browser.new_context(viewport=viewport)
    host = urlsplit(stack.gateway_url).hostname
    context.add_cookies(
        [
            {"name": "uep_session", "value": user["cookies"]["uep_session"], "domain": host, "path": "/", "httpOnly": True},
            {"name": "uep_csrf", "value": user["csrf"], "domain": host, "path": "/"},
        ]
    )
    return context


def _shot(page, shots: Path, name: str) -> None:
    page.wait_for_timeout(150)  # let the last paint land
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)


def test_sign_in_create_watch_report_items_compare_boards_upload(gateway, stack, people, baseline, shots):
    from playwright.sync_api import expect, sync_playwright

    base = stack.gateway_url
    with sync_playwright() as p:
        browser = _browser(p)
        try:
            context = browser.new_context(viewport=WIDE, accept_downloads=True)
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))

            # sign in through the form
            page.goto(f"{base}/")
            expect(page.locator("#login-form")).to_be_visible()
            page.get_by_label("Username").fill(people["username"])
            page.get_by_label("Password").fill("not the password")
            page.get_by_role("button", name="Sign in").click()
            expect(page.locator("#login-form [role=alert]")).to_contain_text("401")
            page.get_by_label("Password").fill(people["password"])
            _shot(page, shots, "01-login")
            page.get_by_role("button", name="Sign in").click()
            expect(page).to_have_url(re.compile(r"/ui/evaluations$"))
            expect(page.locator(f"#evaluation-list tr[data-id='{baseline}']")).to_be_visible()
            expect(page.locator("#who-name")).to_have_text(people["username"])
            _shot(page, shots, "02-evaluations")

            # create from the form: the estimate and the budget check come before the submit
            page.locator("#new-evaluation").click()
            # the list's own "Benchmark" filter is on the page until the form has loaded: wait for the form
            expect(page.locator("#create-submit")).to_be_visible()
            page.get_by_label("Benchmark").select_option("gsm8k")
            expect(page.get_by_label("Benchmark")).to_have_value("gsm8k")
            page.locator("input[data-model='uep-oracle']").check()
            page.get_by_label("Sample limit").fill("6")
            expect(page.locator("#estimate-total")).to_contain_text("Estimated cost")
            expect(page.locator("#estimate")).to_contain_text("for 6 items in 1 evaluation")
            expect(page.locator("#budget-check")).to_be_visible()
            _shot(page, shots, "03-create")
            page.locator("#create-submit").click()
            expect(page).to_have_url(re.compile(r"/ui/evaluations/[0-9a-f-]{36}"))
            evaluation_id = page.url.split("/ui/evaluations/")[1].split("?")[0]

            # watch it finish: 6 of 6, accuracy 4/6
            expect(page.locator("#progress")).to_have_attribute("data-status", "completed", timeout=90_000)
            expect(page.locator("#items-done")).to_have_text("6 / 6 items")
            expect(page.locator("#accuracy")).to_contain_text("66.7 %")
            expect(page.locator("#act-pin")).to_be_visible()

            # the report (written on completion) in its frame
            frame = page.frame_locator("#report-frame")
            expect(frame.locator("body")).to_contain_text("gsm8k", timeout=60_000)
            expect(frame.locator("body")).to_contain_text("uep-oracle")
            _shot(page, shots, "04-evaluation-report")

            # the item browser: wrong only → items 2 and 5
            page.locator("#tab-items").click()
            expect(page.locator("#item-count")).to_contain_text("6 of 6 loaded items match")
            page.get_by_label("Show").select_option("wrong")
            expect(page.locator("#item-count")).to_contain_text("2 shown")
            ordinals = [
                int(x) for x in page.locator("#item-list details.item").evaluate_all("els => els.map(e => e.dataset.ordinal)")
            ]
            assert ordinals == WRONG
            page.locator("#item-list details.item").first.locator("summary").click()
            first = page.locator("#item-list details.item").first
            expect(first).to_contain_text("Model output")
            expect(first.locator("pre").first).not_to_be_empty()  # the rendered prompt
            _shot(page, shots, "05-items-wrong-only")

            # compare with the earlier identical run, picked from the list
            page.locator("#tab-compare").click()
            page.get_by_label("Baseline").select_option(baseline)
            page.locator("#compare-run").click()
            expect(page.locator("#compare-bc")).to_have_text("0 / 0")
            expect(page.locator("#compare-diff")).to_contain_text("+0.0 pts")
            expect(page.locator("#compare-result")).to_contain_text("6 of 6 items pair")
            _shot(page, shots, "06-compare")

            # per-item CSV built in the browser
            page.locator("#tab-downloads").click()
            with page.expect_download() as got:
                page.locator("#dl-csv").click()
            rows = list(csv.DictReader(io.StringIO(Path(got.value.path()).read_text())))
            assert [int(r["sample_ordinal"]) for r in rows] == [0, 1, 2, 3, 4, 5]
            assert [r["is_correct"] for r in rows] == ["true", "true", "false", "true", "true", "false"]

            # leaderboards: every board, one board, the radar
            page.locator("#nav a", has_text="Leaderboards").click()
            expect(page.get_by_role("link", name="gsm8k", exact=True).first).to_be_visible()
            page.locator("#radar-models input[value='uep-oracle']").check()
            page.locator("#radar-run").click()
            expect(page.locator("#radar-img")).to_be_visible()
            page.wait_for_function("() => document.querySelector('#radar-img').naturalWidth > 0")
            _shot(page, shots, "07-leaderboards-radar")
            page.get_by_role("link", name="gsm8k", exact=True).first.click()
            expect(page.locator("#board-table tr[data-model='uep-oracle']")).to_have_count(1)
            _shot(page, shots, "08-leaderboard-gsm8k")

            # upload: a row without a reference is refused, shown next to the file field; then a valid one
            page.locator("#nav a", has_text="Benchmarks").click()
            expect(page.locator("#benchmark-list")).to_contain_text("gsm8k")
            _shot(page, shots, "09-benchmarks")
            page.locator("#upload-benchmark").click()
            slug = f"ui-qa-{uuid.uuid4().hex[:6]}"
            page.get_by_label("Slug").fill(slug)
            page.get_by_label("Name", exact=True).fill("UI <b>QA</b> <img src=x onerror=alert(1)>")
            page.get_by_label("Prompt template (Jinja2 over each row's input fields)").fill("Q: {{ question }}")
            page.get_by_label("Metric", exact=True).select_option("contains")
            bad = b'{"id": "q1", "question": "Capital of France?", "answer": "Paris"}\n{"id": "q2", "question": "2 + 2?"}\n'
            page.get_by_label("Data file (JSONL, CSV or Parquet)").set_input_files(
                {"name": "qa.jsonl", "mimeType": "application/json", "buffer": bad}
            )
            page.locator("#upload-submit").click()
            file_error = page.locator(".field[data-field='file'] .field-error")
            expect(file_error).to_contain_text("line 2")
            _shot(page, shots, "10-upload-error")
            good = bad.replace(b'"2 + 2?"}', b'"2 + 2?", "answer": "4"}')
            page.get_by_label("Data file (JSONL, CSV or Parquet)").set_input_files(
                {"name": "qa.jsonl", "mimeType": "application/json", "buffer": good}
            )
            page.locator("#upload-submit").click()
            expect(page.locator("#upload-ok")).to_contain_text(f"Uploaded {slug}")
            expect(file_error).to_be_empty()
            page.locator("#upload-ok a").click()
            expect(page.locator("#preview pre.prompt").first).to_have_text("Q: Capital of France?")
            # the name is shown as text, never parsed as markup
            expect(page.locator("h1")).to_have_text("UI <b>QA</b> <img src=x onerror=alert(1)>")
            assert page.locator("main img").count() == 0
            _shot(page, shots, "11-benchmark-preview")

            # a judged benchmark through the judge editor: a bad scale is caught in the page (nothing sent), a
            # template that does not compile by the API (422 at spec.judge.template_text), both next to their part
            page.goto(f"{base}/ui/benchmarks/upload")
            judged = f"ui-judged-{uuid.uuid4().hex[:6]}"
            expect(page.locator("#judge-editor")).to_be_hidden()
            page.get_by_label("Slug").fill(judged)
            page.get_by_label("Name", exact=True).fill("UI judged QA")
            page.get_by_label("Prompt template (Jinja2 over each row's input fields)").fill("Q: {{ question }}")
            page.get_by_label("Evaluation type").select_option("llm_judge")
            expect(page.locator("#judge-models input[data-judge='smollm2-135m-instruct']")).to_be_checked()
            page.locator("#judge-add-dimension").click()
            row = page.locator("#judge-dimensions .dimension").nth(1)
            row.get_by_label("Dimension name").fill("fluency")
            row.get_by_label("from", exact=True).fill("5")
            row.get_by_label("to", exact=True).fill("1")
            page.get_by_label("Data file (JSONL, CSV or Parquet)").set_input_files(
                {"name": "qa.jsonl", "mimeType": "application/json", "buffer": good}
            )
            posts: list[int] = []
            page.on(
                "response",
                lambda r: posts.append(r.status) if r.request.method == "POST" and r.url.endswith("/v1/benchmarks") else None,
            )
            page.locator("#upload-submit").click()
            scale_error = page.locator(".field[data-field='spec.judge.dimensions.1'] .field-error")
            expect(scale_error).to_contain_text("min (5) must be below max (1)")
            assert posts == []
            _shot(page, shots, "18-upload-judge-editor")
            row.get_by_label("from", exact=True).fill("1")
            row.get_by_label("to", exact=True).fill("5")
            row.get_by_label("integer", exact=True).check()
            expect(scale_error).to_be_empty()
            page.get_by_label("Judge template (Jinja2, optional)").fill("{{ question ")
            page.locator("#upload-submit").click()
            expect(page.locator(".field[data-field='spec.judge.template_text'] .field-error")).to_contain_text(
                "judge template refused"
            )
            page.get_by_label("Judge template (Jinja2, optional)").fill("")
            with page.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/v1/benchmarks")) as sent:
                page.locator("#upload-submit").click()
            assert sent.value.status == 201
            expect(page.locator("#upload-ok")).to_contain_text(f"Uploaded {judged}")
            assert posts == [422, 201]
            spec = json.loads(page.locator("#spec-json").input_value())
            assert spec["evaluation_type"] == "llm_judge"
            assert spec["judge"]["judges"] == ["smollm2-135m-instruct"]
            assert spec["judge"]["dimensions"][1] == {"name": "fluency", "description": "", "min": 1, "max": 5, "integer": True}

            page.locator("#nav a", has_text="Models").click()
            expect(page.locator("main table")).to_contain_text("uep-oracle")
            _shot(page, shots, "12-models")
            page.locator("#nav a", has_text="Annotation").click()
            expect(page.locator("main h1")).to_have_text("Annotation")
            _shot(page, shots, "13-annotation")
            page.locator("#nav a", has_text="Admin").click()
            expect(page.locator("#admin-members table")).to_contain_text(people["username"])
            expect(page.locator("#admin-spend svg.chart")).to_be_visible()
            expect(page.locator("#admin-audit table")).to_contain_text("createEvaluation")
            _shot(page, shots, "14-admin")

            # a narrow window: the same list, the nav on its own row
            page.set_viewport_size(NARROW)
            page.goto(f"{base}/ui/evaluations/{evaluation_id}")
            expect(page.locator("#progress")).to_have_attribute("data-status", "completed")
            expect(page.frame_locator("#report-frame").locator("body")).to_contain_text("gsm8k")
            _shot(page, shots, "15-evaluation-narrow")
            page.set_viewport_size(WIDE)

            # tenant switcher: in tenant B (a viewer there) none of A's evaluations
            page.goto(f"{base}/ui/evaluations")
            page.locator("#tenant-picker").select_option(people["tenant_b"])
            expect(page.locator(".who .role")).to_have_text("viewer")
            expect(page.locator("#evaluation-list")).to_contain_text("No evaluations yet.")
            expect(page.locator("#new-evaluation")).to_have_count(0)
            page.locator("#tenant-picker").select_option("default")
            expect(page.locator(f"#evaluation-list tr[data-id='{evaluation_id}']")).to_be_visible()

            page.locator("#logout").click()
            expect(page.locator("#login-form")).to_be_visible()
            assert errors == []
        finally:
            browser.close()

    made = gateway.get(f"/v1/evaluations/{evaluation_id}").json()
    assert (made["status"], made["benchmark"]["slug"], made["model"]["name"], made["sample_limit"]) == (
        "completed",
        "gsm8k",
        "uep-oracle",
        6,
    )
    assert len(list(shots.glob("*.png"))) >= 15
    listed = {b["slug"]: b for b in gateway.get("/v1/benchmarks").json()}
    assert listed[judged]["evaluation_type"] == "llm_judge"


def test_viewer_annotator_and_other_tenant(gateway, stack, db, people, baseline, shots):
    from playwright.sync_api import expect, sync_playwright

    base = stack.gateway_url
    viewer = signed_in(db, "default", "viewer")
    annotator = signed_in(db, "default", "annotator")
    with sync_playwright() as p:
        browser = _browser(p)
        try:
            # a viewer reads everything and sees no create, upload or action control
            page = _with_session(browser, stack, viewer).new_page()
            page.goto(f"{base}/ui/evaluations")
            expect(page.locator(f"#evaluation-list tr[data-id='{baseline}']")).to_be_visible()
            expect(page.locator("#new-evaluation")).to_have_count(0)
            page.goto(f"{base}/ui/evaluations/{baseline}")
            expect(page.locator("#progress")).to_have_attribute("data-status", "completed")
            expect(page.locator(".page-head button")).to_have_count(0)
            _shot(page, shots, "16-viewer-evaluation")
            page.goto(f"{base}/ui/benchmarks")
            expect(page.locator("#benchmark-list")).to_contain_text("gsm8k")
            expect(page.locator("#upload-benchmark")).to_have_count(0)
            page.goto(f"{base}/ui/evaluations/new")
            expect(page.locator("main .note")).to_contain_text("may not create")
            expect(page.locator("#create-form")).to_have_count(0)
            expect(page.locator("#nav a", has_text="Admin")).to_have_count(0)

            # an annotator: only the annotation queue
            page = _with_session(browser, stack, annotator).new_page()
            page.goto(f"{base}/ui/evaluations")
            expect(page).to_have_url(re.compile(r"/ui/annotation$"))
            assert page.locator("#nav a").all_inner_texts() == ["Annotation"]

            # tenant B's builder: none of A's evaluations, and A's evaluation by id is unknown
            page = _with_session(browser, stack, people["b_builder"]).new_page()
            page.goto(f"{base}/ui/evaluations")
            expect(page.locator("#evaluation-list")).to_contain_text("No evaluations yet.")
            expect(page.locator("#new-evaluation")).to_be_visible()
            assert baseline not in page.content()
            page.goto(f"{base}/ui/evaluations/{baseline}")
            expect(page.locator("main [role=alert]")).to_contain_text("unknown evaluation")
            _shot(page, shots, "17-other-tenant")
        finally:
            browser.close()
