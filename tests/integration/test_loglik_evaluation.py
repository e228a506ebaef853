"""A model that cannot answer log-likelihood requests (its registry row does not declare
``supports_logprobs``) is refused at creation for a log-likelihood benchmark, naming the model field; the
embedded SmolLM2 answers them through the whole stack."""

import pytest

from .helpers import all_results, submit, wait_done


def test_a_model_without_logprobs_is_refused_for_a_loglik_benchmark(gateway):
    r = gateway.post("/v1/evaluations", json={"benchmark": "hellaswag-loglik", "model": "uep-oracle", "sample_limit": 2})
    assert r.status_code == 422, r.text
    (problem,) = r.json()["detail"]
    assert problem["loc"] == ["body", "model"] and problem["type"] == "model_lacks_loglikelihood"
    assert "'hellaswag-loglik' is scored by log-likelihood" in problem["msg"] and "'uep-oracle'" in problem["msg"]
    # a batch names the first model that cannot (the embedded SmolLM2 can: it declares supports_logprobs)
    r = gateway.post("/v1/evaluations", json={"benchmark": "mmlu-loglik", "models": ["smollm2-135m-instruct", "uep-oracle"]})
    assert r.status_code == 422 and len(r.json()["detail"]) == 1, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "models", 1], r.text


def test_the_embedded_llm_scores_mmlu_by_loglikelihood(gateway):
    """Two MMLU items scored by log-likelihood through the stack: the per-choice values are the ones the
    same model gives in this process (``SmolLM2.loglikelihood`` on lm-eval's MMLU prompt, zero-shot)."""
    import json

    from uep_common.builtin import catalog
    from uep_common.prompting.prompts import render_prompt
    from uep_model_server.io import LoglikRequest
    from uep_model_server.llm import SmolLM2

    evaluation_id = submit(gateway, benchmark="mmlu-loglik", model="smollm2-135m-instruct", sample_limit=2, sampling="first")
    final = wait_done(gateway, evaluation_id, timeout_s=180)
    assert final["status"] == "completed" and final["summary"]["errors"] == 0, final
    assert final["summary"]["metric_name"] == "loglik_multiple_choice"
    bench = next(b for b in catalog.BENCHMARKS if b.slug == "mmlu-loglik")
    items = bench.loader()
    llm = SmolLM2()
    try:
        for r in all_results(gateway, evaluation_id):
            context = render_prompt(bench.config["prompt"]["template"], items[r["sample_ordinal"]].input, [])
            direct = llm.loglikelihood([LoglikRequest(context, f" {letter}") for letter in "ABCD"])
            output = json.loads(r["output"])
            assert r["prompt_tokens"] == direct[0].context_tokens and output["n_tokens"] == [1, 1, 1, 1]
            assert output["logprobs"] == [pytest.approx(d.logprob, abs=1e-3) for d in direct]
            assert output["is_greedy"] == [d.is_greedy for d in direct]
            best = max(range(4), key=lambda i: direct[i].logprob)
            assert r["extracted"] == str(best) and r["is_correct"] == (items[r["sample_ordinal"]].reference["gold"] == best)
    finally:
        llm.close()
