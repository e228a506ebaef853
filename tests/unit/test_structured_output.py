"""Structured output: a generation request's JSON schema reaches each backend the way that backend takes it
(the uep contract's ``json_schema`` tensor, vLLM's ``guided_decoding``, TensorRT-LLM's guide tensors, an
OpenAI-compatible ``response_format`` or ``guided_json``), only where the model can honour it, and the answer
says whether it was constrained. The embedded LLM's request body and the model server's tensor decoding too."""

import json
import uuid

import httpx
import numpy as np
import pytest

from uep_common.contract.events import Backend, ModelKind, ModelTarget
from uep_inference.backends import triton_contracts as tc
from uep_inference.backends.base import GenerationRequest
from uep_inference.backends.openai_compatible import OpenAIBackend, structured_output_mode
from uep_inference.settings import InferenceSettings
from uep_model_server.io import GenerationRequest as ServerRequest
from uep_model_server.io import decode_requests, parse_json_schema
from uep_model_server.llm import LlmSettings, SmolLM2

SCHEMA = {"type": "object", "properties": {"overall": {"type": "integer", "enum": [1, 2, 3]}}, "required": ["overall"]}


def _target(backend: str = "triton", contract: str = "uep", **kw) -> ModelTarget:
    return ModelTarget(
        model_id=uuid.uuid4(), name="m", backend=Backend(backend), endpoint="http://llm.test/", kind=ModelKind.generation,
        contract=contract, **kw,
    )  # fmt: skip


def _gen(contract: str, **kw) -> GenerationRequest:
    args = {"prompt": "Q?", "max_tokens": 16, "timeout_s": 5.0, "json_schema": SCHEMA, **kw}
    return GenerationRequest(target=_target("triton", contract), **args)


def _names(tensors) -> dict:
    return {t.name: t.value.tolist() for t in tensors}


def test_the_uep_request_carries_the_schema_only_when_constrained():
    sent = _names(tc.GENERATION["uep"].build(_gen("uep"), True))
    assert json.loads(sent["json_schema"][0][0]) == SCHEMA
    assert "json_schema" not in _names(tc.GENERATION["uep"].build(_gen("uep"), False))
    assert "json_schema" not in _names(tc.GENERATION["uep"].build(_gen("uep", json_schema=None), True))


def test_the_vllm_request_asks_for_guided_decoding():
    params = json.loads(_names(tc.GENERATION["vllm"].build(_gen("vllm"), True))["sampling_parameters"][0])
    assert params == {"max_tokens": 16, "temperature": 0.0, "guided_decoding": {"json": SCHEMA}}
    params = json.loads(_names(tc.GENERATION["vllm"].build(_gen("vllm"), False))["sampling_parameters"][0])
    assert "guided_decoding" not in params


def test_the_trtllm_request_sends_the_guide_type_and_the_schema():
    sent = _names(tc.GENERATION["trtllm"].build(_gen("trtllm"), True))
    assert sent["guided_decoding_guide_type"] == [[b"json_schema"]]
    assert json.loads(sent["guided_decoding_guide"][0][0]) == SCHEMA
    assert "guided_decoding_guide" not in _names(tc.GENERATION["trtllm"].build(_gen("trtllm"), False))


@pytest.mark.parametrize(
    ("contract", "declared", "expected"),
    [
        ("uep", {"text_input", "json_schema"}, True),
        ("uep", {"text_input", "chat"}, False),  # the deterministic test models declare no schema input
        ("vllm", set(), True),
        ("trtllm", {"guided_decoding_guide_type", "guided_decoding_guide"}, True),
        ("trtllm", {"guided_decoding_guide_type"}, False),
        ("nonesuch", {"json_schema"}, False),
    ],
)
def test_can_constrain(contract, declared, expected):
    assert tc.can_constrain(contract, frozenset(declared)) is expected


def _openai(handler) -> OpenAIBackend:
    return OpenAIBackend(InferenceSettings(openai_api_key="k"), transport=httpx.MockTransport(handler))


def _openai_request(**target_kw) -> GenerationRequest:
    return GenerationRequest(
        target=_target("openai_compatible", "openai", **target_kw), prompt="2+2?", max_tokens=8, timeout_s=5.0, json_schema=SCHEMA
    )


def _answer(content: str = '{"overall": 2}') -> httpx.Response:
    return httpx.Response(200, json={"choices": [{"message": {"content": content}}], "usage": {}})


def _recording(sent: list[dict]):
    """A handler that keeps each request's JSON body in ``sent`` and answers ``{"overall": 2}``."""

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return _answer()

    return handle


async def test_openai_sends_the_schema_as_response_format_by_default():
    sent: list[dict] = []
    backend = _openai(_recording(sent))
    gen = await backend.generate(_openai_request())
    await backend.close()
    assert gen.constrained is True and gen.text == '{"overall": 2}'
    assert sent[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True},
    }
    assert "guided_json" not in sent[0]


async def test_openai_guided_json_and_none_modes_from_the_model_spec():
    sent: list[dict] = []
    backend = _openai(_recording(sent))
    vllm = await backend.generate(_openai_request(spec={"structured_output": "guided_json"}))
    plain = await backend.generate(_openai_request(spec={"structured_output": "none"}))
    await backend.close()
    assert sent[0]["guided_json"] == SCHEMA and "response_format" not in sent[0] and vllm.constrained is True
    assert "guided_json" not in sent[1] and "response_format" not in sent[1] and plain.constrained is False
    assert (
        structured_output_mode(_target("openai_compatible", "openai", spec={"structured_output": "bogus"})) == "response_format"
    )


async def test_openai_asks_again_without_the_schema_when_the_server_refuses_it():
    sent: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        if "response_format" in body:
            return httpx.Response(400, json={"error": {"message": "response_format is not supported"}})
        return _answer("Score: 2")

    backend = _openai(handler)
    gen = await backend.generate(_openai_request())
    await backend.close()
    assert [("response_format" in b) for b in sent] == [True, False]
    assert (gen.text, gen.constrained) == ("Score: 2", False)


def test_the_model_server_decodes_the_schema_tensor():
    assert parse_json_schema(b"") is None and parse_json_schema(json.dumps(SCHEMA).encode()) == SCHEMA
    for bad in (b"[1]", b"{nope", b'"x"'):
        with pytest.raises(ValueError, match="json_schema"):
            parse_json_schema(bad)
    with pytest.raises(ValueError, match="longer than"):
        parse_json_schema(json.dumps({"description": "x" * 70_000}).encode())
    rows = decode_requests(
        np.array([[b"a"], [b"b"]], dtype=object), json_schema=np.array([[json.dumps(SCHEMA).encode()], [b""]], dtype=object)
    )
    assert [r.json_schema for r in rows] == [SCHEMA, None]


def test_the_embedded_llm_sends_the_schema_to_llama_cpp():
    llm = SmolLM2.__new__(SmolLM2)  # request_body needs only the settings, not the loaded weights
    llm.settings = LlmSettings()
    chat = llm.request_body(ServerRequest("Q?", json_schema=SCHEMA))
    assert chat["response_format"] == {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA}}
    raw = llm.request_body(ServerRequest("Q?", chat=False, json_schema=SCHEMA))
    assert raw["json_schema"] == SCHEMA and "response_format" not in raw
    assert "response_format" not in llm.request_body(ServerRequest("Q?")) and SmolLM2.structured_output is True
