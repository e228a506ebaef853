"""Classifier and ranker reports leave out what only text generation has (token counts, answer extraction,
decoding settings): the JSON document (uep_reporter.report.without_generation_fields) and the HTML page."""

from __future__ import annotations

import json

import pytest

from uep_reporter.report import render_html, without_generation_fields
from uep_reporter.report_model import ExtractionStats, Report

from .test_report_render import make_report

FP = {
    "model.name": "m",
    "benchmark.slug": "b",
    "prompt.template_sha256": "t",
    "decoding.max_tokens": 256,
    "decoding.temperature": 0.0,
    "decoding.stop": [],
    "scorer.metric": "label_match",
}


def _report(kind: str) -> Report:
    base = make_report()
    summary = base.summary.model_copy(
        update={
            "extraction": ExtractionStats(items_extracting=3, failures=1, rate=base.summary.accuracy, by_kind={"no_number": 1})
        }
    )
    summary, fp = without_generation_fields(kind, summary, dict(FP))
    evaluation = base.evaluation.model_copy(update={"model": base.evaluation.model.model_copy(update={"kind": kind})})
    return Report.model_validate(base.model_dump() | {"summary": summary, "fingerprint": fp, "evaluation": evaluation})


@pytest.mark.parametrize("kind", ["classification", "ranking"])
def test_a_classifier_or_ranker_report_has_no_generation_fields(kind):
    report = _report(kind)
    doc = json.loads(report.model_dump_json())
    assert doc["summary"]["tokens"] is None and doc["summary"]["extraction"] is None
    assert doc["evaluation"]["model"]["kind"] == kind
    assert sorted(doc["fingerprint"]) == ["benchmark.slug", "model.name", "prompt.template_sha256", "scorer.metric"]
    page = render_html(report)
    assert ">Tokens<" not in page and "Extraction failures" not in page and "Answer extraction" not in page
    assert "decoding.max_tokens" not in page
    assert ">Latency p50 / p90 / p99<" in page  # what every kind has stays


def test_a_generation_report_keeps_them():
    report = _report("generation")
    doc = json.loads(report.model_dump_json())
    assert doc["summary"]["tokens"]["total"] == 39 and doc["summary"]["extraction"]["failures"] == 1
    assert doc["fingerprint"] == FP
    page = render_html(report)
    assert ">Tokens<" in page and "Extraction failures" in page and "Answer extraction" in page
    assert "decoding.max_tokens" in page
