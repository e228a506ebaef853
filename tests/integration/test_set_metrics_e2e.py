"""Set-level metrics end to end: an LLM evaluated as a classifier (the ``uep-oracle`` model on an uploaded
``label_match`` benchmark of MMLU questions, class names A–D) stores its set-level metrics in the summary, the
predictions in ``sample_results.prediction``, and its report has the classification section; an upload whose
references the metric cannot read is refused with a 422 naming the line and the field.

Expected values: the oracle answers "The answer is (X)." with the right letter iff the item's MMLU ordinal
% 3 != 2, else the next letter (deploy/model-server/src/uep_model_server/oracle.py), so the predicted labels are
known in advance; precision/recall/F1 and the confusion matrix are scikit-learn's on those labels, computed here.
"""

import json
import time
import uuid

import pytest
from sklearn.metrics import accuracy_score, confusion_matrix, precision_recall_fscore_support
from sqlalchemy import text

from uep_common.builtin.datasets import load_mmlu

from .helpers import db_rows, submit, wait_done

LETTERS = ["A", "B", "C", "D"]
TEMPLATE = (
    "The following is a multiple choice question. Reply with the letter of the correct option.\n\n{{ question }}\n"
    "{% for choice in choices %}{{ 'ABCD'[loop.index0] }}. {{ choice }}\n{% endfor %}Answer:"
)
N = 12


def _spec(slug: str) -> str:
    return json.dumps(
        {
            "slug": slug,
            "name": f"MMLU as classification {slug}",
            "category": "custom",
            "capability_dimensions": ["knowledge"],
            "prompt": {"template": TEMPLATE, "max_tokens": 16},
            "metric": {"name": "label_match", "params": {"labels": LETTERS}},
        }
    )


def _upload(gateway, slug: str, rows: list[dict], filename: str = "d.jsonl"):
    content = "\n".join(json.dumps(r) for r in rows).encode()
    return gateway.post("/v1/benchmarks", data={"spec": _spec(slug)}, files={"file": (filename, content)})


def _wait_report(gateway, evaluation_id: str, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rows = gateway.get(f"/v1/evaluations/{evaluation_id}/reports").json()
        if any(r["status"] == "ready" for r in rows):
            return
        assert not any(r["status"] == "failed" for r in rows), rows
        time.sleep(0.5)
    raise AssertionError(f"no report of {evaluation_id}")


@pytest.fixture(scope="module")
def mmlu_items():
    return load_mmlu()[:N]


def test_an_upload_the_metric_cannot_read_is_refused_naming_the_line_and_field(gateway, db, mmlu_items):
    slug = f"cls-bad-{uuid.uuid4().hex[:8]}"
    rows = [
        {"id": f"q{i}", "input": it.input, "reference": {"answer": it.reference["answer"]}} for i, it in enumerate(mmlu_items[:2])
    ]
    r = _upload(gateway, slug, rows)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert [d["loc"] for d in detail] == [["body", "file", f"line {i}", "reference", "label"] for i in (1, 2)]
    assert "'reference.label' is required" in detail[0]["msg"] and detail[0]["type"] == "bad_reference"
    with db.connect() as c:
        assert c.execute(text("SELECT count(*) FROM benchmarks WHERE slug = :s"), {"s": slug}).scalar() == 0
    metrics = {m["name"]: m for m in gateway.get("/v1/metrics").json()}
    assert metrics["label_match"]["reference_schema"]["required"] == ["label"]
    assert "relevant" in metrics["ndcg"]["reference_schema"]["properties"]


def test_an_llm_as_classifier_stores_set_level_metrics_and_its_report_shows_them(gateway, db, mmlu_items):
    slug = f"cls-{uuid.uuid4().hex[:8]}"
    rows = [{"id": f"q{i}", "input": it.input, "reference": {"label": it.reference["answer"]}} for i, it in enumerate(mmlu_items)]
    r = _upload(gateway, slug, rows)
    assert r.status_code == 201, r.text
    evaluation_id = submit(gateway, benchmark=slug, model="uep-oracle")
    final = wait_done(gateway, evaluation_id, timeout_s=180)
    assert final["status"] == "completed", final

    gold = [it.reference["answer"] for it in mmlu_items]
    predicted = [
        g if it.ordinal % 3 != 2 else LETTERS[(LETTERS.index(g) + 1) % 4] for g, it in zip(gold, mmlu_items, strict=True)
    ]
    sm = final["summary"]["set_metrics"]
    assert sm["kind"] == "classification" and sm["n"] == N and sm["excluded"] == 0
    head = sm["headline"]
    assert head["accuracy"]["value"] == pytest.approx(accuracy_score(gold, predicted)) == final["summary"]["accuracy"]
    for average in ("macro", "micro", "weighted"):
        p, rec, f, _ = precision_recall_fscore_support(
            gold, predicted, labels=LETTERS, average=average, zero_division=float("nan")
        )
        assert head[f"f1_{average}"]["value"] == pytest.approx(f), average
        assert head[f"precision_{average}"]["value"] == pytest.approx(p) and head[f"recall_{average}"]["value"] == pytest.approx(
            rec
        )
    assert head["f1_macro"]["ci_low"] <= head["f1_macro"]["value"] <= head["f1_macro"]["ci_high"]
    assert "roc_auc" not in head  # an LLM gives no probabilities
    cm = sm["classification"]["confusion_matrix"]
    assert cm["labels"] == LETTERS and cm["predicted"] == [*LETTERS, "(no answer)"]
    assert [row[:4] for row in cm["matrix"]] == confusion_matrix(gold, predicted, labels=LETTERS).tolist()

    with db.connect() as c:
        stored = c.execute(
            text(
                "SELECT s.ordinal, r.prediction FROM sample_results r JOIN samples s ON s.id = r.sample_id WHERE r.evaluation_id = :e ORDER BY s.ordinal"
            ),
            {"e": evaluation_id},
        ).all()
    assert [p for _, p in stored] == [{"label": x} for x in predicted]

    _wait_report(gateway, evaluation_id)
    page = gateway.get(f"/v1/evaluations/{evaluation_id}/report.html").text
    assert '<section id="classification">' in page and 'id="confusion-chart"' in page and 'id="per-class"' in page
    assert "No ROC, precision-recall or calibration: the model gave no probabilities." in page
    body = gateway.get(f"/v1/evaluations/{evaluation_id}/report.json").json()
    assert body["classification"]["headline"]["f1_macro"]["value"] == pytest.approx(head["f1_macro"]["value"])
    assert [row["support"] for row in body["classification"]["per_class"]] == [gold.count(x) for x in LETTERS]


def _board(gateway, slug: str, score_type: str | None = None, timeout_s: float = 60) -> dict:
    """The board of ``slug`` once the reporter recorded an evaluation on it."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = gateway.get(f"/v1/leaderboards/{slug}", params={"score_type": score_type} if score_type else None)
        if r.status_code == 200 and r.json()["entries"]:
            return r.json()
        assert time.monotonic() < deadline, r.text
        time.sleep(0.5)


def test_set_level_metrics_rank_leaderboards_and_compare_two_runs(gateway, mmlu_items):
    slug = f"cls-lb-{uuid.uuid4().hex[:8]}"
    rows = [{"id": f"q{i}", "input": it.input, "reference": {"label": it.reference["answer"]}} for i, it in enumerate(mmlu_items)]
    assert _upload(gateway, slug, rows).status_code == 201
    first = submit(gateway, benchmark=slug, model="uep-oracle")
    done = wait_done(gateway, first, timeout_s=180)
    f1 = done["summary"]["set_metrics"]["headline"]["f1_macro"]

    # the recorded board of a benchmark without a primary metric stays the metric's accuracy (Wilson) ...
    board = _board(gateway, slug)
    assert board["score_type"] == "label_match" and board["entries"][0]["method"] == "wilson"
    # ... and every set-level metric of the summary is a score type of its own, with its bootstrap interval
    assert {"f1_macro", "precision_macro", "accuracy"} <= set(board["score_types"])
    by_f1 = _board(gateway, slug, "f1_macro")
    (entry,) = by_f1["entries"]
    assert (entry["score"], entry["ci_low"], entry["ci_high"]) == (f1["value"], f1["ci_low"], f1["ci_high"])
    assert entry["method"] == "bootstrap" and entry["rank"] == 1
    missing = gateway.get(f"/v1/leaderboards/{slug}", params={"score_type": "roc_auc"})
    assert missing.status_code == 404 and missing.json()["detail"][0]["loc"] == ["query", "score_type"]

    # a second run of the same deterministic model: every paired difference is 0, with a 0-width interval
    second = submit(gateway, benchmark=slug, model="uep-oracle")
    assert wait_done(gateway, second, timeout_s=180)["status"] == "completed"
    cmp = gateway.get(f"/v1/evaluations/{second}/compare", params={"baseline": first})
    assert cmp.status_code == 200, cmp.text
    sc = cmp.json()["set_metrics"]
    assert sc["kind"] == "classification" and sc["n_paired"] == N and sc["delong"] == []
    for m in sc["metrics"]:
        assert (m["difference"], m["ci_low"], m["ci_high"]) == (0.0, 0.0, 0.0), m
    assert "probabilities on both sides" in sc["note"]


def test_a_classifier_with_probabilities_gets_roc_pr_and_calibration(gateway, db):
    """``breast-cancer-logreg`` (a scikit-learn logistic regression served by the model server) on the built-in
    ``breast-cancer`` hold-out: the summary's ROC-AUC, PR-AUC, log loss and Brier score are scikit-learn's on the
    stored gold labels and probabilities (read back here), and the report draws the ROC, PR and reliability charts."""
    from sklearn.metrics import average_precision_score, brier_score_loss, log_loss, roc_auc_score

    evaluation_id = submit(gateway, benchmark="breast-cancer", model="breast-cancer-logreg")
    final = wait_done(gateway, evaluation_id, timeout_s=180)
    assert final["status"] == "completed", final
    sm = final["summary"]["set_metrics"]
    assert sm["primary"] == "accuracy" and sm["classification"]["labels"] == ["malignant", "benign"]
    rows = db_rows(
        db,
        "SELECT s.reference ->> 'label', r.prediction FROM sample_results r JOIN samples s ON s.id = r.sample_id "
        "WHERE r.evaluation_id = :e ORDER BY r.sample_id, r.repeat",
        e=evaluation_id,
    )
    assert len(rows) == sm["n"] == final["summary"]["n"]
    positive = [g == "benign" for g, _ in rows]  # the second class is the positive one
    p_benign = [p["probabilities"]["benign"] for _, p in rows]
    proba = [[p["probabilities"]["malignant"], p["probabilities"]["benign"]] for _, p in rows]
    head = sm["headline"]
    assert head["roc_auc"]["value"] == pytest.approx(roc_auc_score(positive, p_benign))
    assert head["pr_auc"]["value"] == pytest.approx(average_precision_score(positive, p_benign))
    assert head["log_loss"]["value"] == pytest.approx(log_loss(positive, [[a, b] for a, b in proba]))
    assert head["brier"]["value"] == pytest.approx(brier_score_loss(positive, p_benign))
    assert head["roc_auc"]["value"] > 0.95  # the classes separate well on these features (scikit-learn's example: ~0.99)
    assert head["roc_auc"]["ci_low"] <= head["roc_auc"]["value"] <= head["roc_auc"]["ci_high"]
    assert len(sm["classification"]["reliability"]) == 15

    _wait_report(gateway, evaluation_id)
    page = gateway.get(f"/v1/evaluations/{evaluation_id}/report.html").text
    for chart in ("confusion-chart", "roc-chart", "pr-chart", "reliability-chart"):
        assert f'id="{chart}"' in page, chart
    board = _board(gateway, "breast-cancer")
    assert board["score_type"] == "accuracy" and {"roc_auc", "f1_macro"} <= set(board["score_types"])
