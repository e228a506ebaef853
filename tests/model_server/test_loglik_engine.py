"""The model server's log-likelihood parts without a server: the mixed batches of the tensor contract, lm-eval's
split of context and continuation, and the llama.cpp engine against a plain ``logits_all`` evaluation of the
same GGUF (the reference: llama-cpp-python's high-level ``Llama.eval`` and ``Llama.scores``, log-softmax in
float64 by hand)."""

import numpy as np
import pytest

from uep_model_server.io import GenerationRequest, GenerationResult, LoglikRequest, LoglikResult, _mixed_batch
from uep_model_server.loglik import encode_pair


def test_a_mixed_batch_answers_each_row_by_its_kind_in_order():
    def generate(requests):
        return [GenerationResult(f"gen:{r.prompt}", 1, 2) for r in requests]

    def loglik(requests):
        return [LoglikResult(-float(len(r.continuation)), len(r.continuation) == 2, 5, 1) for r in requests]

    requests = [GenerationRequest("a"), GenerationRequest("ctx"), GenerationRequest("b"), GenerationRequest("ctx")]
    out = _mixed_batch(generate, loglik, requests, ["", " x", "", " yy"])
    assert out["text_output"].reshape(-1).tolist() == [b"gen:a", b"", b"gen:b", b""]
    assert out["logprob"].reshape(-1).tolist() == [0.0, -2.0, 0.0, -3.0]
    assert out["is_greedy"].reshape(-1).tolist() == [0, 1, 0, 0]
    assert out["prompt_tokens"].reshape(-1).tolist() == [1, 5, 1, 5]
    assert out["completion_tokens"].reshape(-1).tolist() == [2, 1, 2, 1]


def test_encode_pair_moves_the_contexts_trailing_space_to_the_continuation():
    seen = []

    def tokenize(text):
        seen.append(text)
        return [ord(c) for c in text]

    ctx, cont = encode_pair(tokenize, "Answer: ", "B")
    assert seen == ["Answer: B", "Answer:"]  # lm-eval _encode_pair: whole first, then the context
    assert (ctx, cont) == ([ord(c) for c in "Answer:"], [ord(" "), ord("B")])


@pytest.fixture(scope="module")
def engines():
    from llama_cpp import Llama

    from uep_model_server.llm import gguf_path
    from uep_model_server.loglik import LlamaLoglik

    engine = LlamaLoglik(gguf_path(), n_ctx=1024, n_threads=2, n_batch=16)  # small batches: several decode calls
    reference = Llama(model_path=str(gguf_path()), n_ctx=1024, logits_all=True, verbose=False)
    yield engine, reference
    engine.close()


def _reference(llm, context: str, continuation: str) -> tuple[float, bool, int]:
    ctx, cont = encode_pair(lambda t: llm.tokenize(t.encode(), add_bos=True, special=False), context, continuation)
    llm.reset()
    llm.eval(ctx + cont)
    total, greedy = 0.0, True
    for k, token in enumerate(cont):
        row = np.asarray(llm.scores[len(ctx) - 1 + k], dtype=np.float64)
        total += float(row[token] - row.max() - np.log(np.exp(row - row.max()).sum()))
        greedy = greedy and int(row.argmax()) == token
    return total, greedy, len(cont)


def test_the_engine_equals_a_plain_logits_all_evaluation(engines):
    engine, reference = engines
    context = "Paintball: The men speak to one another and lead into running around and playing paint ball. They"
    endings = [" are seen outside again.", " jump into the water.", " pause to speak to one another.", " finish and cheer."]
    # the four endings share the context (cached prefix), then another context, then the first again
    requests = [LoglikRequest(context, e) for e in endings] + [
        LoglikRequest("The sky is", " blue"),
        LoglikRequest(context, endings[0]),
    ]
    got = engine(requests)
    for r, res in zip(requests, got, strict=True):
        lp, greedy, n = _reference(reference, r.context, r.continuation)
        assert (res.is_greedy, res.continuation_tokens) == (greedy, n)
        assert res.logprob == pytest.approx(lp, abs=1e-3)
        assert res.logprob < 0 and res.context_tokens > 0
    assert got[0].logprob == pytest.approx(got[-1].logprob, abs=1e-4)  # the same request after a cache change


def test_the_engine_refuses_what_does_not_fit(engines):
    engine, _ = engines
    with pytest.raises(RuntimeError, match="more than n_ctx 1024"):
        engine.score("word " * 1100, " end")
    with pytest.raises(ValueError, match="no tokens"):
        engine.score("context", "")
