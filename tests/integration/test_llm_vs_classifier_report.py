"""An LLM evaluated as a classifier against a real classifier on the same built-in benchmark, in one report.

Both run ``mmlu-topic`` (the same 120 questions: the benchmark's default random sampling, seed 0) through the
whole test stack:

- the classifier ``mmlu-topic-tfidf``'s pipeline (scikit-learn TF-IDF + logistic regression, served by a model
  server of this module's own, ``uep_mmlu_topic``, and registered through ``POST /v1/models``: the stack's
  Triton does not serve it) answers a label and the probabilities of the four classes;
- the LLM ``uep-oracle`` (the stack's Triton, generation contract) is prompted with the benchmark's template
  and its reply is read as the class it names by the scorer's ``label_match``; it gives no probabilities.

Right values:

- the LLM's labels are known in advance: the oracle's rule for ``mmlu-topic`` prompts (deploy/model-server/src/
  uep_model_server/oracle.py: the item's category iff its ordinal % 3 != 2, else the next class);
- accuracy, macro F1, the confusion matrix and (the classifier only) the one-vs-rest macro ROC-AUC of each run
  are scikit-learn's (``sklearn.metrics``), computed here from the per-item predictions the API returns
  (``GET /v1/evaluations/{id}/results``, ``prediction``) and the gold labels of the benchmark's loader
  (``uep_common.builtin.labelled.load_mmlu_topic``);
- the 2×2 table and McNemar's discordant counts are counted here from the same items' verdicts.

The classifier's report is requested with the LLM's run as its baseline (``POST …/reports {"baseline"}``):
its JSON holds both evaluations and the paired set-level comparison (paired bootstrap of every difference on the
same items). DeLong's test of the ROC-AUCs needs probabilities on both sides: with an LLM baseline the report
has no DeLong row and no ROC-AUC difference, and says so in ``set_metrics.note``.

The report's PDF is rendered to PNG pages with ``pdftoppm`` (poppler-utils), kept in ``UEP_TEST_REPORT_PNG_DIR``
when set (to look at the charts), else in a temporary directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, roc_auc_score

from model_server.server_process import model_server
from uep_common.builtin.labelled import MMLU_TOPIC_CLASSES, load_mmlu_topic

from .helpers import all_results, submit, wait_done

N = 120
CLASSES = list(MMLU_TOPIC_CLASSES)
NO_ANSWER = "(no answer)"


@pytest.fixture(scope="module")
def classifier(gateway):
    """The name of a registered ``classification``/``text`` model served by this module's model server."""
    with model_server(("uep_mmlu_topic",)) as running:
        name = f"topic-tfidf-{uuid.uuid4().hex[:8]}"
        r = gateway.post(
            "/v1/models",
            json={
                "name": name,
                "kind": "classification",
                "endpoint": f"http://{running['http']}",
                "triton_model_name": "uep_mmlu_topic",
                "spec": {"class_names": CLASSES},
                "max_in_flight": 16,
            },
        )
        assert r.status_code == 201, r.text
        yield name


@pytest.fixture(scope="module")
def runs(gateway, classifier):
    """The two completed evaluations on the same items: ``{"classifier": view, "llm": view}``."""
    ids = {
        "classifier": submit(gateway, benchmark="mmlu-topic", model=classifier, sample_limit=N),
        "llm": submit(gateway, benchmark="mmlu-topic", model="uep-oracle", sample_limit=N),
    }
    views = {k: wait_done(gateway, v, timeout_s=240) for k, v in ids.items()}
    for view in views.values():
        assert view["status"] == "completed", view
    return views


@pytest.fixture(scope="module")
def items(gateway, runs):
    """Per run: the stored results (benchmark order) with the gold label of each item."""
    gold = {it.external_id: it for it in load_mmlu_topic("test")}
    out = {}
    for key, view in runs.items():
        results = all_results(gateway, view["id"])
        assert len(results) == N and all(r["error"] is None for r in results)
        out[key] = [(gold[r["external_id"]], r) for r in results]
    return out


def _label(result: dict) -> str:
    """The predicted class of a stored result; an answer naming no class is the confusion matrix's last column."""
    label = (result["prediction"] or {}).get("label")
    return label if label is not None else NO_ANSWER


def _sklearn(pairs: list) -> dict:
    """accuracy, macro F1 and the confusion matrix of (gold item, result) pairs, by scikit-learn."""
    y_true = [it.reference["label"] for it, _ in pairs]
    y_pred = [_label(r) for _, r in pairs]
    return {
        "accuracy": accuracy_score(y_true, y_pred),
        "f1_macro": f1_score(y_true, y_pred, labels=CLASSES, average="macro", zero_division=np.nan),
        "confusion": confusion_matrix(y_true, y_pred, labels=[*CLASSES, NO_ANSWER])[: len(CLASSES)].tolist(),
    }


def _roc_auc(pairs: list) -> float:
    """One-vs-rest macro ROC-AUC of the classifier's stored probabilities (scikit-learn; its ``labels`` must be
    sorted, so the probability columns are taken in sorted class order)."""
    y_true = [it.reference["label"] for it, _ in pairs]
    labels = sorted(CLASSES)
    proba = [[r["prediction"]["probabilities"][c] for c in labels] for _, r in pairs]
    return float(roc_auc_score(y_true, proba, multi_class="ovr", average="macro", labels=labels))


def _wait_report(gateway, evaluation_id: str, report_id: str, timeout_s: float = 180) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        row = gateway.get(f"/v1/evaluations/{evaluation_id}/reports/{report_id}").json()
        if row["status"] == "ready":
            return row
        assert row["status"] != "failed", row
        assert time.monotonic() < deadline, row
        time.sleep(0.5)


def test_both_runs_answer_the_same_items_and_the_llm_answers_by_the_oracle_rule(items):
    assert [it.external_id for it, _ in items["classifier"]] == [it.external_id for it, _ in items["llm"]]
    for it, r in items["llm"]:
        gold = CLASSES.index(it.reference["label"])
        expected = CLASSES[gold if it.ordinal % 3 != 2 else (gold + 1) % 4]  # oracle.py, "MMLU topic"
        assert (r["output"], r["extracted"], r["prediction"]) == (expected, expected, {"label": expected}), it.external_id
    for _, r in items["classifier"]:
        proba = r["prediction"]["probabilities"]
        assert sorted(proba) == sorted(CLASSES) and sum(proba.values()) == pytest.approx(1, abs=1e-5)
        assert r["prediction"]["label"] == max(proba, key=proba.__getitem__) == r["extracted"]


def test_each_summary_s_set_metrics_are_scikit_learn_s_on_the_stored_predictions(runs, items):
    for key in ("classifier", "llm"):
        sm = runs[key]["summary"]["set_metrics"]
        want = _sklearn(items[key])
        assert sm["kind"] == "classification" and sm["n"] == N and sm["excluded"] == 0
        assert sm["headline"]["accuracy"]["value"] == pytest.approx(want["accuracy"]) == runs[key]["summary"]["accuracy"]
        assert sm["headline"]["f1_macro"]["value"] == pytest.approx(want["f1_macro"]), key
        cm = sm["classification"]["confusion_matrix"]
        assert cm["labels"] == CLASSES and cm["predicted"] == [*CLASSES, NO_ANSWER]
        assert cm["matrix"] == want["confusion"], key
    assert runs["classifier"]["summary"]["set_metrics"]["headline"]["roc_auc"]["value"] == pytest.approx(
        _roc_auc(items["classifier"])
    )
    assert "roc_auc" not in runs["llm"]["summary"]["set_metrics"]["headline"]  # no probabilities
    print(
        "\nmmlu-topic, {} items: classifier accuracy {:.4f} f1_macro {:.4f} roc_auc {:.4f}; LLM accuracy {:.4f} "
        "f1_macro {:.4f}".format(
            N,
            *(_sklearn(items["classifier"])[k] for k in ("accuracy", "f1_macro")),
            _roc_auc(items["classifier"]),
            *(_sklearn(items["llm"])[k] for k in ("accuracy", "f1_macro")),
        )
    )


def test_one_report_compares_the_classifier_with_the_llm_on_the_same_items(gateway, runs, items, classifier, tmp_path):
    cls_id, llm_id = runs["classifier"]["id"], runs["llm"]["id"]
    r = gateway.post(f"/v1/evaluations/{cls_id}/reports", json={"baseline": llm_id})
    assert r.status_code == 202, r.text
    row = _wait_report(gateway, cls_id, r.json()["id"])
    assert row["baseline_evaluation_id"] == llm_id
    body = gateway.get(f"/v1/evaluations/{cls_id}/report.json", params={"report_id": row["id"]}).json()

    # both evaluations
    assert body["evaluation"]["id"] == cls_id and body["evaluation"]["model"]["name"] == classifier
    assert body["evaluation"]["model"]["kind"] == "classification"
    base = body["comparison"]["baseline"]
    assert (base["evaluation_id"], base["reason"]) == (llm_id, "requested")
    assert (base["model_name"], base["model_kind"]) == ("uep-oracle", "generation")
    mine, theirs = _sklearn(items["classifier"]), _sklearn(items["llm"])
    assert base["accuracy"] == pytest.approx(theirs["accuracy"])
    head = body["classification"]["headline"]
    assert head["accuracy"]["value"] == pytest.approx(mine["accuracy"]) and head["f1_macro"]["value"] == pytest.approx(
        mine["f1_macro"]
    )
    assert body["classification"]["confusion_matrix"]["matrix"] == mine["confusion"]
    # in uep_common.analytics.set_metrics' order (CLASSIFICATION_HEADLINE, then PROBABILITY_HEADLINE), not the JSONB key order
    assert list(head) == [
        *("accuracy", "balanced_accuracy", "precision_macro", "recall_macro", "f1_macro", "precision_micro", "recall_micro"),
        *("f1_micro", "precision_weighted", "recall_weighted", "f1_weighted", "roc_auc", "pr_auc", "log_loss", "brier", "ece"),
    ]

    # the paired comparison: every item on both sides
    comp = body["comparison"]["comparison"]
    assert (comp["paired_by"], comp["n_paired"], comp["n_paired_with_verdicts"]) == ("sample", N, N)
    ok_c = [_label(r) == it.reference["label"] for it, r in items["classifier"]]
    ok_b = [_label(r) == it.reference["label"] for it, r in items["llm"]]
    assert [r["is_correct"] for _, r in items["classifier"]] == ok_c and [r["is_correct"] for _, r in items["llm"]] == ok_b
    table = {
        "both_correct": sum(c and b for c, b in zip(ok_c, ok_b, strict=True)),
        "baseline_only_correct": sum(b and not c for c, b in zip(ok_c, ok_b, strict=True)),
        "current_only_correct": sum(c and not b for c, b in zip(ok_c, ok_b, strict=True)),
        "both_wrong": sum(not (c or b) for c, b in zip(ok_c, ok_b, strict=True)),
    }
    assert comp["table"] == table
    assert (comp["mcnemar"]["b"], comp["mcnemar"]["c"]) == (table["baseline_only_correct"], table["current_only_correct"])
    acc = comp["accuracy"]
    assert acc["difference"] == pytest.approx(mine["accuracy"] - theirs["accuracy"])
    assert acc["ci_low"] <= acc["difference"] <= acc["ci_high"]

    sc = comp["set_metrics"]
    assert sc["kind"] == "classification" and sc["n_paired"] == N and sc["method"].startswith("paired ")
    metrics = {m["name"]: m for m in sc["metrics"]}
    for name in ("accuracy", "f1_macro"):
        m = metrics[name]
        assert (m["current"], m["baseline"]) == (pytest.approx(mine[name]), pytest.approx(theirs[name])), name
        assert m["difference"] == pytest.approx(mine[name] - theirs[name])
        assert m["ci_low"] <= m["difference"] <= m["ci_high"], m
    # no probabilities on the LLM's side: no DeLong test, no ROC-AUC difference, and the note says why
    assert sc["delong"] == [] and "roc_auc" not in metrics
    assert sc["note"] == "ROC-AUC, PR-AUC and calibration need probabilities on both sides"

    # the same comparison from the compare endpoint, and the other way round
    direct = gateway.get(f"/v1/evaluations/{cls_id}/compare", params={"baseline": llm_id}).json()
    assert direct["set_metrics"] == sc and direct["table"] == table
    reverse = gateway.get(f"/v1/evaluations/{llm_id}/compare", params={"baseline": cls_id}).json()
    back = {m["name"]: m for m in reverse["set_metrics"]["metrics"]}
    for name in ("accuracy", "f1_macro"):
        assert back[name]["difference"] == pytest.approx(-metrics[name]["difference"])

    # the HTML and the PDF say the same; the PDF's pages become PNGs to look at
    page = gateway.get(f"/v1/evaluations/{cls_id}/report.html", params={"report_id": row["id"]}).text
    assert '<table id="set-comparison">' in page and '<table id="delong">' not in page
    assert "need probabilities on both sides" in page and "uep-oracle" in page
    for chart in ("confusion-chart", "roc-chart", "pr-chart", "reliability-chart"):
        assert f'id="{chart}"' in page, chart
    assert "pdf" in row["formats"], row["pdf_error"]
    pdf = gateway.get(f"/v1/evaluations/{cls_id}/report.pdf", params={"report_id": row["id"]}).content
    assert pdf.startswith(b"%PDF-")
    out = Path(os.environ.get("UEP_TEST_REPORT_PNG_DIR") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    (out / "classifier-vs-llm.pdf").write_bytes(pdf)
    (out / "classifier-vs-llm.html").write_text(page)
    if shutil.which("pdftoppm") is None:
        pytest.skip("pdftoppm (poppler-utils) is not installed: the PDF is not rendered to PNG")
    subprocess.run(["pdftoppm", "-png", "-r", "70", str(out / "classifier-vs-llm.pdf"), str(out / "page")], check=True)
    pages = sorted(out.glob("page-*.png"))
    assert pages and all(p.stat().st_size > 1000 for p in pages)
    print(f"\nreport pages: {len(pages)} PNG files in {out}")
