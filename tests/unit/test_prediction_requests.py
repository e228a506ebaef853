"""Non-generative items and Triton contracts, without a server: the request a sample becomes
(:mod:`uep_inference.predictions`), the tensors each Triton contract sends and how its answer is read
(:mod:`uep_inference.backends.triton_contracts`), the inference step's OutputGenerated with ``prediction``, the
creation check of a model's kind against the benchmark's task, and the built-in benchmarks and local models of
these kinds.

Right values are by hand: probabilities and scores given by the fake backends below, the ranking sorted by
score with ties in candidate order, the cosine of small vectors worked out in the comments."""

import json
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from uep_common.builtin import catalog, labelled
from uep_common.builtin.datasets import load_mmlu
from uep_common.contract.events import ModelTarget, Prediction, PromptSpec, SampleDispatched
from uep_common.contract.model_contracts import CONTRACTS, contract_for
from uep_common.prompting.prompts import render_prompt
from uep_common.records.creation import WorkLimitRefused, benchmark_task, check_model_fits
from uep_common.tables.models import Benchmark, Model
from uep_inference.backends import triton_contracts as tc
from uep_inference.backends.base import BackendError, GenerationRequest, PredictionOutput, PredictionRequest
from uep_inference.predictions import (
    BadInputError,
    BadOutputError,
    build_request,
    classification_input,
    render_input,
    to_prediction,
)
from uep_inference.service import generate_output

CLASSES = ["malignant", "benign"]


def _target(kind: str = "classification", contract: str = "features", **spec) -> ModelTarget:
    return ModelTarget(
        model_id=uuid.UUID(int=1), name="m", backend="triton", endpoint="grpc://x:1", kind=kind, contract=contract, spec=spec
    )


RANKING_INPUT = {"query": "sort", "candidates": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}, {"id": "c", "text": "z"}]}


# ------------------------------------------------------------------------------------------- sample -> request


def test_a_features_sample_becomes_a_features_request():
    target = _target(class_names=CLASSES, n_features=3)
    request = build_request(target, {"features": [1, 2.5, -3]}, 5.0)
    assert (request.features, request.text, request.timeout_s) == ((1.0, 2.5, -3.0), None, 5.0)
    assert render_input(request) == "features: [1, 2.5, -3] (3 values)"
    long = build_request(_target(), {"features": list(range(10))}, 5.0)
    assert render_input(long) == "features: [0, 1, 2, 3, 4, 5, 6, 7, …] (10 values)"


def test_the_classification_input_is_the_contract_else_spec_input():
    assert classification_input(_target(contract="text")) == "text"
    assert classification_input(_target(contract="features", input="text")) == "features"
    assert classification_input(_target(contract="uep", input="features")) == "features"
    assert classification_input(_target(contract="uep")) == "text"
    request = build_request(_target(contract="text"), {"text": "What is 2+2?"}, 1.0)
    assert (request.text, request.features, render_input(request)) == ("What is 2+2?", None, "What is 2+2?")


def test_a_ranking_sample_becomes_the_query_and_the_candidate_texts_in_order():
    request = build_request(_target("ranking", "uep"), RANKING_INPUT, 2.0)
    assert (request.query, request.candidates) == ("sort", ("x", "y", "z"))
    assert render_input(request) == "query: sort\n(3 candidates)"
    assert build_request(_target("embedding", "uep"), RANKING_INPUT, 2.0).candidates == ("x", "y", "z")


@pytest.mark.parametrize(
    ("target", "sample", "names"),
    [
        (_target(contract="text"), {"question": "x"}, "input.text must be a string (missing)"),
        (_target(contract="text"), {"text": 3}, "input.text must be a string (int)"),
        (_target(contract="text"), {"text": "x" * 100_001}, "input.text has 100001 characters"),
        (_target(), {"features": "1,2"}, "input.features must be a non-empty list"),
        (_target(), {"features": []}, "input.features must be a non-empty list"),
        (_target(), {"features": [1, float("nan")]}, "input.features must hold finite numbers"),
        (_target(), {"features": [1, True]}, "input.features must hold finite numbers"),
        (_target(n_features=30), {"features": [1.0, 2.0]}, "input.features has 2 values; model 'm' takes 30"),
        (_target("ranking", "uep"), {"candidates": []}, "input.query must be a string"),
        (_target("ranking", "uep"), {"query": "q", "candidates": []}, "input.candidates must be a list of 1 to 1000"),
        (_target("ranking", "uep"), {"query": "q", "candidates": ["x"]}, "input.candidates[0] must be an object"),
        (
            _target("ranking", "uep"),
            {"query": "q", "candidates": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]},
            "the ids must be distinct",
        ),
        (_target("generation", "uep"), {"prompt": "x"}, "it takes a prompt"),
    ],
)
def test_a_sample_without_the_kinds_shape_is_refused_naming_the_field(target, sample, names):
    with pytest.raises(BadInputError, match=names.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        build_request(target, sample, 1.0)


# ------------------------------------------------------------------------------------------- answer -> prediction


def test_a_classifiers_answer_is_named_by_the_models_class_names():
    target = _target(class_names=CLASSES)
    prediction, output = to_prediction(target, {}, PredictionOutput(probabilities=(0.25, 0.75), label_index=1))
    assert prediction == Prediction(label="benign", probabilities={"malignant": 0.25, "benign": 0.75})
    assert output == "benign"


@pytest.mark.parametrize(
    ("spec", "out", "why"),
    [
        ({}, PredictionOutput(probabilities=(0.5, 0.5), label_index=0), "has no spec.class_names"),
        ({"class_names": CLASSES}, PredictionOutput(probabilities=(0.2, 0.3, 0.5), label_index=0), "3 probabilities for 2"),
        ({"class_names": CLASSES}, PredictionOutput(probabilities=(0.5, 0.5), label_index=2), "label index 2"),
        ({"class_names": CLASSES}, PredictionOutput(scores=(1.0,)), "without probabilities and label"),
    ],
)
def test_a_classifiers_answer_that_does_not_fit_its_spec_is_a_bad_output(spec, out, why):
    with pytest.raises(BadOutputError, match=why):
        to_prediction(_target(**spec), {}, out)


def test_a_ranking_sorts_by_score_with_ties_in_candidate_order():
    prediction, output = to_prediction(_target("ranking", "uep"), RANKING_INPUT, PredictionOutput(scores=(0.5, 0.9, 0.5)))
    assert prediction.ranking == ["b", "a", "c"] and prediction.scores == [0.5, 0.9, 0.5] and output == "b"
    with pytest.raises(BadOutputError, match="2 scores for 3 candidates"):
        to_prediction(_target("ranking", "uep"), RANKING_INPUT, PredictionOutput(scores=(0.5, 0.9)))


# ------------------------------------------------------------------------------------------- Triton contracts


def _gen(contract: str, **kw) -> GenerationRequest:
    args = {"prompt": "Q?", "max_tokens": 16, "timeout_s": 5.0, "temperature": 0.5, "stop": ("\n\n", "Q:"), **kw}
    return GenerationRequest(target=_target("generation", contract), **args)


def _tensors(tensors) -> dict:
    return {t.name: (t.datatype, t.value.shape, t.value.tolist()) for t in tensors}


def test_the_uep_generation_request():
    sent = _tensors(tc.GENERATION["uep"].build(_gen("uep", chat=False), False))
    assert sent == {
        "text_input": ("BYTES", (1, 1), [[b"Q?"]]),
        "max_tokens": ("INT32", (1, 1), [[16]]),
        "temperature": ("FP32", (1, 1), [[0.5]]),
        "stop": ("BYTES", (1, 1), [[json.dumps(["\n\n", "Q:"]).encode()]]),
        "chat": ("INT32", (1, 1), [[0]]),
    }


def test_the_vllm_request_has_no_batch_dimension_and_sampling_parameters_as_json():
    sent = _tensors(tc.GENERATION["vllm"].build(_gen("vllm"), False))
    assert set(sent) == {"text_input", "stream", "sampling_parameters", "exclude_input_in_output"}
    assert sent["text_input"] == ("BYTES", (1,), [b"Q?"])
    assert sent["stream"] == ("BOOL", (1,), [False]) and sent["exclude_input_in_output"] == ("BOOL", (1,), [True])
    assert json.loads(sent["sampling_parameters"][2][0]) == {"max_tokens": 16, "temperature": 0.5, "stop": ["\n\n", "Q:"]}
    no_stop = _tensors(tc.GENERATION["vllm"].build(_gen("vllm", stop=()), False))
    assert json.loads(no_stop["sampling_parameters"][2][0]) == {"max_tokens": 16, "temperature": 0.5}
    read = tc.GENERATION["vllm"].read(_gen("vllm"), {"text_output": np.array([b"Paris"], dtype=object)}.get)
    assert (read.text, read.prompt_tokens, read.completion_tokens) == ("Paris", None, None)


def test_the_trtllm_request_sends_stop_words_only_when_there_are_some_and_drops_an_echoed_prompt():
    sent = _tensors(tc.GENERATION["trtllm"].build(_gen("trtllm"), False))
    assert sent == {
        "text_input": ("BYTES", (1, 1), [[b"Q?"]]),
        "max_tokens": ("INT32", (1, 1), [[16]]),
        "temperature": ("FP32", (1, 1), [[0.5]]),
        "stop_words": ("BYTES", (1, 2), [[b"\n\n", b"Q:"]]),
    }
    assert "stop_words" not in _tensors(tc.GENERATION["trtllm"].build(_gen("trtllm", stop=()), False))
    read = tc.GENERATION["trtllm"].read
    assert read(_gen("trtllm"), {"text_output": np.array([[b"Q? Paris"]], dtype=object)}.get).text == " Paris"
    assert read(_gen("trtllm"), {"text_output": np.array([[b"Paris"]], dtype=object)}.get).text == "Paris"
    with pytest.raises(BackendError) as exc:
        read(_gen("trtllm"), {}.get)
    assert exc.value.kind == "triton_bad_response"


def test_an_unknown_generation_contract_is_unsupported():
    with pytest.raises(BackendError) as exc:
        tc.generation_contract("openai")
    assert exc.value.kind == "contract_unsupported"


def test_classification_and_ranking_tensors_and_answers():
    features = tc.classification_inputs(PredictionRequest(_target(), 1.0, features=(1.0, 2.0)))
    assert _tensors(features) == {"features": ("FP32", (1, 2), [[1.0, 2.0]])}
    text = tc.classification_inputs(PredictionRequest(_target(contract="text"), 1.0, text="hé"))
    assert _tensors(text) == {"text": ("BYTES", (1, 1), [["hé".encode()]])}
    answer = {"probabilities": np.array([[0.25, 0.75]], dtype=np.float32), "label": np.array([[1]], dtype=np.int64)}
    assert tc.read_classification(answer.get) == PredictionOutput(probabilities=(0.25, 0.75), label_index=1)
    ranking = tc.ranking_inputs(PredictionRequest(_target("ranking", "uep"), 1.0, query="q", candidates=("a", "b")))
    assert _tensors(ranking) == {"query": ("BYTES", (1, 1), [[b"q"]]), "candidates": ("BYTES", (1, 2), [[b"a", b"b"]])}
    assert tc.read_scores({"scores": np.array([[0.5, 0.25]], dtype=np.float32)}.get, 2) == PredictionOutput(scores=(0.5, 0.25))
    with pytest.raises(BackendError, match="1 scores for 2 candidates"):
        tc.read_scores({"scores": np.array([[0.5]], dtype=np.float32)}.get, 2)


def test_cosine_scores():
    # q = (1, 0); candidates (2, 0) -> 1, (0, 3) -> 0, (1, 1) -> 1/sqrt(2), (0, 0) -> 0 (no direction)
    scores = tc.cosine_scores(np.array([1.0, 0.0]), np.array([[2.0, 0.0], [0.0, 3.0], [1.0, 1.0], [0.0, 0.0]]))
    assert scores == pytest.approx((1.0, 0.0, 2**-0.5, 0.0))
    with pytest.raises(BackendError, match="embeddings of 2 and 3 dimensions"):
        tc.cosine_scores(np.array([1.0, 0.0]), np.array([[1.0, 0.0, 0.0]]))


def test_the_builders_send_what_the_contract_table_names():
    tc.check_against_contracts()  # also run at import; raises on a drift between the two
    for key in [*((k, c) for k, c in tc.PREDICTION_OUTPUTS), *(("generation", n) for n in tc.GENERATION)]:
        assert contract_for(*key) is not None, key


# ------------------------------------------------------------------------------------------- the inference step


class _Backend:
    """Answers every prediction with ``answer``; records the requests."""

    name, transient_errors = "triton", frozenset()

    def __init__(self, answer: PredictionOutput) -> None:
        self.answer, self.requests = answer, []

    async def predict(self, request):
        self.requests.append(request)
        return self.answer

    def capacity(self, target):
        return None


class _Backends:
    def __init__(self, backend) -> None:
        self.backend = backend

    def for_target(self, target):
        return self.backend


def _event(target: ModelTarget, sample_input: dict) -> SampleDispatched:
    return SampleDispatched(
        evaluation_id=uuid.uuid4(),
        tenant_id=uuid.uuid4(),
        sample_id=uuid.uuid4(),
        benchmark_id=uuid.uuid4(),
        sample_ordinal=0,
        input=sample_input,
        prompt=PromptSpec(template="{{ prompt }}"),  # not rendered for a classifier
        target=target,
        lease_expires_at=datetime.now(UTC) + timedelta(minutes=5),
    )


async def test_a_classifier_item_publishes_its_prediction_and_the_label_as_output():
    backend = _Backend(PredictionOutput(probabilities=(0.9, 0.1), label_index=0))
    target = _target(class_names=CLASSES, n_features=2)
    out = await generate_output(_event(target, {"features": [1.5, 2.0]}), _Backends(backend), 5.0)
    assert out.error is None and out.output == "malignant" and out.prompt == "features: [1.5, 2] (2 values)"
    assert out.prediction == Prediction(label="malignant", probabilities={"malignant": 0.9, "benign": 0.1})
    assert backend.requests == [PredictionRequest(target, 5.0, features=(1.5, 2.0))]
    assert out.latency_ms is not None and out.prompt_tokens is None


async def test_a_ranker_item_publishes_scores_ranking_and_the_top_id():
    backend = _Backend(PredictionOutput(scores=(0.1, 0.3, 0.2)))
    out = await generate_output(_event(_target("ranking", "uep"), RANKING_INPUT), _Backends(backend), 5.0)
    assert out.error is None and out.output == "b"
    assert out.prediction == Prediction(ranking=["b", "c", "a"], scores=[0.1, 0.3, 0.2])


async def test_a_bad_sample_or_a_bad_answer_is_an_item_error_not_a_crash():
    backend = _Backend(PredictionOutput(probabilities=(0.9, 0.1), label_index=0))
    out = await generate_output(_event(_target(class_names=CLASSES), {"text": "x"}), _Backends(backend), 5.0)
    assert out.output is None and out.prediction is None and backend.requests == []
    assert (out.error.stage, out.error.type) == ("inference", "bad_input") and "input.features" in out.error.message
    out = await generate_output(_event(_target(), {"features": [1.0]}), _Backends(backend), 5.0)  # no class_names
    assert (out.error.type, out.output) == ("bad_output", None) and "spec.class_names" in out.error.message


async def test_a_backend_error_is_the_items_error():
    class Failing(_Backend):
        async def predict(self, request):
            raise BackendError("contract_unsupported", "no such contract")

    out = await generate_output(_event(_target(class_names=CLASSES), {"features": [1.0]}), _Backends(Failing(None)), 5.0)
    assert (out.error.type, out.error.message, out.output) == ("contract_unsupported", "no such contract", None)


# ------------------------------------------------------------------------------------------- creation check


def _bench(slug: str) -> Benchmark:
    return Benchmark(slug=slug, config=next(b for b in catalog.BENCHMARKS if b.slug == slug).config)


def _model(name: str) -> Model:
    m = next(m for m in catalog.LOCAL_MODELS if m.name == name)
    return Model(name=m.name, kind=m.kind, contract=m.contract, spec=m.spec, supports_logprobs=False)


def test_the_benchmarks_tasks():
    tasks = {s: benchmark_task(_bench(s)) for s in ("gsm8k", "mmlu", "mmlu-topic", "breast-cancer", "humaneval-retrieval")}
    assert tasks == {
        "gsm8k": "generation",
        "mmlu": "generation",
        "mmlu-topic": "classification",
        "breast-cancer": "classification",
        "humaneval-retrieval": "ranking",
    }


@pytest.mark.parametrize(
    ("bench", "model", "kind"),
    [
        ("gsm8k", "breast-cancer-logreg", "model_kind_mismatch"),
        ("mmlu-loglik", "mmlu-topic-tfidf", "model_kind_mismatch"),
        ("humaneval-retrieval", "uep-oracle", "model_kind_mismatch"),
        ("humaneval-retrieval", "mmlu-topic-tfidf", "model_kind_mismatch"),
        ("mmlu-topic", "e5-small-ranker", "model_kind_mismatch"),
        ("breast-cancer", "uep-oracle", "model_kind_mismatch"),  # an LLM, and no prompt template to ask it
        ("breast-cancer", "mmlu-topic-tfidf", "model_classes_mismatch"),
        ("mmlu-topic", "breast-cancer-logreg", "model_classes_mismatch"),
    ],
)
def test_a_model_of_the_wrong_kind_is_refused_naming_why(bench, model, kind):
    with pytest.raises(WorkLimitRefused) as exc:
        check_model_fits(_bench(bench), _model(model))
    assert (exc.value.status_code, exc.value.field, exc.value.kind) == (422, "model", kind)
    assert f"{bench!r}" in exc.value.reason and f"{model!r}" in exc.value.reason


@pytest.mark.parametrize(
    ("bench", "model"),
    [
        ("mmlu-topic", "mmlu-topic-tfidf"),
        ("mmlu-topic", "uep-oracle"),  # an LLM evaluated as a classifier: the benchmark has a template
        ("breast-cancer", "breast-cancer-logreg"),
        ("humaneval-retrieval", "e5-small-ranker"),
        ("humaneval-retrieval", "e5-small-embedding"),
        ("gsm8k", "uep-vllm-echo"),
        ("mmlu", "uep-trtllm-echo"),
    ],
)
def test_a_model_of_the_benchmarks_kind_fits(bench, model):
    check_model_fits(_bench(bench), _model(model))


# ------------------------------------------------------------------------------------------- the catalogue


def test_every_local_model_speaks_a_known_contract_with_its_spec():
    for m in catalog.LOCAL_MODELS:
        contract = CONTRACTS.get((m.kind, m.contract))
        assert contract is not None, m.name
        assert all(k in m.spec for k in contract.spec_keys), (m.name, contract.spec_keys)
    by_name = {m.name: m for m in catalog.LOCAL_MODELS}
    assert by_name["mmlu-topic-tfidf"].spec["class_names"] == ["STEM", "humanities", "social sciences", "other"]
    assert by_name["breast-cancer-logreg"].spec == {"class_names": CLASSES, "input": "features", "n_features": 30}


def test_the_classification_and_ranking_benchmarks_items():
    topic = _bench("mmlu-topic")
    items = next(b for b in catalog.BENCHMARKS if b.slug == "mmlu-topic").loader()
    assert len(items) == 1406 and items[0].external_id == "mmlu/abstract_algebra/0"
    assert items[0].reference == {"label": "STEM", "subject": "abstract_algebra"} and "subject" not in items[0].input
    assert render_prompt(topic.config["prompt"]["template"], items[0].input, []) == (
        "Classify the question into one of: STEM, humanities, social sciences, other.\n\n"
        "Question: Find the degree for the given field extension Q(sqrt(2), sqrt(3), sqrt(18)) over Q.\n"
        "A. 0\nB. 4\nC. 2\nD. 6\nCategory:"
    )
    cancer = labelled.load_breast_cancer_test()
    assert len(cancer) == 143 and sum(it.reference["label"] == "malignant" for it in cancer) == 53  # 212 * 0.25
    assert all(len(it.input["features"]) == 30 for it in cancer)
    retrieval = labelled.load_humaneval_retrieval()
    assert len(retrieval) == 164
    for it in retrieval:
        ids = [c["id"] for c in it.input["candidates"]]
        assert len(ids) == len(set(ids)) == 10 and it.reference == {"relevant": [it.external_id]} and it.external_id in ids
    assert retrieval[0].input["query"].startswith("Check if in given list of numbers, are any two numbers closer")
    # the relevant candidate is not always first: the candidates are shuffled
    assert 0 < sum(it.input["candidates"][0]["id"] == it.external_id for it in retrieval) < 40


def test_mmlu_topic_categories_cover_every_subject_and_split_train_from_test():
    subjects = {it.input["subject"] for it in load_mmlu()}
    assert subjects == set(labelled.MMLU_SUBJECT_CATEGORY)
    counts = {c: sum(v == c for v in labelled.MMLU_SUBJECT_CATEGORY.values()) for c in labelled.MMLU_TOPIC_CLASSES}
    assert counts == {"STEM": 19, "humanities": 13, "social sciences": 12, "other": 13}  # lm-eval's mmlu groups
    train = {it.external_id for it in labelled.load_mmlu_topic("train")}
    test = {it.external_id for it in labelled.load_mmlu_topic("test")}
    assert len(train) + len(test) == 14_042 and not train & test
