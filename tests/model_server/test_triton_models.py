"""End-to-end tests of ``uep-model-server`` (a real tritonserver on CPU) plus the built-in dataset loaders.

The server is started ONCE for the module as a subprocess on free ports, in its own session/process group
(killed in teardown), with the models these tests need.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import numpy as np
import pytest

from uep_common.builtin.datasets import LICENSES, load_gsm8k, load_humaneval, load_mmlu

READY_TIMEOUT_S = 120.0
MODELS = ("smollm2_135m_instruct", "uep_oracle", "uep_bench_echo")
SERVER_BIN = Path(sys.executable).with_name("uep-model-server")


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
    assert set(LICENSES) == {"mmlu", "gsm8k", "humaneval", "hellaswag", "truthfulqa_mc1"}
    for key, lic in LICENSES.items():
        assert lic.spdx == ("Apache-2.0" if key == "truthfulqa_mc1" else "MIT") and lic.package and lic.source


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


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


@pytest.fixture(scope="module")
def server():
    http_port, grpc_port, metrics_port = _free_ports(3)
    # the server writes to it for the whole module; the fixture's finally closes and removes it
    log = tempfile.NamedTemporaryFile(prefix="uep-model-server-", suffix=".log", delete=False)  # noqa: SIM115
    cmd = [
        str(SERVER_BIN),
        "--http-port",
        str(http_port),
        "--grpc-port",
        str(grpc_port),
        "--metrics-port",
        str(metrics_port),
        "--models",
        ",".join(MODELS),
    ]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def log_tail() -> str:
        return Path(log.name).read_text(errors="replace")[-4000:]

    try:
        base = f"http://127.0.0.1:{http_port}"
        urls = [f"{base}/v2/health/ready"] + [f"{base}/v2/models/{m}/ready" for m in MODELS]
        deadline = started + READY_TIMEOUT_S
        while not all(_http_ok(u) for u in urls):
            if proc.poll() is not None:
                pytest.fail(f"uep-model-server exited with {proc.returncode} before ready:\n{log_tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"uep-model-server not ready after {READY_TIMEOUT_S:.0f} s:\n{log_tail()}")
            time.sleep(0.25)
        ready_s = time.monotonic() - started
        print(f"\nuep-model-server ready in {ready_s:.1f} s", file=sys.stderr)
        yield {"http": f"127.0.0.1:{http_port}", "grpc": f"127.0.0.1:{grpc_port}", "ready_s": ready_s, "proc": proc}
    finally:
        exited_cleanly = None
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                exited_cleanly = proc.wait(timeout=30) == 0
            except subprocess.TimeoutExpired:
                exited_cleanly = False
        # tritonserver and its backend stubs must go with the parent; give them a moment, then force.
        deadline = time.monotonic() + 10
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        leftovers = _group_alive(proc.pid)
        if leftovers:
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.wait(timeout=10)
        text = log_tail()
        log.close()
        os.unlink(log.name)
        assert exited_cleanly in (None, True), f"SIGTERM did not stop the server cleanly:\n{text}"
        assert not leftovers, "processes of the server's group survived SIGTERM"


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
            meta = await client.get_model_metadata(model, as_json=True)
            assert {i["name"]: i["datatype"] for i in meta["inputs"]} == {
                "text_input": "BYTES",
                "max_tokens": "INT32",
                "temperature": "FP32",
                "stop": "BYTES",
                "chat": "INT32",
            }
            assert {o["name"]: o["datatype"] for o in meta["outputs"]} == {
                "text_output": "BYTES",
                "prompt_tokens": "INT32",
                "completion_tokens": "INT32",
            }
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
    from uep_common.events import ModelTarget
    from uep_inference.backends.base import BackendError, GenerationRequest
    from uep_inference.backends.triton import TritonBackend

    backend = TritonBackend()
    for name in ("uep_oracle", "smollm2_135m_instruct"):  # neither takes the continuation input
        target = ModelTarget(model_id=uuid.UUID(int=1), name=name, backend="triton", endpoint=f"grpc://{server['grpc']}")
        try:
            with pytest.raises(BackendError) as exc:
                await backend.loglikelihood(GenerationRequest(target, "Q", 1, 10.0, continuations=(" x",)))
            assert exc.value.kind == "loglik_unsupported", exc.value
        finally:
            await backend.close()
