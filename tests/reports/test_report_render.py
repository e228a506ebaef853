"""The report page from a report document (no database): version labels, the judge's rubric and reasoning,
the deciding stages of a hybrid evaluation, an A/B arm's other arms, a code program's failure detail, and the
print rules of the PDF."""

import re
import uuid
from datetime import UTC, datetime

from uep_common.contract.judge_config import JudgeConfig
from uep_reporter.analysis import METHODS, judge_metric_keys, metric_filter, version_label
from uep_reporter.report import render_html
from uep_reporter.report_model import (
    ArmInfo,
    Breakdown,
    BreakdownRow,
    CostStats,
    Estimate,
    Experiment,
    ExtractionStats,
    FailureItem,
    Failures,
    JudgeDimension,
    JudgeSample,
    JudgeSection,
    JudgeVerdictSample,
    LatencyStats,
    Profile,
    Report,
    StageRoute,
    Stages,
    Summary,
    TokenStats,
)

T0 = datetime(2026, 3, 1, 8, 2, tzinfo=UTC)
EV, OTHER = uuid.UUID(int=1), uuid.UUID(int=2)


def _est(value: float, n: int = 3) -> Estimate:
    return Estimate(value=value, ci_low=value / 2, ci_high=min(1.0, value * 1.5), n=n, method="Wilson")


def _row(name: str, n: int, correct: int) -> BreakdownRow:
    return BreakdownRow(name=name, n=n, scored=n, correct=correct, errors=0, accuracy=_est(correct / n, n), score_mean=None)


def make_report(model_version: str = "q4_1", **sections) -> Report:
    """A complete report document of a 3-item evaluation; ``sections`` replace top-level fields."""
    fields = {
        "report_id": uuid.UUID(int=9),
        "generated_at": T0,
        "evaluation": {
            "id": EV,
            "status": "completed",
            "created_at": T0,
            "completed_at": T0,
            "error": None,
            "pinned": False,
            "repeats": 1,
            "sample_limit": 3,
            "benchmark": {
                "id": uuid.UUID(int=3),
                "slug": "bench",
                "name": "Bench",
                "version": "a" * 64,
                "category": "qa",
                "capability_dimensions": [],
                "metric": "exact_match",
            },
            "model": {"id": uuid.UUID(int=4), "name": "smollm2", "version": model_version},
        },
        "summary": Summary(
            n=3,
            scored=3,
            correct=2,
            errors=0,
            metric_name="exact_match",
            metric_versions={"exact_match": ["1"], "llm_judge_rubric": ["v1"]},
            accuracy=_est(2 / 3),
            score_mean=None,
            metric_means={},
            latency=LatencyStats(n=3, p50=10.0, p90=12.0, p99=12.0, mean=10.0, method="linear"),
            tokens=TokenStats(prompt=30, completion=9, total=39, mean_prompt_per_item=10.0, mean_completion_per_item=3.0),
            cost=CostStats(available=False, note="tokens only", by_role=[], total=None),
            extraction=ExtractionStats(items_extracting=0, failures=0, rate=None, by_kind={}),
            error_kinds=[],
        ),
        "categories": Breakdown(source=None, note="no category", rows=[]),
        "dimensions": Breakdown(source=None, note="no dimensions", rows=[]),
        "profile": Profile(source="capability_dimensions", note="", series={}),
        "trend": [],
        "comparison": None,
        "no_baseline_reason": "no baseline",
        "fingerprint": {"model.version": model_version},
        "fingerprint_diff": None,
        "failures": Failures(total=0, shown=0, items=[]),
        "methods": METHODS,
    }
    return Report(**(fields | sections))


def test_a_version_gets_a_v_only_before_a_number():
    assert [version_label(v) for v in ("q4_1", "1.2", "v1", "main", "2026-01-01")] == [
        "q4_1",
        "v1.2",
        "v1",
        "main",
        "v2026-01-01",
    ]
    page = render_html(make_report("q4_1"))
    assert "vq4_1" not in page and '<span class="sub">q4_1</span>' in page and "<title>smollm2 q4_1 on Bench" in page
    assert "llm_judge_rubric v1<" in page and "vv1" not in page and "exact_match v1<" in page
    assert '<span class="sub">v1.2</span>' in render_html(make_report("1.2"))


def test_judge_counters_are_not_summarised_but_the_rubric_is():
    cfg = JudgeConfig.model_validate({"mode": "rubric", "judges": ["uep-judge"]})
    assert judge_metric_keys(cfg) == [
        "judge_overall",
        "judge_accuracy",
        "judge_relevance",
        "judge_completeness",
        "judge_clarity",
        "judge_safety",
    ]
    keep = metric_filter(cfg)
    keys = ["judge_overall", "judge_accuracy", "judge_attempts", "judge_parse_failures", "judge_jury_size", "judge_spread",
            "judge_invalid", "judge_low_confidence", "juror_uep-judge", "multiple_choice_letter"]  # fmt: skip
    assert [k for k in keys if keep(k)] == ["judge_overall", "judge_accuracy", "multiple_choice_letter"]
    pairwise = JudgeConfig.model_validate({"mode": "pairwise", "judges": ["uep-judge"]})
    assert [k for k in ("pairwise_win", "pairwise_inconsistent") if metric_filter(pairwise)(k)] == ["pairwise_win"]
    assert metric_filter(None)("judge_attempts")  # no judge: nothing is a judge counter


def _judge() -> JudgeSection:
    verdict = JudgeVerdictSample(
        judge_model="uep-judge",
        position="-",
        valid=True,
        overall=3.0,
        scores={"accuracy": 3.0},
        winner=None,
        candidate_outcome=None,
        reasoning="The answer names Lyon, which is not the capital.",
        error=None,
    )
    return JudgeSection(
        mode="rubric",
        judges=["uep-judge"],
        items_judged=3,
        invalid=1,
        low_confidence=0,
        dimensions=[
            JudgeDimension(name="overall", description="the judge's overall score", min=0, max=10, mean=_est(5.5, 2)),
            JudgeDimension(name="accuracy", description="Is it correct?", min=0, max=10, mean=None),
        ],
        samples=[JudgeSample(ordinal=1, external_id="q1", repeat=0, arm="main", is_correct=False, score=0.3, verdicts=[verdict])],
        note=METHODS["judge"],
    )


def test_a_judged_report_shows_the_rubric_and_the_reasoning_not_the_counters():
    summary = make_report().summary.model_copy(update={"metric_means": {"judge_overall": _est(5.5, 2)}})
    page = render_html(make_report(judge=_judge(), summary=summary))
    section = page[page.index('<section id="judge">') : page.index('<section id="charts">')]
    assert "The answer names Lyon, which is not the capital." in section and "overall 3" in section
    assert '<td class="mono">overall</td>' in section and '<td class="mono">accuracy</td>' in section
    assert "1 without a valid verdict" in section
    assert "Per-item metrics" not in page  # judge_overall is in the judge's rubric table, not repeated
    assert 'id="judge"' not in render_html(make_report())


def test_a_hybrid_report_breaks_down_by_deciding_stage():
    stages = Stages(
        note=METHODS["stages"],
        rows=[_row("automatic", 2, 1), _row("judge", 1, 0)],
        routes=[StageRoute(stage="judge", reason="no_answer", count=1)],
    )
    page = render_html(make_report(stages=stages))
    table = page[page.index('<table id="stages">') : page.index("</table>", page.index('<table id="stages">'))]
    assert re.findall(r"<tr><td>(\w+)</td><td class=\"num\">(\d+)</td>", table) == [("automatic", "2"), ("judge", "1")]
    assert "to judge, no answer: 1" in page


def test_an_arms_report_offers_the_other_arms_as_baselines():
    arm = ArmInfo(
        evaluation_id=OTHER,
        arm="base",
        status="completed",
        accuracy=2 / 3,
        is_baseline=False,
        compare=f"/v1/evaluations/{EV}/compare?baseline={OTHER}",
        report=f"/v1/evaluations/{EV}/reports",
    )
    page = render_html(make_report(experiment=Experiment(experiment_id=uuid.UUID(int=7), arms=[arm])))
    assert f'<a href="/v1/evaluations/{EV}/compare?baseline={OTHER}">' in page and "<b>base</b>" in page
    assert f'{{"baseline": "{OTHER}"}}' in page


def test_a_failed_programs_assertion_and_stderr_are_in_the_failure_browser():
    failure = "AssertionError (test.py line 10: assert candidate(3.5) == 0.5)"
    stderr = 'Traceback (most recent call last):\n  File "test.py", line 10, in check\n    assert candidate(3.5) == 0.5\nAssertionError\n'
    item = FailureItem(ordinal=2, external_id="HumanEval/2", repeat=0, arm="main", category=None, input="{}", reference="{}",
                       output="    return None\n", extracted="    return None", is_correct=False, score=0.0, error=None,
                       failure=failure, stderr_tail=stderr)  # fmt: skip
    page = render_html(make_report(failures=Failures(total=1, shown=1, items=[item])))
    details = page[page.index('<details class="sample"') : page.index("</details>")]
    assert failure in details and "assert candidate(3.5) == 0.5\nAssertionError" in details


def _lowest_text(pdf: bytes) -> list[float]:
    """Per page of ``pdf``, the height (points from the bottom edge) of its lowest text."""
    import io

    import pypdf

    lows = []
    for page in pypdf.PdfReader(io.BytesIO(pdf)).pages:
        ys: list[float] = []
        page.extract_text(
            visitor_text=lambda text, cm, tm, font, size, ys=ys: ys.append(tm[5] * cm[3] + cm[5]) if text.strip() else None
        )
        lows.append(min(ys) / float(page.mediabox.height) if ys else 1.0)
    return lows


def test_no_pdf_page_but_the_last_ends_half_empty():
    import asyncio
    import os

    import pytest

    from uep_reporter.pdf import CHROMIUM_PATH, html_to_pdf
    from uep_reporter.report_model import TrendPoint

    if not os.path.exists(CHROMIUM_PATH):
        pytest.skip(f"no Chromium at {CHROMIUM_PATH} (make chromium)")
    # the shape of a plain generative report: summary, one metric mean, then the radar and trend charts (too
    # tall for what is left of page 1), the breakdowns, one failure, fingerprint and methods
    summary = make_report().summary.model_copy(update={"metric_means": {"humaneval_pass_at_1": _est(2 / 3)}})
    point = TrendPoint(evaluation_id=EV, time=T0, value=2 / 3, ci_low=0.2, ci_high=0.94, label="this run",
                       model_version="1", benchmark_version="x", scheduled=False, current=True)  # fmt: skip
    series = {"uep-oracle v1 (this run)": {"knowledge": 0.67, "reasoning": 0.5, "coding": 0.67, "math": 0.4}}
    profile = Profile(source="capability_dimensions", note=METHODS["profile"], series=series)
    item = FailureItem(ordinal=2, external_id="HumanEval/2", repeat=0, arm="main", category=None, input="{}" * 300,
                       reference="{}" * 300, output="    return None\n", extracted="return None", is_correct=False,
                       score=0.0, error=None, failure="AssertionError", stderr_tail="Traceback\n" * 20)  # fmt: skip
    report = make_report(summary=summary, trend=[point], profile=profile, failures=Failures(total=1, shown=1, items=[item]))
    pdf = asyncio.run(html_to_pdf(render_html(report)))
    lows = _lowest_text(pdf)
    assert len(lows) >= 2
    assert all(low < 0.3 for low in lows[:-1]), lows  # every full page used to at least 70 % of its height
    import io

    import pypdf

    text = "".join(page.extract_text() for page in pypdf.PdfReader(io.BytesIO(pdf)).pages)
    assert "stderr (last 2 KiB)" in text and "Traceback" in text  # the collapsed failure is printed open (pdf.py)
