"""Models built on their first request (:mod:`uep_model_server.lazy`): the stand-in without a server, then a
real ``uep-model-server`` that builds a model only when a request reaches it and drops it after its idle period."""

from __future__ import annotations

import time

import numpy as np
import pytest

from uep_model_server.io import GenerationRequest, GenerationResult, bind_text_model
from uep_model_server.lazy import LazyModel

from .server_process import model_server


class _Recorder:
    """A text model that counts its instances and closes."""

    built = 0
    closed = 0
    structured_output = True
    N_CLASSES = 3

    def __init__(self) -> None:
        type(self).built += 1
        self.label = "built"

    def __call__(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        return [GenerationResult(r.prompt.upper(), 1, 1) for r in requests]

    def double(self, x: int) -> int:
        return 2 * x

    def run(self, during) -> None:
        during()

    def close(self) -> None:
        type(self).closed += 1


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def recorder() -> type[_Recorder]:
    _Recorder.built = _Recorder.closed = 0
    return _Recorder


class _FakeTriton:
    def __init__(self) -> None:
        self.bound: dict[str, dict] = {}

    def bind(self, **kwargs) -> None:
        self.bound[kwargs["model_name"]] = kwargs


def test_binding_reads_the_class_and_builds_nothing(recorder):
    lazy = LazyModel("m", recorder, recorder)
    triton = _FakeTriton()
    bind_text_model(triton, "m", lazy)
    assert recorder.built == 0 and not lazy.loaded
    assert lazy.N_CLASSES == 3  # a class attribute, answered without building
    names = [t.name for t in triton.bound["m"]["inputs"]]
    assert "json_schema" in names  # structured_output read from the class
    assert "continuation" not in names  # the class has no loglikelihood method
    with pytest.raises(AttributeError):
        _ = lazy.label  # an instance attribute: unknown until the model is built


def test_the_first_call_builds_the_model_once(recorder):
    lazy = LazyModel("m", recorder, recorder)
    request = GenerationRequest(prompt="abc")
    assert lazy([request]) == [GenerationResult("ABC", 1, 1)]
    assert lazy.double(21) == 42
    assert (recorder.built, lazy.loads, lazy.loaded) == (1, 1, True)
    assert lazy.label == "built"  # the built model's own attributes now


def test_an_idle_model_is_dropped_and_built_again(recorder):
    clock = _Clock()
    lazy = LazyModel("m", recorder, recorder, idle_s=60.0, clock=clock)
    assert lazy.double(1) == 2
    clock.now += 59.0
    assert lazy.unload_if_idle() is False  # used 59 s ago
    clock.now += 1.0
    assert lazy.unload_if_idle() is True
    assert (lazy.loaded, recorder.closed) == (False, 1)
    assert lazy.double(2) == 4
    assert (recorder.built, lazy.loads) == (2, 2)


def test_a_model_in_use_or_kept_forever_is_never_dropped(recorder):
    clock = _Clock()
    lazy = LazyModel("m", recorder, recorder, idle_s=10.0, clock=clock)

    seen = []

    def during() -> None:  # time passes while a request runs
        clock.now += 1000.0
        seen.append(lazy.unload_if_idle())

    lazy.run(during)
    assert seen == [False] and lazy.loaded  # in progress: kept
    clock.now += 10.0
    assert lazy.unload_if_idle() is True  # idle for 10 s after it ended
    forever = LazyModel("k", recorder, recorder, idle_s=0.0, clock=clock)
    forever.load()
    clock.now += 1e9
    assert forever.unload_if_idle() is False


def test_a_failed_build_reaches_the_request_and_the_next_one_tries_again():
    calls = []

    def factory() -> _Recorder:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("weights missing")
        return _Recorder()

    lazy = LazyModel("m", _Recorder, factory)
    with pytest.raises(RuntimeError, match="weights missing"):
        lazy.double(1)
    assert lazy.double(3) == 6 and len(calls) == 2


def test_every_served_model_binds_without_being_built():
    from uep_model_server.main import DEFAULT_MODELS, lazy_model, resolve_models

    triton = _FakeTriton()
    for name in resolve_models(DEFAULT_MODELS):
        model = lazy_model(name)
        bind = getattr(model.model_class, "bind", None)
        if bind is not None:
            bind(model, triton, name)
        else:
            bind_text_model(triton, name, model)
        assert not model.loaded, name
    assert set(triton.bound) == set(resolve_models(DEFAULT_MODELS))
    outputs = {t.name: t.shape for t in triton.bound["uep_mmlu_topic"]["outputs"]}
    assert outputs["probabilities"] == (4,)
    assert {t.name: t.shape for t in triton.bound["uep_breast_cancer"]["outputs"]}["probabilities"] == (2,)


# --------------------------------------------------------------------------- a real server


def _wait_for(server, text: str, timeout_s: float = 60.0) -> str:
    deadline = time.monotonic() + timeout_s
    while text not in server["log"]():
        assert time.monotonic() < deadline, f"{text!r} not in the log:\n{server['log']()[-3000:]}"
        time.sleep(0.2)
    return server["log"]()


def _oracle_answer(server) -> str:
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(server["http"])
    try:
        text = httpclient.InferInput("text_input", [1, 1], "BYTES")
        text.set_data_from_numpy(np.array([[b"What is 2+2?"]], dtype=object))
        return client.infer("uep_oracle", [text]).as_numpy("text_output")[0, 0].decode()
    finally:
        client.close()


def test_the_server_builds_a_model_on_its_first_request_and_drops_it_when_idle():
    with model_server(("uep_oracle", "uep_bench_echo"), env={"UEP_TRITON_UNLOAD_IDLE_S": "2"}) as server:
        log = _wait_for(server, "READY in")
        assert "each built on its first request" in log
        assert "model uep_oracle loaded" not in log and "model uep_bench_echo loaded" not in log
        first = _oracle_answer(server)
        log = _wait_for(server, "model uep_oracle loaded on first use")
        assert log.count("model uep_oracle loaded on first use") == 1
        _wait_for(server, "model uep_oracle unloaded after 2 s idle")
        assert _oracle_answer(server) == first  # built again, same answer
        log = _wait_for(server, "model uep_oracle loaded on first use in", timeout_s=1)
        assert log.count("model uep_oracle loaded on first use") == 2
        assert "model uep_bench_echo loaded" not in log  # never asked: never built
