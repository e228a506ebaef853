"""The embedded LLM's settings from the environment (``uep_model_server.llm.LlmSettings.from_env``)."""

from __future__ import annotations

import pytest

from uep_model_server.llm import LlmSettings


def test_poll_defaults_to_llama_cpps_own_and_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UEP_LLM_POLL", raising=False)
    assert LlmSettings.from_env().poll == 50  # llama.cpp's own default poll
    monkeypatch.setenv("UEP_LLM_POLL", "0")
    assert LlmSettings.from_env().poll == 0


@pytest.mark.parametrize("raw", ["101", "-1", "busy"])
def test_a_poll_outside_0_to_100_is_refused_by_name(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("UEP_LLM_POLL", raw)
    with pytest.raises(ValueError, match="UEP_LLM_POLL"):
        LlmSettings.from_env()
