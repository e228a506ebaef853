"""The report's classification and ranking sections and their charts, from set-level metrics computed on known
arrays (no database): what the page shows, and that the charts are self-contained SVG."""

import re

import numpy as np

from uep_common.analytics.charts import at_k_svg, confusion_svg, pr_svg, reliability_svg, roc_svg
from uep_common.analytics.set_metrics import (
    classification_curves,
    classification_items,
    classification_metrics,
    ranking_set_metrics,
)
from uep_common.contract.events import SetMetrics
from uep_reporter.report import render_html, set_charts, set_name
from uep_reporter.report_model import ClassCurve, ClassificationSection, RankingSection

from .test_report_render import make_report


def _classifier(n: int = 400, seed: int = 5):
    """A two-class classifier's items: gold labels, predictions (1 in 40 without an answer) and probabilities."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    p1 = np.clip(0.5 + (y - 0.5) * 0.5 + rng.normal(0, 0.2, n), 0.01, 0.99)
    names = ["benign", "malignant"]
    gold = [names[i] for i in y]
    predicted = [names[int(p > 0.5)] if i % 40 else None for i, p in enumerate(p1)]
    probs = [{"benign": 1 - p, "malignant": p} for p in p1]
    return classification_items(gold, predicted, probs, names)


def classification_section_of(items) -> ClassificationSection:
    """The section as the reporter builds it (uep_reporter.set_sections.classification_section) from the
    summary's set metrics and the curves of the items."""
    sm = SetMetrics.model_validate({**classification_metrics(items), "excluded": 3, "primary": "f1_macro"})
    c = sm.classification
    curves = classification_curves(items)
    return ClassificationSection(
        n=sm.n,
        excluded=sm.excluded,
        labels=c["labels"],
        positive_label=c["positive_label"],
        primary=sm.primary,
        method=sm.method,
        headline={k: v.model_dump() for k, v in sm.headline.items()},
        per_class=c["per_class"],
        confusion_matrix=c["confusion_matrix"],
        no_class_predictions=c["no_class_predictions"],
        probabilities=True,
        probabilities_note="",
        roc=[ClassCurve(label=r["label"], area=r["auc"], x=r["fpr"], y=r["tpr"]) for r in curves["roc"]],
        pr=[
            ClassCurve(label=r["label"], area=r["ap"], x=r["recall"], y=r["precision"], prevalence=r["prevalence"])
            for r in curves["pr"]
        ],
        reliability=c["reliability"],
    )


def test_the_classification_section_shows_the_metrics_per_class_and_four_charts():
    items = _classifier()
    section = classification_section_of(items)
    report = make_report(classification=section)
    page = render_html(report)
    assert '<section id="classification">' in page
    for chart in ("confusion-chart", "reliability-chart", "roc-chart", "pr-chart"):
        assert f'id="{chart}"' in page
    assert "F1 (macro)" in page and "ROC-AUC" in page and "expected calibration error" in page
    assert "primary metric <b>F1 (macro)</b>" in page
    # the per-class table carries each class's support, as many as the gold labels say
    support = np.bincount(items.y_true, minlength=2)
    table = page[page.index('id="per-class"') :].split("</table>")[0]
    for label, count in zip(["benign", "malignant"], support, strict=True):
        assert re.search(rf"<td>{label}</td><td class=\"num\">{count:,}</td>", table)
    assert "10 answer(s) naming no class" in page  # items 0, 40, …, 360 have no answer
    assert report.model_dump(mode="json")["classification"]["headline"]["roc_auc"]["value"] == section.headline["roc_auc"].value


def test_an_llm_classifier_has_no_roc_or_calibration_and_says_why():
    items = classification_items(["yes", "no", "yes"], ["yes", "yes", None])
    sm = classification_metrics(items)
    section = ClassificationSection(
        n=3,
        excluded=0,
        labels=items.labels,
        positive_label="yes",
        primary=None,
        method=sm["method"],
        headline=sm["headline"],
        per_class=sm["classification"]["per_class"],
        confusion_matrix=sm["classification"]["confusion_matrix"],
        no_class_predictions=1,
        probabilities=False,
        probabilities_note=items.proba_note,
        roc=[],
        pr=[],
        reliability=None,
    )
    page = render_html(make_report(classification=section))
    assert 'id="confusion-chart"' in page and 'id="roc-chart"' not in page and 'id="reliability-chart"' not in page
    assert "No ROC, precision-recall or calibration: the model gave no probabilities." in page
    assert "roc_auc" not in sm["headline"]


def test_the_ranking_section_tabulates_every_cut_off_and_draws_the_curve():
    values = {"rr": np.array([1.0, 0.5]), "ndcg@1": np.array([1.0, 0.0]), "ndcg@10": np.array([1.0, 0.63])}
    sm = SetMetrics.model_validate({**ranking_set_metrics(values, excluded=1), "primary": "ndcg@10"})
    section = RankingSection(
        n=sm.n,
        excluded_no_relevant=1,
        errors=0,
        primary=sm.primary,
        method=sm.method,
        cutoffs=sm.ranking["cutoffs"],
        headline={k: v.model_dump() for k, v in sm.headline.items()},
        curves=sm.ranking["curves"],
    )
    page = render_html(make_report(ranking=section))
    assert '<section id="ranking">' in page and 'id="at-k-chart"' in page
    assert "1 excluded (no relevant candidate)" in page and "primary metric <b>NDCG@10</b>" in page
    assert section.headline["mrr"].value == 0.75 and section.curves["ndcg"] == [0.5, 0.815]
    assert [set_name(k) for k in ("mrr", "ndcg@10", "map@5", "f1_macro")] == ["MRR", "NDCG@10", "MAP@5", "F1 (macro)"]


def test_set_charts_are_self_contained_svg():
    items = _classifier(200)
    report = make_report(classification=classification_section_of(items))
    charts = set_charts(report)
    assert set(charts) == {"confusion", "roc", "pr", "reliability"}
    charts["at_k"] = at_k_svg([1, 3, 5, 10], {"NDCG@k": [0.2, 0.4, 0.5, 0.6]}, "at k")
    for svg in charts.values():
        assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>") and not re.search(r'(href|src)="https?:', svg)
    assert "no ROC curve" in roc_svg([], "ROC")
    assert "no precision-recall curve" in pr_svg([], "PR")
    assert "no reliability diagram" in reliability_svg([{"low": 0, "high": 1, "count": 0}], "R")
    assert ">benign<" in confusion_svg(["benign"], ["benign", "(no answer)"], [[3, 1]], "CM")
