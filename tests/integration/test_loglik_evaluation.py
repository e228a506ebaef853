"""A log-likelihood MMLU evaluation of the embedded SmolLM2 through the whole stack (gateway, scheduler,
inference over Triton, scorer, reporter) gives the acc and acc_norm computed directly from the model with
llama.cpp (llama-cpp-python, ``logits_all``) on the same prompts; and a model that cannot answer
log-likelihood requests is refused at creation."""

import functools
import json

import numpy as np
import pytest

from uep_common.builtin import catalog
from uep_common.prompts import render_prompt

from .helpers import all_results, submit, wait_done

N_ITEMS = 8


@functools.cache
def _llama():
    from llama_cpp import Llama

    from uep_model_server.llm import gguf_path

    return Llama(model_path=str(gguf_path()), n_ctx=1024, logits_all=True, verbose=False)


def _direct_logprobs(context: str, continuations: list[str]) -> list[float]:
    """Σ ln softmax of each continuation token (lm-eval's split of context and continuation), float64."""
    from uep_model_server.loglik import encode_pair

    llm = _llama()
    out = []
    for continuation in continuations:
        ctx, cont = encode_pair(lambda t: llm.tokenize(t.encode(), add_bos=True, special=False), context, continuation)
        llm.reset()
        llm.eval(ctx + cont)
        total = 0.0
        for k, token in enumerate(cont):
            row = np.asarray(llm.scores[len(ctx) - 1 + k], dtype=np.float64)
            total += float(row[token] - row.max() - np.log(np.exp(row - row.max()).sum()))
        out.append(total)
    return out


def test_mmlu_loglik_of_the_embedded_model_equals_llama_cpp(gateway):
    evaluation_id = submit(
        gateway, benchmark="mmlu-loglik", model="smollm2-135m-instruct", sample_limit=N_ITEMS, sampling="first"
    )
    final = wait_done(gateway, evaluation_id, timeout_s=120)
    assert final["status"] == "completed" and final["summary"]["errors"] == 0, final
    results = all_results(gateway, evaluation_id)
    bench = next(b for b in catalog.BENCHMARKS if b.slug == "mmlu-loglik")
    items = bench.loader()[:N_ITEMS]
    accs, acc_norms = [], []
    for item, result in zip(items, results, strict=True):
        assert result["sample_ordinal"] == item.ordinal and result["metric_name"] == "loglik_multiple_choice"
        lls = _direct_logprobs(render_prompt(bench.config["prompt"]["template"], item.input, []), [" A", " B", " C", " D"])
        gold = item.reference["gold"]
        # lm-eval: pred = argmax(lls); pred_norm = argmax(lls / len(choice)), every choice one character long
        acc, acc_norm = float(int(np.argmax(lls)) == gold), float(int(np.argmax(np.array(lls) / 1.0)) == gold)
        accs.append(acc)
        acc_norms.append(acc_norm)
        assert (result["metrics"]["acc"], result["metrics"]["acc_norm"]) == (acc, acc_norm), (result, lls)
        served = json.loads(result["output"])["logprobs"]
        assert served == pytest.approx(lls, abs=1e-3)
        assert result["prompt_tokens"] > 20 and result["completion_tokens"] == 4  # " A".." D": one token each
    summary = final["summary"]
    assert summary["accuracy"] == pytest.approx(sum(accs) / N_ITEMS)
    assert summary["metric_means"]["acc_norm"] == pytest.approx(sum(acc_norms) / N_ITEMS)


def test_a_model_without_logprobs_is_refused_for_a_loglik_benchmark(gateway):
    r = gateway.post("/v1/evaluations", json={"benchmark": "hellaswag-loglik", "model": "uep-oracle", "sample_limit": 2})
    assert r.status_code == 422, r.text
    (problem,) = r.json()["detail"]
    assert problem["loc"] == ["body", "model"] and problem["type"] == "model_lacks_loglikelihood"
    assert "'hellaswag-loglik' is scored by log-likelihood" in problem["msg"] and "'uep-oracle'" in problem["msg"]
    r = gateway.post("/v1/evaluations", json={"benchmark": "mmlu-loglik", "models": ["smollm2-135m-instruct", "uep-oracle"]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "models", 1], r.text
