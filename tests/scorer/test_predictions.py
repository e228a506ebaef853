"""Scoring structured predictions: label_match with a classifier's prediction or an LLM's text read among the
class names, the per-item ranking metric ``ndcg`` (values worked out by hand below), several metrics of one
benchmark, the prediction carried by ScoreComputed, and the reference schema every metric publishes."""

import asyncio
import math
import uuid

import pytest
from jsonschema import Draft202012Validator

from uep_common.contract.configs import parse_benchmark_config
from uep_common.contract.events import OutputGenerated, Prediction, ScoreComputed
from uep_scorer.catalog import catalogue_rows
from uep_scorer.metrics import MetricInputError, available_metrics, get_metric
from uep_scorer.metrics.classification import find_label
from uep_scorer.metrics.ranking import EXCLUDED, query_metrics, ranking_of_text
from uep_scorer.scoring import score_output

LABEL = get_metric("label_match")
NDCG = get_metric("ndcg")


@pytest.mark.parametrize(
    ("output", "labels", "expected"),
    [
        ("The answer is (B).", ["A", "B", "C", "D"], ("B", "found")),  # the article "a"/"A" is no class A
        ("  positive. ", ["negative", "positive"], ("positive", "exact")),
        ('"Negative"', ["negative", "positive"], ("negative", "exact")),
        ("Not positive, but negative.", ["negative", "positive"], ("negative", "found")),  # the last one named
        ("very positive indeed", ["positive", "very positive"], ("very positive", "found")),  # the longer on a tie
        ("unpositively odd", ["negative", "positive"], (None, "no_answer")),  # inside a word: not a class
        ("I do not know.", ["spam", "ham"], (None, "no_answer")),
    ],
)
def test_find_label_reads_the_class_an_answer_names(output, labels, expected):
    assert find_label(output, labels) == expected


def test_label_match_uses_the_classifiers_prediction_over_the_text():
    pred = Prediction(label="malignant", probabilities={"benign": 0.2, "malignant": 0.8})
    result = LABEL.score_prediction(pred, "benign", {"label": "malignant"}, {})
    assert (result.is_correct, result.extracted, result.details["extraction"]) == (True, "malignant", "prediction")
    assert result.prediction == {"label": "malignant", "probabilities": {"benign": 0.2, "malignant": 0.8}}
    argmax = LABEL.score_prediction(Prediction(probabilities={"benign": 0.7, "malignant": 0.3}), "", {"label": "benign"}, {})
    assert (argmax.is_correct, argmax.extracted) == (True, "benign")
    llm = LABEL.score("I think it is spam.", {"label": "spam"}, {"labels": ["spam", "ham"]})
    assert (llm.is_correct, llm.extracted, llm.prediction) == (True, "spam", {"label": "spam"})
    none = LABEL.score("no idea", {"label": "spam"}, {"labels": ["spam", "ham"]})
    assert (none.is_correct, none.extracted, none.prediction, none.no_answer) == (False, None, None, True)
    with pytest.raises(MetricInputError, match="labels"):
        LABEL.score("x", {"label": "x"}, {"labels": "spam"})


def test_ndcg_per_query_values_by_hand():
    # ranked d3, d1, d2; gains d1 = 2, d2 = 1 (d3 not relevant), |R| = 2
    # RR = 1/2 (d1 at rank 2); DCG@3 = 2/log2(3) + 1/log2(4) = 1.2619 + 0.5; IDCG@3 = 2/1 + 1/log2(3) = 2.6309
    # AP@3 = (P@2 + P@3) / |R| = (1/2 + 2/3) / 2; precision@3 = 2/3; recall@1 = 0; hit@1 = 0
    v = query_metrics(["d3", "d1", "d2"], {"d1": 2, "d2": 1}, k=3)
    assert v["rr"] == 0.5
    assert v["ndcg@3"] == pytest.approx((2 / math.log2(3) + 0.5) / (2 + 1 / math.log2(3)))
    assert v["ap@3"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert v["precision@3"] == pytest.approx(2 / 3) and v["precision@10"] == pytest.approx(2 / 10)
    assert (v["recall@1"], v["hit@1"], v["recall@3"], v["hit@3"]) == (0.0, 0.0, 1.0, 1.0)
    assert query_metrics(["a"], {"b": 0}) is None  # no relevant item: excluded


def test_ndcg_metric_scores_a_rankers_ranking_or_the_ids_an_llm_lists():
    ref = {"relevant": ["d1"]}
    ranked = NDCG.score_prediction(Prediction(ranking=["d1", "d2"], scores=[0.9, 0.1]), "d1", ref, {"k": 5})
    assert (ranked.is_correct, ranked.score, ranked.extracted) == (True, 1.0, "d1")
    assert ranked.details["submetrics"]["ndcg@5"] == 1.0 and ranked.details["submetrics"]["rr"] == 1.0
    llm = NDCG.score("d2, d1", ref, {})
    # d1 at rank 2: NDCG@10 = (1/log2 3) / 1, hit@1 = 0
    assert (llm.is_correct, llm.score, llm.prediction) == (False, pytest.approx(1 / math.log2(3)), {"ranking": ["d2", "d1"]})
    excluded = NDCG.score("d1", {"relevance": {"d1": 0}}, {})
    assert (excluded.is_correct, excluded.score, excluded.details["status"]) == (None, None, EXCLUDED)
    assert ranking_of_text("[d3], 'd1'\nd2.") == ["d3", "d1", "d2"]
    with pytest.raises(MetricInputError, match="relevant"):
        NDCG.score("d1", {"answer": "d1"}, {})
    with pytest.raises(MetricInputError, match="'k'"):
        NDCG.score("d1", ref, {"k": 0})


class _Refs:
    def __init__(self, config: dict, reference: dict) -> None:
        self.config, self.ref = config, reference

    async def benchmark(self, benchmark_id: uuid.UUID):
        return parse_benchmark_config(self.config), "automatic"

    async def reference(self, sample_id: uuid.UUID, benchmark_id: uuid.UUID | None = None) -> dict:
        return self.ref


def _output(text: str | None, prediction: Prediction | None = None) -> OutputGenerated:
    return OutputGenerated(
        evaluation_id=uuid.uuid4(),
        tenant_id=uuid.uuid4(),
        sample_id=uuid.uuid4(),
        benchmark_id=uuid.uuid4(),
        model_id=uuid.uuid4(),
        prompt="p",
        output=text,
        prediction=prediction,
    )


def test_score_output_carries_the_prediction_and_reads_llm_labels_among_the_class_names():
    config = {"metric": {"name": "label_match"}, "class_names": ["ham", "spam"]}
    out = asyncio.run(score_output(_output("This looks like spam to me."), _Refs(config, {"label": "spam"})))
    assert isinstance(out, ScoreComputed) and out.is_correct is True and out.prediction == Prediction(label="spam")
    model = Prediction(label="ham", probabilities={"ham": 0.6, "spam": 0.4})
    out = asyncio.run(score_output(_output("ham", model), _Refs(config, {"label": "spam"})))
    assert out.is_correct is False and out.prediction == model and out.extracted == "ham"


def test_every_per_item_metric_of_a_benchmark_is_scored_the_first_decides():
    config = {"metrics": [{"name": "ndcg", "params": {"k": 3}, "primary": True}, {"name": "ndcg", "params": {"k": 1}}]}
    pred = Prediction(ranking=["b", "a", "c"])
    out = asyncio.run(score_output(_output("b", pred), _Refs(config, {"relevant": ["a"]})))
    assert out.metric_name == "ndcg" and out.is_correct is False
    assert out.score == pytest.approx(1 / math.log2(3))  # NDCG@3 of "a" at rank 2
    assert out.metrics["ndcg@3"] == out.score and out.metrics["ndcg@1"] == 0.0 and out.metrics["rr"] == 0.5
    assert out.prediction == pred
    excluded = asyncio.run(score_output(_output("b", pred), _Refs(config, {"relevant": []})))
    assert excluded.is_correct is None and excluded.error is None and excluded.metrics["status"] == EXCLUDED


def test_every_metric_publishes_a_reference_schema_its_examples_fit():
    examples = {
        "label_match": ({"label": "spam"}, {"answer": "spam"}),
        "ndcg": ({"relevant": ["d1"]}, {"relevance": {"d1": -1}}),
        "exact_match": ({"answers": ["Paris"]}, {"label": "Paris"}),
        "gsm8k_numeric_exact_match": ({"answer": "18"}, {}),
        "humaneval_pass_at_1": ({"prompt": "p", "test": "t", "entry_point": "f"}, {"prompt": "p"}),
        "pass_at_k": ({"n": 10, "c": 2}, {"n": 10}),
        "loglik_multiple_choice": ({"gold": 1, "choices": ["a", "b"]}, {"gold": "1", "choices": ["a"]}),
    }
    rows = {r["name"]: r for r in catalogue_rows()}
    assert set(rows) == set(available_metrics())
    for name, row in rows.items():
        Draft202012Validator.check_schema(row["reference_schema"])
        assert row["reference_schema"]["type"] == "object", name
    for name, (good, bad) in examples.items():
        validator = Draft202012Validator(rows[name]["reference_schema"])
        assert validator.is_valid(good) and not validator.is_valid(bad), name
