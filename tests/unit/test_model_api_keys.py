"""A registered model's API key reaches its OpenAI-compatible endpoint, and nothing else does.

The key is encrypted at registration (uep_common.registry.model_registry.encrypt_api_key), carried encrypted in the
ModelTarget, decrypted only by the inference service (uep_inference.backends.api_keys) and sent as the bearer token; a
real HTTP server on 127.0.0.1 records the Authorization header each request arrived with."""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography.fernet import Fernet

from uep_common.contract.events import ModelTarget
from uep_common.registry.model_registry import encrypt_api_key
from uep_inference.backends.api_keys import ApiKeys
from uep_inference.backends.base import BackendError, GenerationRequest
from uep_inference.backends.openai_compatible import OpenAIBackend
from uep_inference.settings import InferenceSettings

SITE_KEY = Fernet.generate_key().decode()


def _target(url: str = "http://127.0.0.1:9", **kw: object) -> ModelTarget:
    return ModelTarget(model_id=uuid.uuid4(), name="m", backend="openai_compatible", endpoint=url, **kw)


def test_a_stored_key_is_decrypted_with_the_site_key() -> None:
    token = encrypt_api_key("sk-tenant-secret", SITE_KEY).decode()
    keys = ApiKeys(SITE_KEY, default="sk-site-default")
    assert keys.for_target(_target(api_key_encrypted=token)) == "sk-tenant-secret"
    assert keys.for_target(_target()) == "sk-site-default"  # a site model without a key of its own: the site's
    assert keys.for_target(_target(tenant_model=True)) is None  # a tenant's endpoint never gets the site's key


def test_another_site_key_or_none_fails_the_call_without_leaking() -> None:
    token = encrypt_api_key("sk-tenant-secret", SITE_KEY).decode()
    for secret in (Fernet.generate_key().decode(), None):
        with pytest.raises(BackendError) as err:
            ApiKeys(secret, default=None).for_target(_target(api_key_encrypted=token))
        assert err.value.kind == "api_key_unavailable"
        assert "sk-tenant-secret" not in str(err.value) and token not in str(err.value)


def test_a_key_reference_reads_only_its_model_key_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UEP_MODEL_KEY_VENDOR", "sk-vendor")
    keys = ApiKeys(None, default=None)
    assert keys.for_target(_target(api_key_ref="UEP_MODEL_KEY_VENDOR")) == "sk-vendor"
    with pytest.raises(BackendError, match="UEP_MODEL_KEY_MISSING is not set"):
        keys.for_target(_target(api_key_ref="UEP_MODEL_KEY_MISSING"))
    with pytest.raises(ValueError, match="api_key_ref"):  # the contract admits no other variable
        _target(api_key_ref="UEP_INTERNAL_TOKEN")


def test_the_target_never_shows_the_token() -> None:
    token = encrypt_api_key("sk-x", SITE_KEY).decode()
    assert token not in repr(_target(api_key_encrypted=token))


async def test_the_endpoint_receives_the_models_own_key() -> None:
    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # the name http.server dispatches to
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(self.headers.get("Authorization"))
            body = json.dumps({"choices": [{"message": {"content": "4"}}], "usage": {}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        settings = InferenceSettings(model_secret_key=SITE_KEY, openai_api_key="sk-site-default")
        backend = OpenAIBackend(settings)
        own = _target(url, api_key_encrypted=encrypt_api_key("sk-tenant-secret", SITE_KEY).decode())
        for target in (own, _target(url)):
            request = GenerationRequest(target=target, prompt="2+2?", max_tokens=4, temperature=0.0, stop=(), timeout_s=5.0)
            assert (await backend.generate(request)).text == "4"
    finally:
        server.shutdown()
    assert seen == ["Bearer sk-tenant-secret", "Bearer sk-site-default"]
