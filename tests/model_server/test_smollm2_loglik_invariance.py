"""A log-likelihood of the embedded SmolLM2 is a function of its (context, continuation) only: not of the
order of the requests, of the other continuations of the item, of the slot's KV cache, or of whether the
prefix was cached at all (``uep_model_server.loglik``, module docstring).

52 pairs: the four letter choices of 12 MMLU items, the shortest of each of 12 subjects
(lm-evaluation-harness's zero-shot ``mmlu`` prompt, one-token continuations) and the four endings of one HellaSwag item (lm-eval's ``hellaswag``
format, several tokens each: of the first 20 packaged items, the one with the shortest endings, to keep the
test short). The model runs in-process on the real weights; marked ``stack`` like the other
SmolLM2 tests (it loads the 98 MB model).
"""

from __future__ import annotations

import random

import pytest

from uep_common.builtin import datasets
from uep_model_server.io import GenerationRequest, LoglikRequest, LoglikResult
from uep_model_server.llm import LlmSettings, SmolLM2

# minutes of the embedded LLM: make test-slow, not make test
pytestmark = [pytest.mark.stack, pytest.mark.slow]

SAME_ENGINE_TOLERANCE = 1e-4
"""The target for one engine whatever the order or cache state (nats)."""
FROM_SCRATCH_TOLERANCE = 1e-3
"""The target against a from-scratch evaluation of the same engine (nats)."""
VOCAB = 49_152  # SmolLM2's vocabulary (GGUF tokenizer.ggml.tokens)


def mmlu_prompt(item_input: dict) -> str:
    """lm-evaluation-harness's zero-shot ``mmlu`` ``doc_to_text`` (the bench's template)."""
    choices = item_input["choices"]
    return (
        f"The following are multiple choice questions (with answers) about {item_input['subject'].replace('_', ' ')}.\n\n"
        f"{item_input['question'].strip()}\nA. {choices[0]}\nB. {choices[1]}\nC. {choices[2]}\nD. {choices[3]}\nAnswer:"
    )


def _items() -> list[list[LoglikRequest]]:
    """The requests, one list per item (an item's continuations share its context)."""
    by_subject: dict[str, list[str]] = {}
    for it in datasets.load_mmlu_loglik():
        by_subject.setdefault(it.input["subject"], []).append(mmlu_prompt(it.input))
    # the shortest prompt of each of the first 12 subjects: short contexts keep the test short
    mmlu = [
        [LoglikRequest(min(prompts, key=len), " " + letter) for letter in "ABCD"] for prompts in list(by_subject.values())[:12]
    ]
    shortest = min(datasets.load_hellaswag_loglik()[:20], key=lambda it: sum(map(len, it.input["choices"])))
    hellaswag = [LoglikRequest(shortest.input["query"], " " + ending) for ending in shortest.input["choices"]]
    return [*mmlu, hellaswag]


ITEMS = _items()
PAIRS = [r for item in ITEMS for r in item]


@pytest.fixture(scope="module")
def llm():
    model = SmolLM2(LlmSettings(n_ctx_per_slot=1024))
    try:
        yield model
    finally:
        model.close()


@pytest.fixture(scope="module")
def by_item(llm) -> dict[LoglikRequest, LoglikResult]:
    """Each item's continuations in one call, items in dataset order (what the inference service sends)."""
    return {r: res for item in ITEMS for r, res in zip(item, llm.loglikelihood(item), strict=True)}


def _max_delta(results: dict[LoglikRequest, LoglikResult], reference: dict[LoglikRequest, LoglikResult]) -> float:
    assert results.keys() == reference.keys()
    assert all(results[r].is_greedy == reference[r].is_greedy for r in reference)
    return max(abs(results[r].logprob - reference[r].logprob) for r in reference)


def test_the_pairs_cover_one_and_many_token_continuations(llm, by_item):
    assert len(PAIRS) == 52 and len(set(PAIRS)) == 52
    counts = sorted({res.continuation_tokens for res in by_item.values()})
    assert counts[0] == 1 and counts[-1] >= 5, counts


def test_order_and_cache_state_change_no_value(llm, by_item):
    reverse = dict(zip(PAIRS[::-1], llm.loglikelihood(PAIRS[::-1]), strict=True))
    assert _max_delta(reverse, by_item) <= SAME_ENGINE_TOLERANCE

    shuffled = list(PAIRS)
    rng = random.Random(7)
    rng.shuffle(shuffled)
    other = "Once upon a time, in a village by the sea, there lived"
    dirty: dict[LoglikRequest, LoglikResult] = {}
    start, n = 0, 0
    while start < len(shuffled):
        chunk = shuffled[start : start + rng.randint(1, 3)]  # pairs of different items in one call
        # leave the slot holding something else each time: a chat generation, a raw generation of the same
        # context (its prefix in the cache), another item's scoring, or the same pairs just scored
        if n % 4 == 0:
            llm.generate_one(GenerationRequest(other, max_tokens=8))
        elif n % 4 == 1:
            llm.generate_one(GenerationRequest(chunk[0].context, max_tokens=3, chat=False))
        elif n % 4 == 2:
            llm.loglikelihood([shuffled[(start + 5) % len(shuffled)]])
        else:
            llm.loglikelihood(chunk)
        dirty |= dict(zip(chunk, llm.loglikelihood(chunk), strict=True))
        start, n = start + len(chunk), n + 1
    assert _max_delta(dirty, by_item) <= SAME_ENGINE_TOLERANCE


def test_the_values_are_those_of_a_step_by_step_evaluation_from_an_empty_cache(llm, by_item):
    """Two independent paths of the same engine, each token from an empty cache: a forced one-token
    completion per (prefix, token) (``LlamaServerLoglik.step``, the whole method before prefixes were
    shared) for the letters of 3 MMLU items, and an unforced raw completion with the full distribution
    (``n_probs`` = the vocabulary) for every token of the four HellaSwag endings: the values summed over each
    continuation equal the served ones within 1e-3 (measured: equal to the bit)."""

    def distribution(prefix: list[int]) -> dict[int, float]:
        body = {"prompt": prefix, "n_predict": 1, "n_probs": VOCAB, "temperature": 0.0, "post_sampling_probs": False}
        response = llm._server.handle_completions(body | {"cache_prompt": False})
        assert isinstance(response, dict) and "error" not in response, response
        return {t["id"]: t["logprob"] for t in response["choices"][0]["logprobs"]["content"][0]["top_logprobs"]}

    deltas = []
    for item in ITEMS[:3]:  # MMLU: one context, four one-token continuations
        for request in item:
            context_enc, (token,) = llm._loglik.encode_pair(request.context, request.continuation)
            logprob, top, evaluated = llm._loglik.step(context_enc, token)
            assert evaluated == len(context_enc) and top == by_item[request].is_greedy
            deltas.append(abs(by_item[request].logprob - logprob))
    for request in ITEMS[-1]:  # HellaSwag: every token from its own prefix
        context_enc, continuation_enc = llm._loglik.encode_pair(request.context, request.continuation)
        total = sum(distribution(context_enc + continuation_enc[:i])[t] for i, t in enumerate(continuation_enc))
        deltas.append(abs(by_item[request].logprob - total))
    assert len(deltas) == 16 and max(deltas) <= FROM_SCRATCH_TOLERANCE


def test_the_reference_value_of_an_mmlu_choice(llm, by_item):
    """ln P(" B" | the zero-shot prompt of MMLU item 2, abstract algebra) for this GGUF (Q4_1, flash attention
    off): -12.1086, measured from an empty cache and after each of the 81 ways of splitting the 82-token
    context into a cached prefix and an evaluated batch (all bit-identical). With flash attention on, the
    same engine gave -12.5117 from an empty cache and -12.0125 after a one-token re-decode of the context."""
    item = datasets.load_mmlu_loglik()[2]
    request = LoglikRequest(mmlu_prompt(item.input), " B")
    results = [llm.loglikelihood([request])[0] for _ in range(2)]
    results.append(llm.loglikelihood([LoglikRequest(request.context, " A"), request])[1])
    assert {round(r.logprob, 5) for r in results} == {round(results[0].logprob, 5)}
    assert results[0].logprob == pytest.approx(-12.1086, abs=1e-3)
    assert results[0].context_tokens == 82 and results[0].continuation_tokens == 1
