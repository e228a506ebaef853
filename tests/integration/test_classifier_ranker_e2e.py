"""A classifier and a ranker evaluated end to end on their built-in benchmarks: the scikit-learn breast cancer
classifier on ``breast-cancer`` (143 rows) and the e5 ranker on ``humaneval-retrieval`` (its first 24 queries),
through the gateway, scheduler, inference, scorer and reporter of the test stack.

The two models run on a model server of this module's own (``uep-model-server --models
breast_cancer,e5_rank``; the stack's Triton keeps its default models) and are registered with their kind,
contract and spec. Right values: the predictions stored in ``sample_results.prediction`` are what the same
model answers to a direct tritonclient call, and the classifier's accuracy is scikit-learn's on the same split
(the pipeline trained here: 137/143).
"""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest
from sqlalchemy import text

from model_server.server_process import model_server
from uep_common.builtin.labelled import breast_cancer_split, load_breast_cancer_test, load_humaneval_retrieval

from .helpers import db_rows, submit, wait_done


@pytest.fixture(scope="module")
def own_triton():
    with model_server(("uep_breast_cancer", "uep_e5_rank")) as running:
        yield running


def _register(db, endpoint: str, triton_model_name: str, kind: str, contract: str, spec: dict) -> str:
    name = f"test-{triton_model_name}-{uuid.uuid4().hex[:8]}"
    with db.begin() as c:
        c.execute(
            text(
                "INSERT INTO models (id, name, version, description, backend, endpoint, triton_model_name, "
                "decoding_defaults, supports_logprobs, max_in_flight, kind, contract, spec) VALUES (:id, :n, '1', "
                "'registered by a test', 'triton', :ep, :tm, '{}', false, 16, :kind, :contract, CAST(:spec AS jsonb))"
            ),
            {
                "id": uuid.uuid4(),
                "n": name,
                "ep": endpoint,
                "tm": triton_model_name,
                "kind": kind,
                "contract": contract,
                "spec": json.dumps(spec),
            },
        )
    return name


def _stored(db, evaluation_id: str) -> dict[str, dict]:
    """external_id -> {prediction, output, is_correct, error} of each stored result."""
    rows = db_rows(
        db,
        "SELECT s.external_id, r.prediction, r.output, r.is_correct, r.error FROM sample_results r "
        "JOIN samples s ON s.id = r.sample_id WHERE r.evaluation_id = :e",
        e=evaluation_id,
    )
    return {r[0]: {"prediction": r[1], "output": r[2], "is_correct": r[3], "error": r[4]} for r in rows}


def _infer(grpc_url: str, model: str, inputs: list[tuple[str, np.ndarray, str]], outputs: list[str]) -> dict:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(grpc_url)
    try:
        tensors = []
        for name, value, dtype in inputs:
            t = grpcclient.InferInput(name, list(value.shape), dtype)
            t.set_data_from_numpy(value)
            tensors.append(t)
        result = client.infer(model, tensors, outputs=[grpcclient.InferRequestedOutput(o) for o in outputs])
        return {o: result.as_numpy(o) for o in outputs}
    finally:
        client.close()


def test_the_breast_cancer_classifier_end_to_end(gateway, db, own_triton):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    spec = {"class_names": ["malignant", "benign"], "input": "features", "n_features": 30}
    name = _register(db, f"grpc://{own_triton['grpc']}", "uep_breast_cancer", "classification", "features", spec)
    evaluation_id = submit(gateway, benchmark="breast-cancer", model=name)
    done = wait_done(gateway, evaluation_id, timeout_s=180)
    assert done["status"] == "completed", done
    stored = _stored(db, evaluation_id)
    items = load_breast_cancer_test()
    assert len(stored) == len(items) == 143 and all(r["error"] is None for r in stored.values())

    split = breast_cancer_split()
    local = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(split.x_train, split.y_train)
    expected = [split.class_names[i] for i in local.predict(split.x_test)]
    assert [stored[it.external_id]["prediction"]["label"] for it in items] == expected
    right = sum(stored[it.external_id]["is_correct"] for it in items)
    assert right == sum(e == it.reference["label"] for e, it in zip(expected, items, strict=True)) == 137  # 0.958

    for it in items[:5]:  # the stored answer is the model's own, to the float32 it computes in
        direct = _infer(
            own_triton["grpc"],
            "uep_breast_cancer",
            [("features", np.array([it.input["features"]], dtype=np.float32), "FP32")],
            ["probabilities", "label"],
        )
        got = stored[it.external_id]
        assert got["prediction"]["label"] == got["output"] == spec["class_names"][int(direct["label"][0, 0])]
        probabilities = dict(zip(spec["class_names"], direct["probabilities"][0].tolist(), strict=True))
        assert got["prediction"]["probabilities"] == pytest.approx(probabilities, abs=1e-6)  # JSONB: keys unordered


def test_the_e5_ranker_end_to_end(gateway, db, own_triton):
    name = _register(db, f"grpc://{own_triton['grpc']}", "uep_e5_rank", "ranking", "uep", {})
    evaluation_id = submit(gateway, benchmark="humaneval-retrieval", model=name, sample_limit=24)
    done = wait_done(gateway, evaluation_id, timeout_s=300)
    assert done["status"] == "completed", done
    stored = _stored(db, evaluation_id)
    items = load_humaneval_retrieval()[:24]
    assert sorted(stored) == sorted(it.external_id for it in items)
    for it in items:
        texts = [c["text"] for c in it.input["candidates"]]
        direct = _infer(
            own_triton["grpc"],
            "uep_e5_rank",
            [
                ("query", np.array([[it.input["query"].encode()]], dtype=object), "BYTES"),
                ("candidates", np.array([[t.encode() for t in texts]], dtype=object), "BYTES"),
            ],
            ["scores"],
        )["scores"][0]
        ids = [c["id"] for c in it.input["candidates"]]
        ranking = [ids[i] for i in sorted(range(len(ids)), key=lambda i: -direct[i])]
        got = stored[it.external_id]
        assert got["prediction"]["scores"] == pytest.approx(direct.tolist(), abs=1e-6)
        assert got["prediction"]["ranking"] == ranking and got["output"] == ranking[0]
        assert got["is_correct"] == (ranking[0] == it.external_id)  # ndcg's verdict: the relevant one is first


def test_a_model_of_another_kind_is_refused_at_creation(gateway):
    # breast-cancer has no prompt template: an LLM cannot be asked; gsm8k is a generation benchmark
    for benchmark, model, why in (
        ("breast-cancer", "uep-oracle", "'breast-cancer' is a classification benchmark"),
        ("gsm8k", "breast-cancer-logreg", "'gsm8k' is a generation benchmark"),
        ("mmlu-topic", "breast-cancer-logreg", "without ['STEM', 'humanities', 'social sciences', 'other']"),
    ):
        r = gateway.post("/v1/evaluations", json={"benchmark": benchmark, "model": model, "sample_limit": 2})
        assert r.status_code == 422, r.text
        (problem,) = r.json()["detail"]
        kind = "model_classes_mismatch" if benchmark == "mmlu-topic" else "model_kind_mismatch"
        assert problem["loc"] == ["body", "model"] and problem["type"] == kind and why in problem["msg"], problem
