"""Uploaded references are checked against the reference schema of the benchmark's metric (the JSON Schema the
scorer publishes in the metric catalogue), naming the line and the field (gateway, no server)."""

import pytest

from uep_gateway.uploads import UploadInvalid, UploadLimits, check_upload
from uep_scorer.catalog import catalogue_rows

SCHEMAS = {r["name"]: r["reference_schema"] for r in catalogue_rows()}
TEMPLATE = "Review: {{ text }}\nSentiment:"


def _problems(data: bytes, fmt: str, metric: str):
    with pytest.raises(UploadInvalid) as info:
        check_upload(data, fmt, TEMPLATE, UploadLimits(), None, {metric: SCHEMAS[metric]})
    return [(p.loc, p.msg, p.type) for p in info.value.problems]


def test_a_label_match_upload_with_an_answer_column_is_refused_naming_the_line_and_the_field():
    data = b"id,text,answer\n1,great film,positive\n2,dull,negative\n"
    problems = _problems(data, "csv", "label_match")
    assert [p[0] for p in problems] == [
        ["body", "file", "line 2", "reference", "label"],
        ["body", "file", "line 3", "reference", "label"],
    ]
    assert problems[0][1].startswith("line 2: field 'reference.label' is required: metric 'label_match' reads")
    assert {p[2] for p in problems} == {"bad_reference"}


def test_rows_that_fit_the_schema_are_accepted():
    data = b"id,text,reference.label\n1,great film,positive\n2,dull,negative\n"
    rows, _ = check_upload(data, "csv", TEMPLATE, UploadLimits(), None, {"label_match": SCHEMAS["label_match"]})
    assert [r.reference for r in rows] == [{"label": "positive"}, {"label": "negative"}]


def test_ranking_and_text_references_are_checked_too():
    jsonl = b'{"id": "q1", "input": {"text": "q"}, "reference": {"relevance": {"d1": -2}}}\n'
    ((loc, msg, _),) = _problems(jsonl, "jsonl", "ndcg")
    assert loc == ["body", "file", "line 1", "reference", "relevance", "d1"] and "minimum" in msg
    missing = b'{"id": "q1", "input": {"text": "q"}, "reference": {"docs": ["d1"]}}\n'
    ((loc, msg, _),) = _problems(missing, "jsonl", "ndcg")
    assert loc == ["body", "file", "line 1", "reference", "relevant"] and "is required (or 'relevance')" in msg
    text = b'{"id": "q1", "input": {"text": "q"}, "reference": {"label": "x"}}\n'
    ((loc, _, _),) = _problems(text, "jsonl", "exact_match")
    assert loc == ["body", "file", "line 1", "reference", "answer"]


def test_a_gold_label_outside_the_benchmarks_class_names_is_refused():
    from uep_gateway.uploads import with_class_names

    schema = with_class_names(SCHEMAS["label_match"], ["negative", "positive"])
    data = b"id,text,reference.label\n1,great film,positive\n2,so-so,neutral\n"
    with pytest.raises(UploadInvalid) as info:
        check_upload(data, "csv", TEMPLATE, UploadLimits(), None, {"label_match": schema})
    [problem] = info.value.problems
    assert problem.loc == ["body", "file", "line 3", "reference", "label"]
    assert "'neutral' is not one of ['negative', 'positive']" in problem.msg
    assert with_class_names(SCHEMAS["label_match"], None) is SCHEMAS["label_match"]  # no classes: unchanged
