"""The headline of an evaluation (uep_common.analytics.summary.headline_of) in the API's list items and the CLI's list:
a ranker shows its primary ndcg@k, a classifier its benchmark's primary metric (accuracy when it names none),
an LLM its accuracy, a graded metric its mean. Summaries are built with the real set-metric functions."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import numpy as np
import pytest

from uep_cli.main import headline_cells
from uep_common.analytics.set_metrics import classification_items, classification_metrics, ranking_set_metrics
from uep_common.analytics.summary import headline_of
from uep_common.contract.events import EvaluationSummary, SetMetrics
from uep_common.tables.models import Benchmark, Evaluation, Model
from uep_gateway.api.evaluations import _list_item

BASE = {"n": 4, "scored": 4, "correct": 3, "errors": 0, "accuracy": 0.75, "ci_low": 0.3, "ci_high": 0.95}
BASE |= {"latency_ms_p50": 1.0, "latency_ms_p90": 2.0, "prompt_tokens": 0, "completion_tokens": 0}


def _summary(metric_name: str, set_metrics: dict | None) -> dict:
    return EvaluationSummary.model_validate(BASE | {"metric_name": metric_name, "set_metrics": set_metrics}).model_dump(
        mode="json"
    )


def _ranking(primary: str | None) -> dict:
    values = {
        "rr": np.array([1.0, 0.5, 1.0, 1 / 3]),
        "ndcg@10": np.array([1.0, 0.62, 0.9, 0.5]),
        "hit@1": np.array([1.0, 0.0, 1.0, 0.0]),
    }
    result = ranking_set_metrics(values, 0, n_resamples=200)
    return SetMetrics.model_validate({**result, "excluded": 0, "primary": primary}).model_dump(mode="json")


def test_a_ranker_headlines_its_primary_ndcg_not_hit_at_1():
    summary = _summary("ndcg", _ranking("ndcg@10"))
    hl = headline_of(summary)
    assert hl is not None and (hl.metric, hl.set_level) == ("ndcg@10", True)
    assert hl.value == pytest.approx(np.mean([1.0, 0.62, 0.9, 0.5]))  # 0.755, not hit@1's 0.5
    assert hl.ci_low is not None and hl.ci_low <= hl.value <= hl.ci_high
    # a primary that names MRR wins; a benchmark without one gets ndcg@10
    assert headline_of(_summary("ndcg", _ranking("mrr"))).value == pytest.approx(np.mean([1.0, 0.5, 1.0, 1 / 3]))
    assert headline_of(_summary("ndcg", _ranking(None))).metric == "ndcg@10"


def test_a_classifier_headlines_its_primary_metric_else_its_accuracy():
    items = classification_items(["a", "b", "b", "a"], ["a", "b", "a", "a"], None, ["a", "b"])
    result = classification_metrics(items, n_resamples=200)
    for primary, name in (("f1_macro", "f1_macro"), (None, "accuracy")):
        sm = SetMetrics.model_validate({**result, "excluded": 0, "primary": primary}).model_dump(mode="json")
        hl = headline_of(_summary("label_match", sm))
        assert (hl.metric, hl.set_level) == (name, True)
        assert hl.value == pytest.approx(result["headline"][name]["value"])
    assert result["headline"]["f1_macro"]["value"] == pytest.approx(0.7333333)  # sklearn f1_score(average="macro")


def test_an_llm_headlines_its_accuracy_and_a_graded_metric_its_mean():
    hl = headline_of(_summary("gsm8k_numeric_exact_match", None))
    assert (hl.metric, hl.value, hl.ci_low, hl.ci_high, hl.set_level) == ("accuracy", 0.75, 0.3, 0.95, False)
    graded = BASE | {"accuracy": None, "ci_low": None, "ci_high": None, "metric_name": "bleu", "metric_means": {"bleu": 31.5}}
    assert headline_of(graded).model_dump() == {
        "metric": "bleu",
        "value": 31.5,
        "ci_low": None,
        "ci_high": None,
        "method": None,
        "proportion": False,
        "set_level": False,
        "n": 4,
        "errors": 0,
        "excluded": 0,
        "note": None,
    }
    assert headline_of(None) is None and headline_of({}) is None


def test_the_list_item_and_the_cli_row_show_the_ranker_s_ndcg():
    bench = Benchmark(id=uuid.uuid4(), slug="msmarco", name="m", version="v1")
    model = Model(id=uuid.uuid4(), name="ranker", version="1")
    ev = Evaluation(
        id=uuid.uuid4(),
        status="completed",
        priority="normal",
        benchmark_id=bench.id,
        model_id=model.id,
        repeats=1,
        arm="main",
        total_items=4,
        completed_items=4,
        error_items=0,
        discarded_items=0,
        created_at=datetime.now(UTC),
        summary=_summary("ndcg", _ranking("ndcg@10")),
    )
    item = _list_item(ev, bench, model).model_dump(mode="json")
    assert item["accuracy"] == 0.75 and item["headline"]["metric"] == "ndcg@10"
    name, ci = headline_cells(item)
    assert name == "ndcg@10 0.755"  # mean of 1.0, 0.62, 0.9, 0.5 = 0.755, three decimals
    assert ci.startswith("[") and ci.endswith("] bootstrap")
    # an older gateway without ``headline``: the accuracy, a proportion, with its Wilson interval
    assert headline_cells({"accuracy": 0.5, "ci_low": 0.1, "ci_high": 0.9}) == ("accuracy 50.0 %", "[10.0–90.0] Wilson")
