"""Reports, baselines and comparisons end to end on the real stack (oracle model: answers item i correctly
iff i % 3 != 2, so every expected count below is known in advance)."""

import io
import json
import re
import time
import uuid
from pathlib import Path

import pypdf
from sqlalchemy import text

from .helpers import submit, wait_done

ROOT = Path(__file__).resolve().parents[2]


def _wait_report(gateway, evaluation_id: str, report_id: str | None = None, timeout_s: float = 180) -> dict:
    """Poll the evaluation's reports until one (or ``report_id``) is ready; returns its view."""
    deadline = time.monotonic() + timeout_s
    rows: list = []
    while time.monotonic() < deadline:
        rows = gateway.get(f"/v1/evaluations/{evaluation_id}/reports").json()
        for row in rows:
            if (report_id is None or row["id"] == report_id) and row["status"] in ("ready", "failed"):
                assert row["status"] == "ready", row
                return row
        time.sleep(0.5)
    raise AssertionError(f"no ready report of {evaluation_id} after {timeout_s} s: {rows}")


def test_report_comparison_and_pin(gateway, db):
    # Baseline run A, then rigged so the comparison has known transitions: ordinal 0 (oracle right) is
    # stored wrong, ordinal 2 (oracle wrong) stored right.
    a = submit(gateway, benchmark="mmlu", model="uep-oracle", sample_limit=12)
    assert wait_done(gateway, a)["status"] == "completed"
    with db.begin() as c:
        c.execute(
            text(
                "UPDATE sample_results r SET is_correct = NOT r.is_correct FROM samples s "
                "WHERE s.id = r.sample_id AND r.evaluation_id = :e AND s.ordinal IN (0, 2)"
            ),
            {"e": a},
        )
    # Run B differs from A in the prompt (1 few-shot demonstration): the fingerprint diff must say so.
    b = submit(gateway, benchmark="mmlu", model="uep-oracle", sample_limit=12, fewshot_k=1)
    done = wait_done(gateway, b)
    assert done["status"] == "completed" and done["summary"]["correct"] == 8  # 12 items, 4 with i % 3 == 2

    # Comparison with the default baseline (the last completed run of the same model and benchmark: A).
    r = gateway.get(f"/v1/evaluations/{b}/compare")
    assert r.status_code == 200, r.text
    cmp = r.json()
    assert cmp["baseline_evaluation_id"] == a and cmp["baseline_reason"] == "previous"
    assert cmp["n_paired"] == 12 and cmp["paired_by"] == "sample"
    # A: right on {1,3,4,6,7,9,10} ∪ {2}; B: right on {0,1,3,4,6,7,9,10}
    assert cmp["table"] == {"both_correct": 7, "baseline_only_correct": 1, "current_only_correct": 1, "both_wrong": 3}
    assert cmp["mcnemar"]["b"] == 1 and cmp["mcnemar"]["c"] == 1
    assert cmp["mcnemar"]["p_value"] == 1.0 and not cmp["mcnemar"]["significant"]  # binomtest(1, 2, 0.5) = 1
    assert [(t["kind"], t["ordinal"]) for t in cmp["transitions"]] == [("regression", 2), ("improvement", 0)]
    assert cmp["transition_counts"]["still_passing"] == 7 and cmp["transition_counts"]["still_failing"] == 3
    assert cmp["accuracy"]["difference"] == 0.0
    diff = cmp["fingerprint_diff"]
    assert [c["field"] for c in diff["changes"]] == ["prompt.fewshot_k"]
    assert not diff["only_model_changed"] and "prompt.fewshot_k" in diff["warning"]

    # The completion report of B (written by the reporter on EvaluationCompleted) compares with A.
    rep = _wait_report(gateway, b)
    assert rep["trigger"] == "completed" and rep["baseline_evaluation_id"] == a
    assert rep["formats"] == ["html", "json", "pdf"], rep
    html = gateway.get(f"/v1/evaluations/{b}/report.html")
    assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
    page = html.text
    radar = re.search(r'id="radar-chart">\s*<svg[^>]*aria-label="Capability profile"', page)
    trend = re.search(r'id="trend-chart">\s*<svg[^>]*aria-label="uep-oracle on mmlu: accuracy over runs"', page)
    assert radar and trend, "radar and trend charts must be inline SVGs"
    assert 'id="fingerprint-warning"' in page and "prompt.fewshot_k" in page
    # self-contained: nothing is loaded from anywhere
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', page) and "url(http" not in page and "@import" not in page
    assert page.count('<details class="sample"') == 4  # the 4 wrong items of B, in the failure browser

    body = gateway.get(f"/v1/evaluations/{b}/report.json").json()
    from uep_reporter.report_model import Report, json_schema

    Report.model_validate(body)  # the published schema is generated from these models (tests/reports checks the file)
    assert body["schema_version"] == json.loads((ROOT / "docs" / "report.schema.json").read_text())["version"]
    assert body["summary"]["accuracy"]["value"] == 8 / 12 and "Wilson" in body["summary"]["accuracy"]["method"]
    assert body["comparison"]["comparison"]["mcnemar"]["p_value"] == 1.0
    trend = body["trend"]  # every completed run of uep-oracle on mmlu, by time: A, later this run
    assert trend[-1]["current"] and trend[-1]["evaluation_id"] == b and a in [p["evaluation_id"] for p in trend[:-1]]
    assert body["categories"]["source"] == "input.subject" and body["categories"]["rows"][0]["name"] == "abstract_algebra"
    assert json_schema()["version"] == body["schema_version"]

    pdf = gateway.get(f"/v1/evaluations/{b}/report.pdf")
    assert pdf.status_code == 200 and pdf.headers["content-type"] == "application/pdf"
    assert len(pypdf.PdfReader(io.BytesIO(pdf.content)).pages) >= 2

    with db.connect() as c:
        refs = c.execute(text("SELECT kind FROM artifact_refs WHERE evaluation_id = :e ORDER BY kind"), {"e": b}).scalars().all()
        ready = (
            c.execute(
                text("SELECT payload FROM outbox WHERE event_type = 'ReportReady' AND payload->>'evaluation_id' = :e"), {"e": b}
            )
            .scalars()
            .all()
        )
    assert refs == ["report_html", "report_json", "report_pdf"]
    assert len(ready) == 1 and ready[0]["report_id"] == rep["id"] and ready[0]["formats"] == ["html", "json", "pdf"]

    # Pin A... then B's default baseline is A for the reason "pinned"; pinning B unpins A.
    assert gateway.post(f"/v1/evaluations/{a}/pin").json()["pinned"] is True
    assert gateway.get(f"/v1/evaluations/{b}/compare").json()["baseline_reason"] == "pinned"
    pinned_b = gateway.post(f"/v1/evaluations/{b}/pin").json()
    assert pinned_b["unpinned"] == [a]
    assert gateway.get(f"/v1/evaluations/{a}/compare").json()["baseline_evaluation_id"] == b

    # A report on request, against an explicit baseline.
    r = gateway.post(f"/v1/evaluations/{a}/reports", json={"baseline": b})
    assert r.status_code == 202 and r.json()["status"] == "pending"
    rep2 = _wait_report(gateway, a, r.json()["id"])
    assert rep2["trigger"] == "request" and rep2["baseline_evaluation_id"] == b


def test_report_and_compare_errors(gateway):
    unknown = uuid.uuid4()
    r = gateway.get(f"/v1/evaluations/{unknown}/report.html")
    assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["path", "evaluation_id"]
    r = gateway.post(f"/v1/evaluations/{unknown}/pin")
    assert r.status_code == 404 and r.json()["detail"][0]["type"] == "unknown_evaluation"
    e = submit(gateway, benchmark="gsm8k", model="uep-oracle", sample_limit=3)
    wait_done(gateway, e)
    r = gateway.get(f"/v1/evaluations/{e}/compare", params={"baseline": str(unknown)})
    assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["query", "baseline"]
    r = gateway.get(f"/v1/evaluations/{e}/compare", params={"baseline": e})
    assert r.status_code == 422 and r.json()["detail"][0]["type"] == "same_evaluation"
    r = gateway.post(f"/v1/evaluations/{e}/reports", json={"baseline": str(unknown)})
    assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["body", "baseline"]
