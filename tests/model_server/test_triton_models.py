"""End-to-end tests of ``uep-model-server`` (a real tritonserver on CPU) plus the built-in dataset loaders.

The server is started ONCE for the module as a subprocess on free ports, in its own session/process group
(killed in teardown), with the models these tests need (:mod:`.server_process`).
"""

from __future__ import annotations

import asyncio
import json
import uuid

import numpy as np
import pytest

from uep_common.builtin.datasets import LICENSES, load_gsm8k, load_humaneval, load_mmlu

from .server_process import model_server

MODELS = ("smollm2_135m_instruct", "uep_oracle", "uep_bench_echo")


# --------------------------------------------------------------------------- dataset loaders (no server)


def test_loader_counts():
    assert len(load_mmlu()) == 14_042
    assert len(load_gsm8k()) == 100
    assert len(load_humaneval()) == 164


def test_loaders_are_cached():
    assert load_mmlu() is load_mmlu()


def test_mmlu_canonical_order():
    items = load_mmlu()
    first = items[0]
    assert first.ordinal == 0
    assert first.external_id == "mmlu/abstract_algebra/0"
    assert first.input["subject"] == "abstract_algebra"
    assert first.input["question"].startswith("Find the degree for the given field extension Q(sqrt(2), sqrt(3)")
    assert first.input["choices"] == ["0", "4", "2", "6"]
    assert first.reference == {"answer": "B"}
    subjects = [it.input["subject"] for it in items]
    assert subjects == sorted(subjects)
    assert len(set(subjects)) == 57
    assert items[-1].external_id == "mmlu/world_religions/170"
    assert all(it.reference["answer"] in "ABCD" and len(it.input["choices"]) == 4 for it in items)
    assert [it.ordinal for it in items] == list(range(len(items)))


def test_gsm8k_first_item():
    first = load_gsm8k()[0]
    assert first.external_id == "gsm8k-test-0013"
    assert first.input["question"].startswith("Melanie is a door-to-door saleswoman.")
    assert first.reference["answer"] == "18"
    assert first.reference["solution"].rstrip().endswith("#### 18")
    assert all(it.reference["answer"].lstrip("-").isdigit() for it in load_gsm8k())


def test_humaneval_order_and_fields():
    items = load_humaneval()
    assert [it.external_id for it in items] == [f"HumanEval/{i}" for i in range(164)]
    first = items[0]
    assert first.input["entry_point"] == "has_close_elements"
    assert set(first.reference) == {"test", "entry_point", "canonical_solution", "prompt"}
    assert first.reference["prompt"] == first.input["prompt"]


def test_licences():
    assert set(LICENSES) == {
        "mmlu",
        "gsm8k",
        "humaneval",
        "hellaswag",
        "truthfulqa_mc1",
        "breast_cancer",
        "support_dialogues",
        "sklearn_tables",
    }
    spdx = {
        "truthfulqa_mc1": "Apache-2.0",
        "breast_cancer": "CC-BY-4.0",
        # written for uep (no registry package ships such conversations); iris (UCI, CC BY 4.0) and wine
        # (UCI, CC BY 4.0) as scikit-learn (BSD-3-Clause) bundles them
        "support_dialogues": "LicenseRef-uep-seed",
        "sklearn_tables": "BSD-3-Clause AND CC-BY-4.0",
    }
    for key, lic in LICENSES.items():
        assert lic.spdx == spdx.get(key, "MIT") and lic.package and lic.source


# --------------------------------------------------------------------------- oracle and contract (in-process)


def test_oracle_rule_on_every_indexed_item():
    from uep_model_server.oracle import ORACLE_MMLU_ITEMS, Oracle

    oracle = Oracle()
    for item in load_mmlu()[:ORACLE_MMLU_ITEMS]:
        right = item.reference["answer"]
        letter = right if item.ordinal % 3 != 2 else "ABCD"[("ABCD".index(right) + 1) % 4]
        assert oracle.answer(_mmlu_prompt(item)) == f"The answer is ({letter}).", item.external_id
    for item in load_gsm8k():
        answer = int(item.reference["answer"]) + (0 if item.ordinal % 3 != 2 else 1)
        assert oracle.answer(f"Q: {item.input['question']}\nA:") == f"Let me compute.\n#### {answer}"
    for item in load_humaneval():
        expected = item.reference["canonical_solution"] if item.ordinal % 3 != 2 else "    return None\n"
        assert oracle.answer(item.input["prompt"]) == expected, item.external_id
    assert oracle.answer(_mmlu_prompt(load_mmlu()[ORACLE_MMLU_ITEMS + 50])) == "I do not know."


def test_contract_decoding():
    from uep_model_server.io import GenerationResult, decode_requests, encode_results, parse_stop

    assert parse_stop(b"") == ()
    assert parse_stop(b'["\\n\\n", "Question:"]') == ("\n\n", "Question:")
    with pytest.raises(ValueError):
        parse_stop(b"[1, 2]")
    reqs = decode_requests(
        np.array([["héllo".encode()], [b"x"]], dtype=object),
        np.array([[16], [-1]], dtype=np.int32),
        np.array([[0.5], [-1.0]], dtype=np.float32),
        np.array([[b'["a"]'], [b""]], dtype=object),
    )
    assert (reqs[0].prompt, reqs[0].max_tokens, reqs[0].temperature, reqs[0].stop) == ("héllo", 16, 0.5, ("a",))
    assert (reqs[1].max_tokens, reqs[1].temperature, reqs[1].stop) == (None, None, ())
    out = encode_results([GenerationResult("é", 3, 1)])
    assert out["text_output"].shape == (1, 1) and out["text_output"][0, 0] == "é".encode()
    assert out["prompt_tokens"].dtype == np.int32 and out["completion_tokens"][0, 0] == 1


# --------------------------------------------------------------------------- server fixture


@pytest.fixture(scope="module")
def server():
    with model_server(MODELS) as running:
        yield running


# --------------------------------------------------------------------------- helpers


def _mmlu_prompt(item) -> str:
    lines = [item.input["question"]] + [f"{letter}. {c}" for letter, c in zip("ABCD", item.input["choices"], strict=False)]
    return "The following is a multiple choice question.\n\n" + "\n".join(lines) + "\nAnswer:"


def _grpc_inputs(prompt: str, max_tokens: int | None = None, stop: list[str] | None = None):
    from tritonclient.grpc import InferInput

    text = InferInput("text_input", [1, 1], "BYTES")
    text.set_data_from_numpy(np.array([[prompt.encode("utf-8")]], dtype=object))
    inputs = [text]
    if max_tokens is not None:
        m = InferInput("max_tokens", [1, 1], "INT32")
        m.set_data_from_numpy(np.array([[max_tokens]], dtype=np.int32))
        inputs.append(m)
    if stop is not None:
        s = InferInput("stop", [1, 1], "BYTES")
        s.set_data_from_numpy(np.array([[json.dumps(stop).encode("utf-8")]], dtype=object))
        inputs.append(s)
    return inputs


def _decode(result) -> tuple[str, int, int]:
    return (
        result.as_numpy("text_output")[0, 0].decode("utf-8"),
        int(result.as_numpy("prompt_tokens")[0, 0]),
        int(result.as_numpy("completion_tokens")[0, 0]),
    )


async def _grpc_infer(server, model: str, prompt: str, **kwargs) -> tuple[str, int, int]:
    import tritonclient.grpc.aio as grpcclient

    client = grpcclient.InferenceServerClient(server["grpc"])
    try:
        return _decode(await client.infer(model, _grpc_inputs(prompt, **kwargs)))
    finally:
        await client.close()


def _http_infer(server, model: str, prompt: str) -> tuple[str, int, int]:
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(server["http"])
    try:
        text = httpclient.InferInput("text_input", [1, 1], "BYTES")
        text.set_data_from_numpy(np.array([[prompt.encode("utf-8")]], dtype=object))
        return _decode(client.infer(model, [text]))
    finally:
        client.close()


# --------------------------------------------------------------------------- server tests


async def test_contract_metadata(server):
    import tritonclient.grpc.aio as grpcclient

    client = grpcclient.InferenceServerClient(server["grpc"])
    try:
        for model in MODELS:
            loglik = model == "smollm2_135m_instruct"  # the one model with a ``loglikelihood`` method
            meta = await client.get_model_metadata(model, as_json=True)
            assert {i["name"]: i["datatype"] for i in meta["inputs"]} == {
                "text_input": "BYTES",
                "max_tokens": "INT32",
                "temperature": "FP32",
                "stop": "BYTES",
                "chat": "INT32",
            } | (
                # SmolLM2 also decodes to a schema and takes a conversation as chat messages
                {"continuation": "BYTES", "json_schema": "BYTES", "messages": "BYTES"} if loglik else {}
            )
            assert {o["name"]: o["datatype"] for o in meta["outputs"]} == {
                "text_output": "BYTES",
                "prompt_tokens": "INT32",
                "completion_tokens": "INT32",
            } | ({"logprob": "FP32", "is_greedy": "INT32"} if loglik else {})
            config = (await client.get_model_config(model, as_json=True))["config"]
            assert int(config["max_batch_size"]) == 8
            assert "dynamic_batching" in config
    finally:
        await client.close()


async def test_oracle_mmlu_correct_and_wrong(server):
    items = load_mmlu()
    text, prompt_words, out_words = await _grpc_infer(server, "uep_oracle", _mmlu_prompt(items[0]))
    assert items[0].reference["answer"] == "B"
    assert text == "The answer is (B)."
    assert prompt_words == len(_mmlu_prompt(items[0]).split()) and out_words == 4
    # ordinal 2 (2 % 3 == 2) is answered wrongly: the next letter
    right = items[2].reference["answer"]
    wrong = "ABCD"[("ABCD".index(right) + 1) % 4]
    text, _, _ = await _grpc_infer(server, "uep_oracle", _mmlu_prompt(items[2]))
    assert text == f"The answer is ({wrong}).", (right, text)


async def test_oracle_gsm8k(server):
    items = load_gsm8k()
    text, _, _ = await _grpc_infer(server, "uep_oracle", f"Question: {items[0].input['question']}\nAnswer:")
    assert text.endswith(f"#### {items[0].reference['answer']}")
    text, _, _ = await _grpc_infer(server, "uep_oracle", items[2].input["question"])
    assert text.endswith(f"#### {int(items[2].reference['answer']) + 1}")


async def test_oracle_humaneval(server):
    items = load_humaneval()
    text, _, _ = await _grpc_infer(server, "uep_oracle", items[0].input["prompt"])
    assert text == items[0].reference["canonical_solution"]
    text, _, _ = await _grpc_infer(server, "uep_oracle", items[2].input["prompt"])
    assert text == "    return None\n"


def test_oracle_over_http(server):
    items = load_mmlu()
    assert _http_infer(server, "uep_oracle", _mmlu_prompt(items[1]))[0] == f"The answer is ({items[1].reference['answer']})."
    assert _http_infer(server, "uep_oracle", "Tell me a joke.")[0] == "I do not know."


async def test_bench_echo(server):
    assert await _grpc_infer(server, "uep_bench_echo", "anything", max_tokens=4) == ("ok", 1, 1)


async def test_smollm2_answers_paris(server):
    prompt = "What is the capital of France? Answer in one word."
    text, prompt_tokens, completion_tokens = await _grpc_infer(server, "smollm2_135m_instruct", prompt, max_tokens=32)
    assert text.strip()
    assert "Paris" in text
    assert prompt_tokens > 0 and completion_tokens > 0
    http_text, _, _ = _http_infer(server, "smollm2_135m_instruct", prompt)
    assert "Paris" in http_text


async def test_smollm2_respects_max_tokens_and_stop(server):
    _, _, completion_tokens = await _grpc_infer(server, "smollm2_135m_instruct", "Count from 1 to 20.", max_tokens=4)
    assert 0 < completion_tokens <= 4
    text, _, _ = await _grpc_infer(server, "smollm2_135m_instruct", "Count from 1 to 20.", max_tokens=64, stop=["5"])
    assert "5" not in text


async def test_a_model_without_loglikelihood_refuses_a_continuation(server):
    from uep_common.contract.events import ModelTarget
    from uep_inference.backends.base import BackendError, GenerationRequest
    from uep_inference.backends.triton import TritonBackend

    backend = TritonBackend()
    target = ModelTarget(model_id=uuid.UUID(int=1), name="uep_oracle", backend="triton", endpoint=f"grpc://{server['grpc']}")
    try:
        with pytest.raises(BackendError) as exc:
            await backend.loglikelihood(GenerationRequest(target, "Q", 1, 10.0, continuations=(" x",)))
        assert exc.value.kind == "loglik_unsupported", exc.value
    finally:
        await backend.close()


async def test_smollm2_answers_loglikelihood_requests(server):
    from uep_common.contract.events import ModelTarget
    from uep_inference.backends.base import BackendError, GenerationRequest
    from uep_inference.backends.triton import TritonBackend

    backend = TritonBackend()
    target = ModelTarget(
        model_id=uuid.UUID(int=2), name="smollm2_135m_instruct", backend="triton", endpoint=f"grpc://{server['grpc']}"
    )
    try:
        out = await backend.loglikelihood(
            GenerationRequest(target, "The capital of France is", 1, 60.0, continuations=(" Paris", " London", " Paris."))
        )
        # a continuation over the 256-token cap fails its call with the model's reason, not as "unsupported"
        with pytest.raises(BackendError) as exc:
            await backend.loglikelihood(GenerationRequest(target, "Say:", 1, 60.0, continuations=(" a" * 300,)))
        assert exc.value.kind == "triton_error"
        assert "log-likelihood request 0: the continuation has 300 tokens, more than the 256" in str(exc.value)
    finally:
        await backend.close()
    paris, london, paris_dot = out.logliks
    # ln P(" Paris" | context) = -0.2643 with flash attention off, as served (tests/model_server/test_smollm2_loglik.py checks it against the
    # unforced distribution); FP32 on the wire
    assert paris.logprob == pytest.approx(-0.2643, abs=1e-3) and paris.is_greedy and paris.n_tokens == 1
    assert london.logprob < paris.logprob and not london.is_greedy
    assert paris_dot.n_tokens == 2 and paris_dot.logprob < paris.logprob
    assert out.prompt_tokens == 5 and out.completion_tokens == 4


async def test_stacked_generation_calls_answer_each_prompt_as_a_call_of_its_own_would(server):
    """20 MMLU prompts at once to the oracle (max_batch_size 8): row batching sends them in calls of up to 8
    rows, and each item gets the oracle's answer to its own question, with its own token counts."""
    from uep_common.contract.events import ModelTarget
    from uep_inference.backends.base import GenerationRequest
    from uep_inference.backends.triton import TritonBackend
    from uep_inference.settings import InferenceSettings

    items = load_mmlu()[:20]
    target = ModelTarget(model_id=uuid.UUID(int=3), name="uep_oracle", backend="triton", endpoint=f"grpc://{server['grpc']}")
    # rows of one call differ in their stop strings and max_tokens (each row carries its own)
    requests = [
        GenerationRequest(target, _mmlu_prompt(it), 64 - i, 10.0, stop=("\n\n",) if i % 3 == 0 else ())
        for i, it in enumerate(items)
    ]
    stacked, alone = TritonBackend(), TritonBackend(InferenceSettings(triton_row_batching=False))
    try:
        # the 20 calls await one read of the model's configuration, then go out together
        together = await asyncio.gather(*(stacked.generate(r) for r in requests))
        each = [await alone.generate(r) for r in requests]
    finally:
        await stacked.close()
        await alone.close()
    assert together == each
    assert together[0].text == "The answer is (B)."  # ordinal 0's oracle answer (test_oracle_mmlu_correct_and_wrong)
    assert len({g.text for g in together}) > 1
    assert together[1].prompt_tokens == len(_mmlu_prompt(items[1]).split())
    assert stacked.batcher is not None and (stacked.batcher.calls, stacked.batcher.rows) == (3, 20)  # 8 + 8 + 4
    assert await stacked.max_rows(target) == 8


async def test_a_model_of_capacity_one_is_called_without_the_batcher(server):
    """A model of capacity 1 (registry max_in_flight) never has two rows at the backend at once: its calls go out
    directly, not through the row batcher (whose turn of the event loop would only delay them)."""
    from uep_common.contract.events import ModelTarget
    from uep_inference.backends.base import GenerationRequest
    from uep_inference.backends.triton import TritonBackend

    item = load_mmlu()[0]
    target = ModelTarget(
        model_id=uuid.UUID(int=3), name="uep_oracle", backend="triton", endpoint=f"grpc://{server['grpc']}", max_concurrency=1
    )
    wide = target.model_copy(update={"max_concurrency": 4})
    backend = TritonBackend()
    try:
        one = await backend.generate(GenerationRequest(target, _mmlu_prompt(item), 64, 10.0))
        assert backend.batcher is not None and backend.batcher.calls == 0
        four = await backend.generate(GenerationRequest(wide, _mmlu_prompt(item), 64, 10.0))
        assert backend.batcher.calls == 1  # capacity 4: through the batcher (a lone row, sent alone)
    finally:
        await backend.close()
    assert one == four and one.text == "The answer is (B)."  # test_oracle_mmlu_correct_and_wrong
