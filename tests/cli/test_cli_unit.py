"""The ``uep`` command line's pure parts: error lines, the --fail-under gate, arm specs, the config file."""

from __future__ import annotations

import os
import stat

import pytest
import typer

from uep_cli.api import error_line, tls_context
from uep_cli.config import credentials, write_file
from uep_cli.follow import gate
from uep_cli.main import _arm


def test_an_api_error_is_one_line_naming_the_field():
    body = {
        "detail": [
            {"loc": ["body", "sample_limit"], "msg": "Input should be greater than or equal to 1", "type": "greater_than_equal"}
        ]
    }
    assert error_line(422, body, "") == "422 body.sample_limit: Input should be greater than or equal to 1 (greater_than_equal)"
    assert error_line(404, {"detail": "Not Found"}, "") == "404 Not Found"
    assert error_line(502, None, "<html>\n bad   gateway</html>") == "502 <html> bad gateway</html>"


def _view(accuracy, low, high, status="completed"):
    return {"id": "e1", "status": status, "summary": {"accuracy": accuracy, "ci_low": low, "ci_high": high}, "progress": {}}


def test_the_gate_uses_the_lower_bound_unless_told_otherwise():
    v = _view(0.667, 0.30, 0.90)
    assert (gate(v, 0.6).passed, gate(v, 0.6).value) == (False, 0.30)
    assert (gate(v, 0.6, on="point").passed, gate(v, 0.6, on="point").value) == (True, 0.667)
    assert gate(v, 0.25).passed is True
    # nothing scored: no score to pass with
    assert gate(_view(None, None, None), 0.0).passed is False
    # a graded metric has no interval: its mean is checked
    graded = {
        "id": "e2",
        "status": "completed",
        "summary": {"accuracy": None, "metric_name": "bleu", "metric_means": {"bleu": 31.5}},
    }
    assert (gate(graded, 30).passed, gate(graded, 30).value) == (True, 31.5)


def test_arm_specs(tmp_path):
    t = tmp_path / "terse.j2"
    t.write_text("Q: {{ question }}\nA:")
    assert _arm("base") == {"name": "base"}
    assert _arm(f"terse:template=@{t},fewshot=0,chat=false,model=uep-oracle") == {
        "name": "terse",
        "prompt_template": "Q: {{ question }}\nA:",
        "fewshot_k": 0,
        "chat_template": False,
        "model": "uep-oracle",
    }
    with pytest.raises(typer.BadParameter, match="template takes @FILE"):
        _arm("x:template=inline")
    with pytest.raises(typer.BadParameter, match="unknown arm key"):
        _arm("x:temperature=1")


def test_the_config_file_is_private_and_the_environment_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("UEP_CONFIG", str(tmp_path / "uep" / "config.json"))
    for k in ("UEP_URL", "UEP_API_KEY", "UEP_TENANT"):
        monkeypatch.delenv(k, raising=False)
    path = write_file({"url": "http://gw:8000/", "session": "s", "csrf": "c"})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    c = credentials()
    assert (c.url, c.api_key, c.session) == ("http://gw:8000", None, "s")
    assert c.headers() == {"Cookie": "uep_session=s; uep_csrf=c", "X-CSRF-Token": "c"}
    monkeypatch.setenv("UEP_API_KEY", "uep_k")
    monkeypatch.setenv("UEP_URL", "http://other")
    c = credentials()
    assert (c.url, c.session, c.headers()) == ("http://other", None, {"Authorization": "Bearer uep_k"})


def test_models_add_options_become_the_registration_body():
    from uep_cli.models import model_body

    assert model_body("m", "http://127.0.0.1:8000") == {
        "name": "m",
        "version": "1",
        "kind": "generation",
        "backend": "triton",
        "endpoint": "http://127.0.0.1:8000",
        "description": "",
        "visibility": "private",
    }
    body = model_body(
        "topics",
        "http://t:8000",
        kind="classification",
        triton_name="uep_mmlu_topic",
        class_names="a, b ,c",
        capacity=4,
        shared=True,
    )
    assert body["spec"] == {"class_names": ["a", "b", "c"]}
    assert (body["triton_model_name"], body["max_in_flight"], body["visibility"]) == ("uep_mmlu_topic", 4, "shared")
    assert model_body("e", "http://t:8000", kind="embedding", dimension=384)["spec"] == {"dimension": 384}


def test_only_a_gateway_reached_without_tls_skips_the_ca_bundle():
    import ssl

    ctx = tls_context("http://127.0.0.1:8080", {})
    assert ctx is not None
    # it still checks hostnames and certificates, against no CA at all: a TLS connection would be refused
    assert (ctx.verify_mode, ctx.check_hostname, ctx.cert_store_stats()["x509_ca"]) == (ssl.CERT_REQUIRED, True, 0)
    assert tls_context("HTTP://gw:8080", {"http_proxy": "http://proxy:3128"}) is not None
    # TLS may be used: httpx's default context, with the CA bundle
    assert tls_context("https://gw.example.com", {}) is None
    assert tls_context("http://gw:8080", {"HTTPS_PROXY": "https://proxy:3128"}) is None
    assert tls_context("http://gw:8080", {"all_proxy": " HTTPS://proxy:3128"}) is None
