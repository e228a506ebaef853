"""The model-backend registry of the inference service: the registered names are the contract's, the
dispatcher picks by ``target.backend``, the retried kinds come from the backends; and the OpenAI-compatible
client against a fake server (success, chat true/false, each error kind, missing token counts, probe)."""

import json
import uuid

import httpx
import pytest

from uep_common.contract.events import Backend, ModelTarget
from uep_common.tables.models import BACKENDS
from uep_inference.backends import (
    BackendError,
    Backends,
    Generation,
    GenerationRequest,
    ModelBackend,
    check_against_contract,
    register_backend,
    registered_backends,
)
from uep_inference.backends.openai_compatible import OpenAIBackend
from uep_inference.backends.triton import TritonBackend
from uep_inference.service import TRANSIENT, ModelLimits, call_model
from uep_inference.settings import InferenceSettings
from uep_scheduler.capacity import OVERLOAD_ERRORS


def _target(backend: str = "openai_compatible", endpoint: str = "http://llm.test/", **kw) -> ModelTarget:
    return ModelTarget(model_id=uuid.UUID(int=1), name="m", backend=backend, endpoint=endpoint, **kw)


def test_registered_backends_are_the_contracts_names_and_the_tables():
    assert set(registered_backends()) == {b.value for b in Backend} == set(BACKENDS) == {"triton", "openai_compatible"}
    assert registered_backends()["triton"] is TritonBackend and TritonBackend.name == "triton"
    assert all(isinstance(cls(InferenceSettings()), ModelBackend) for cls in registered_backends().values())


def test_a_model_row_takes_only_a_contract_backend():
    from uep_common.tables.models import Model

    assert "ck_models_backend" not in {c.name for c in Model.__table__.constraints}  # checked in code instead
    row = Model(name="m", backend=Backend.openai_compatible, endpoint="http://llm.test")
    assert (row.backend, type(row.backend)) == ("openai_compatible", str)
    with pytest.raises(ValueError, match="backend 'vllm_native' is not one of triton, openai_compatible"):
        Model(name="m", backend="vllm_native", endpoint="http://llm.test")
    with pytest.raises(ValueError, match="backend"):
        row.backend = "nope"
    assert row.backend == "openai_compatible"  # the refused assignment changed nothing


def test_the_contract_check_names_both_differences():
    check_against_contract({"triton", "openai_compatible"})
    with pytest.raises(RuntimeError, match=r"registered only \['vllm'\], in the contract only \['triton'\]"):
        check_against_contract({"openai_compatible", "vllm"})


def test_register_backend_refuses_a_taken_name_and_an_incomplete_class():
    class Other:
        transient_errors = frozenset()

        async def generate(self, request): ...
        async def probe(self, target, timeout_s): ...
        def capacity(self, target): ...
        async def close(self): ...

    with pytest.raises(ValueError, match="'triton' is already registered by TritonBackend"):
        register_backend("triton")(Other)

    class Incomplete:
        async def generate(self, request): ...

    with pytest.raises(TypeError, match="lacks probe, capacity, close, transient_errors"):
        register_backend("incomplete")(Incomplete)
    assert set(registered_backends()) == {"triton", "openai_compatible"}


async def test_the_dispatcher_picks_the_backend_named_by_the_target():
    backends = Backends(InferenceSettings())
    try:
        assert isinstance(backends.for_target(_target("triton", "grpc://x:1")), TritonBackend)
        assert isinstance(backends.for_target(_target("openai_compatible")), OpenAIBackend)
    finally:
        await backends.close()


def test_retried_kinds_come_from_the_backends_and_all_halve_the_adaptive_limit():
    assert {"timeout", "triton_unavailable", "openai_unavailable", "rate_limited"} == TRANSIENT
    assert TRANSIENT <= OVERLOAD_ERRORS  # a new backend's transient kinds must be added to the scheduler's list


def _openai(handler) -> OpenAIBackend:
    return OpenAIBackend(InferenceSettings(openai_api_key="k"), transport=httpx.MockTransport(handler))


def _request(**kw) -> GenerationRequest:
    return GenerationRequest(**{"target": _target(), "prompt": "2+2?", "max_tokens": 8, "timeout_s": 5.0, **kw})


async def test_openai_chat_completion_sends_the_decoding_parameters():
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        usage = {"prompt_tokens": 7, "completion_tokens": 1}
        return httpx.Response(200, json={"choices": [{"message": {"content": "4"}}], "usage": usage})

    backend = _openai(handler)
    gen = await backend.generate(_request(temperature=0.5, stop=tuple("abcde")))
    await backend.close()
    assert gen == Generation("4", 7, 1)
    assert str(sent[0].url) == "http://llm.test/v1/chat/completions" and sent[0].headers["authorization"] == "Bearer k"
    assert json.loads(sent[0].content) == {
        "model": "m",
        "max_tokens": 8,
        "temperature": 0.5,
        "messages": [{"role": "user", "content": "2+2?"}],
        "stop": ["a", "b", "c", "d"],
    }


async def test_openai_raw_completion_without_token_counts():
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"choices": [{"text": " 4"}]})

    backend = _openai(handler)
    gen = await backend.generate(_request(chat=False, target=_target(triton_model_name="served")))
    await backend.close()
    assert gen == Generation(" 4", None, None)
    body = json.loads(sent[0].content)
    assert str(sent[0].url) == "http://llm.test/v1/completions" and body["prompt"] == "2+2?" and body["model"] == "served"
    assert "stop" not in body and "messages" not in body


@pytest.mark.parametrize(
    ("handler", "kind"),
    [
        (lambda r: httpx.Response(400, text="bad"), "openai_http_error"),
        (lambda r: httpx.Response(503, text="busy"), "openai_unavailable"),
        (lambda r: httpx.Response(429, text="slow down"), "rate_limited"),
        (lambda r: httpx.Response(200, json={"choices": []}), "openai_bad_response"),
        (lambda r: (_ for _ in ()).throw(httpx.ConnectError("refused")), "openai_unavailable"),
    ],
)
async def test_openai_failures_are_backend_errors_of_their_kind(handler, kind):
    backend = _openai(handler)
    with pytest.raises(BackendError) as info:
        await backend.generate(_request())
    await backend.close()
    assert info.value.kind == kind


async def test_openai_probe():
    up = _openai(lambda r: httpx.Response(200, json={"data": []}) if r.url.path == "/v1/models" else httpx.Response(404))
    down = _openai(lambda r: httpx.Response(500, text="no"))
    ok, bad = await up.probe(_target(), 1.0), await down.probe(_target(), 1.0)
    await up.close()
    await down.close()
    assert ok.ok is True and ok.kind is None and ok.latency_ms >= 0
    assert (bad.ok, bad.kind, bad.detail) == (False, "openai_http_error", "HTTP 500: no")


async def test_triton_probe_of_an_endpoint_where_nothing_listens():
    backend = TritonBackend()
    probe = await backend.probe(_target("triton", "grpc://127.0.0.1:1"), 2.0)
    await backend.close()
    assert (probe.ok, probe.kind) == (False, "triton_unavailable")


class _Flaky:
    """A backend that fails with ``openai_unavailable`` once, then answers; capacity 1."""

    name, transient_errors = "openai_compatible", frozenset({"openai_unavailable"})

    def __init__(self) -> None:
        self.requests: list[GenerationRequest] = []

    async def generate(self, request: GenerationRequest) -> Generation:
        self.requests.append(request)
        if len(self.requests) == 1:
            raise BackendError("openai_unavailable", "refused")
        return Generation("ok", 1, 1)

    async def probe(self, target, timeout_s): ...

    def capacity(self, target) -> int:
        return 1

    async def close(self) -> None: ...


async def test_call_model_retries_a_backends_transient_kind_inside_its_capacity():
    flaky = _Flaky()

    class OneBackend:
        def for_target(self, target):
            return flaky

    limits = ModelLimits()
    target = _target(temperature=0.3, stop=["x"])
    call = await call_model(target, "p", 4, ["x", "y"], True, OneBackend(), 5.0, limits, max_attempts=3, backoff_s=0)
    assert (call.generation, call.error, call.attempts) == (Generation("ok", 1, 1), None, 2)
    assert flaky.requests[-1] == GenerationRequest(target, "p", 4, 5.0, 0.3, ("x", "y"), True)
    sem = limits.for_target(target, capacity=99)  # the model's semaphore, created at the backend's capacity 1
    await sem.acquire()
    assert sem.locked()
