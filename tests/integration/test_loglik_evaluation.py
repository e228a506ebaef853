"""A model that cannot answer log-likelihood requests (its registry row does not declare
``supports_logprobs``) is refused at creation for a log-likelihood benchmark, naming the model field."""


def test_a_model_without_logprobs_is_refused_for_a_loglik_benchmark(gateway):
    r = gateway.post("/v1/evaluations", json={"benchmark": "hellaswag-loglik", "model": "uep-oracle", "sample_limit": 2})
    assert r.status_code == 422, r.text
    (problem,) = r.json()["detail"]
    assert problem["loc"] == ["body", "model"] and problem["type"] == "model_lacks_loglikelihood"
    assert "'hellaswag-loglik' is scored by log-likelihood" in problem["msg"] and "'uep-oracle'" in problem["msg"]
    # a batch names the first model that cannot (the embedded SmolLM2 has no prompt log-probabilities yet)
    r = gateway.post("/v1/evaluations", json={"benchmark": "mmlu-loglik", "models": ["uep-oracle", "smollm2-135m-instruct"]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "models", 0], r.text
