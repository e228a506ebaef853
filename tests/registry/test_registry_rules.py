"""The registry's pure rules: the contract tables and the metadata check (uep_common.contract.model_contracts), the
registration rules, refused addresses and API-key encryption (uep_common.registry.model_registry), and the probe of an
OpenAI-compatible endpoint against a real HTTP server on 127.0.0.1.

The Triton metadata below has the shape KServe v2's ``GET /v2/models/{name}`` answers (inputs/outputs with
``name``, ``datatype``, ``shape``); a batching model (``max_batch_size`` > 0) reports the batch as a leading -1.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography.fernet import Fernet, InvalidToken

from uep_common.contract.events import ModelKind
from uep_common.contract.model_contracts import CONTRACTS, check_metadata, contract_for
from uep_common.registry.model_registry import (
    UNREACHABLE,
    EgressPolicy,
    EgressSettings,
    ModelCreate,
    RegistryError,
    check_endpoint,
    check_endpoint_address,
    check_registration,
    decrypt_api_key,
    encrypt_api_key,
    probe,
    split_ref,
)

LOCAL = EgressPolicy.parse("127.0.0.0/8")
"""The allowlist of a local stack: the test servers here listen on loopback."""


def tensor(name: str, datatype: str, *shape: int) -> dict:
    return {"name": name, "datatype": datatype, "shape": list(shape)}


CLASSIFIER = {
    "name": "topic",
    "inputs": [tensor("text", "BYTES", -1, 1)],
    "outputs": [tensor("probabilities", "FP32", -1, 4), tensor("label", "INT64", -1, 1)],
}
FOUR = {"class_names": ["a", "b", "c", "d"]}


def refused(**body) -> RegistryError:
    with pytest.raises(RegistryError) as caught:
        check_registration(ModelCreate(**body), site_act=False)
    return caught.value


def test_the_contract_table_is_the_agreed_one():
    assert sorted((k.value, c) for k, c in CONTRACTS) == [
        ("classification", "features"),
        ("classification", "text"),
        ("embedding", "uep"),
        ("generation", "openai"),
        ("generation", "trtllm"),
        ("generation", "uep"),
        ("generation", "vllm"),
        ("ranking", "uep"),
    ]
    vllm = contract_for("generation", "vllm")
    assert [(t.name, t.datatype, t.shape, t.optional) for t in vllm.inputs] == [
        ("text_input", "BYTES", (1,), False),
        ("stream", "BOOL", (1,), True),
        ("sampling_parameters", "BYTES", (1,), False),
        ("exclude_input_in_output", "BOOL", (1,), False),
    ]
    assert contract_for(ModelKind.ranking, "uep").output("scores").shape == (-1,)
    assert contract_for("classification", "features").input("features").shape == ("n_features",)
    assert contract_for("embedding", "uep").output("embedding").shape == ("dimension",)
    assert contract_for("ranking", "text") is None and contract_for("nope", "uep") is None


def test_a_matching_classifier_passes_and_each_mismatch_names_its_tensor():
    assert check_metadata("classification", "text", FOUR, CLASSIFIER) == []
    # 3 classes declared, the model has 4 probabilities
    assert check_metadata("classification", "text", {"class_names": ["a", "b", "c"]}, CLASSIFIER) == [
        "tensor 'probabilities': shape [4]: dimension 0 is 4, expected 3 (n_classes = 3)"
    ]
    # a variable class count (-1) matches any number of names
    var = {**CLASSIFIER, "outputs": [tensor("probabilities", "FP32", -1, -1), tensor("label", "INT64", -1, 1)]}
    assert check_metadata("classification", "text", FOUR, var) == []
    wrong = {
        "inputs": [tensor("text", "FP32", -1, 1)],
        "outputs": [tensor("probabilities", "FP64", -1, 4)],
    }
    assert check_metadata("classification", "text", FOUR, wrong) == [
        "tensor 'text': datatype FP32, expected BYTES",
        "tensor 'probabilities': datatype FP64, expected FP32",
        "tensor 'label': the model has no output 'label' (INT64)",
    ]


def test_the_batch_dimension_comes_from_the_config_when_given():
    vllm = {
        "inputs": [
            tensor("text_input", "BYTES", 1),
            tensor("sampling_parameters", "BYTES", 1),
            tensor("exclude_input_in_output", "BOOL", 1),
        ],
        "outputs": [tensor("text_output", "BYTES", -1)],
    }
    assert check_metadata("generation", "vllm", {}, vllm, {"max_batch_size": 0}) == []
    # the same shapes from a batching model lack the batch dimension
    assert check_metadata("generation", "vllm", {}, vllm, {"max_batch_size": 8})[0].startswith(
        "tensor 'text_input': shape [1]: expected a leading batch dimension -1"
    )
    # an input the contract does not send is a problem unless the config marks it optional
    extra = {**vllm, "inputs": [*vllm["inputs"], tensor("lora", "BYTES", 1)]}
    config = {"max_batch_size": 0, "input": [{"name": "lora", "optional": False}]}
    assert check_metadata("generation", "vllm", {}, extra, config) == [
        "tensor 'lora': the model requires input 'lora', which contract 'vllm' does not send"
    ]
    config["input"][0]["optional"] = True
    assert check_metadata("generation", "vllm", {}, extra, config) == []


def test_features_and_embedding_sizes_come_from_the_spec():
    features = {
        "inputs": [tensor("features", "FP32", -1, 30)],
        "outputs": [tensor("probabilities", "FP32", -1, 2), tensor("label", "INT64", -1, 1)],
    }
    spec = {"class_names": ["malignant", "benign"], "n_features": 30}
    assert check_metadata("classification", "features", spec, features) == []
    assert check_metadata("classification", "features", spec | {"n_features": 31}, features) == [
        "tensor 'features': shape [30]: dimension 0 is 30, expected 31 (n_features = 31)"
    ]
    embed = {"inputs": [tensor("text", "BYTES", -1, 1)], "outputs": [tensor("embedding", "FP32", -1, 384)]}
    assert check_metadata("embedding", "uep", {"dimension": 384}, embed) == []
    assert len(check_metadata("embedding", "uep", {"dimension": 768}, embed)) == 1


def test_registration_rules_name_the_field():
    ok = check_registration(
        ModelCreate(name="topic", endpoint="http://127.0.0.1:8000", kind="classification", spec=FOUR), site_act=False
    )
    assert ok == ("text", {"class_names": ["a", "b", "c", "d"], "input": "text"})
    assert (
        check_registration(
            ModelCreate(name="g", endpoint="https://api.example.com", backend="openai_compatible"), site_act=False
        )[0]
        == "openai"
    )
    cases = [
        ({"kind": "ranking", "contract": "text"}, ("body", "contract"), "bad_contract"),
        ({"kind": "classification", "backend": "openai_compatible", "spec": FOUR}, ("body", "backend"), "bad_contract"),
        ({"contract": "openai"}, ("body", "contract"), "bad_contract"),
        ({"kind": "classification"}, ("body", "spec", "class_names"), "missing"),
        ({"kind": "classification", "contract": "features", "spec": FOUR}, ("body", "spec", "n_features"), "missing"),
        ({"kind": "embedding"}, ("body", "spec", "dimension"), "missing"),
        ({"kind": "generation", "spec": FOUR}, ("body", "spec", "class_names"), "not_applicable"),
        ({"kind": "classification", "spec": {"class_names": ["a", "a"]}}, ("body", "spec", "class_names"), "repeated"),
        ({"kind": "classification", "spec": FOUR | {"input": "features"}}, ("body", "spec", "input"), "bad_value"),
        ({"endpoint": "ftp://h:1"}, ("body", "endpoint"), "bad_scheme"),
        ({"endpoint": "http://h:8000/v2"}, ("body", "endpoint"), "bad_value"),
        ({"endpoint": "grpc://h"}, ("body", "endpoint"), "bad_value"),
        ({"api_key": "sk-1"}, ("body", "api_key"), "not_applicable"),
        ({"owner": "site"}, ("body", "owner"), "forbidden"),
        ({"kind": "ranking", "decoding_defaults": {"max_tokens": 8}}, ("body", "decoding_defaults"), "not_applicable"),
        ({"kind": "embedding", "spec": {"dimension": 8}, "supports_logprobs": True}, ("body", "supports_logprobs"), "bad_value"),
    ]
    for extra, loc, kind in cases:
        body = {"name": "m", "endpoint": "http://127.0.0.1:8000"} | extra
        err = refused(**body)
        assert (err.loc, err.kind) == (loc, kind), (extra, err.loc, err.kind, err.msg)
    assert refused(owner="site", name="m", endpoint="http://h:1").status == 403
    key_ref = refused(name="m", endpoint="http://h:1", backend="openai_compatible", api_key_ref="UEP_MODEL_KEY_X")
    assert (key_ref.status, key_ref.loc) == (403, ("body", "api_key_ref"))
    # a site admin may register a site model that reads its key from the inference service's variable
    site = ModelCreate(name="m", endpoint="http://h:1", backend="openai_compatible", owner="site", api_key_ref="UEP_MODEL_KEY_X")
    assert check_registration(site, site_act=True)[0] == "openai"


def test_field_bounds_are_pydantic_errors_naming_the_field():
    from pydantic import ValidationError

    for body, field in [
        ({"name": "a@b"}, "name"),
        ({"name": "x" * 201}, "name"),
        ({"max_in_flight": 0}, "max_in_flight"),
        ({"max_in_flight": 1025}, "max_in_flight"),
        ({"spec": {"class_names": [f"c{i}" for i in range(1001)]}}, "spec"),
        ({"spec": {"class_names": ["a", "x" * 201]}}, "spec"),
        ({"decoding_defaults": {"temperature": 3}}, "decoding_defaults"),
        ({"api_key_ref": "UEP_INTERNAL_TOKEN"}, "api_key_ref"),
        ({"unknown": 1}, "unknown"),
    ]:
        with pytest.raises(ValidationError) as caught:
            ModelCreate(**({"name": "m", "endpoint": "http://h:1"} | body))
        assert caught.value.errors()[0]["loc"][0] == field, body


def test_endpoint_forms_and_refused_addresses():
    assert check_endpoint("triton", "127.0.0.1:8001") == ("grpc", "127.0.0.1", 8001)
    assert check_endpoint("triton", "http://triton:8000/") == ("http", "triton", 8000)
    assert check_endpoint("openai_compatible", "https://api.example.com") == ("https", "api.example.com", None)
    with pytest.raises(RegistryError, match="scheme 'grpc'"):
        check_endpoint("openai_compatible", "grpc://h:1")
    with pytest.raises(RegistryError, match="user info"):
        check_endpoint("openai_compatible", "http://u:p@h:1")

    def address(host: str) -> str | None:
        try:
            asyncio.run(check_endpoint_address(host, 80))
        except RegistryError as exc:
            assert exc.loc == ("body", "endpoint")
            return exc.kind
        return None

    assert address("169.254.169.254") == "blocked_address"  # the cloud metadata service
    assert address("::ffff:169.254.169.254") == "blocked_address"  # the same, IPv4-mapped
    assert address("fe80::1") == "blocked_address"
    assert address("127.0.0.1") == address("localhost") == address("10.1.2.3") == "egress_refused"  # not listed
    assert address("no-such-host.invalid") == "unreachable"  # RFC 6761: .invalid never resolves


def test_api_keys_are_encrypted_with_the_site_key_and_rotate():
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    token = encrypt_api_key("sk-secret", old)
    assert b"sk-secret" not in token
    assert decrypt_api_key(token, old) == "sk-secret"
    assert decrypt_api_key(token, f"{new},{old}") == "sk-secret"  # the old key still decrypts after rotation
    with pytest.raises(InvalidToken):
        decrypt_api_key(token, new)
    for missing in (None, ""):
        with pytest.raises(RegistryError, match="UEP_MODEL_SECRET_KEY is not set"):
            encrypt_api_key("k", missing)
    with pytest.raises(RegistryError, match="not a Fernet key"):
        encrypt_api_key("k", "short")


def test_refs():
    assert split_ref("m") == ("m", None)
    assert split_ref("m@2") == ("m", "2")


class _OpenAI(BaseHTTPRequestHandler):
    """A server answering ``GET /v1/models`` like an OpenAI-compatible one, for the key ``sk-good`` only."""

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != "Bearer sk-good":
            self.send_response(401)
            self.end_headers()
            return
        body = json.dumps({"object": "list", "data": [{"id": "served-model", "object": "model"}]}).encode()
        self.send_response(200 if self.path == "/v1/models" else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def openai_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_the_openai_probe_sends_the_key_and_checks_the_served_name(openai_server):
    def run(name: str, key: str | None) -> RegistryError | None:
        try:
            asyncio.run(
                probe(
                    backend="openai_compatible",
                    endpoint=openai_server,
                    served_name=name,
                    served_version=None,
                    kind="generation",
                    contract="openai",
                    spec={},
                    api_key=key,
                    egress=LOCAL,
                )  # fmt: skip
            )
        except RegistryError as exc:
            return exc
        return None

    assert run("served-model", "sk-good") is None
    assert run("served-model", "sk-bad").loc == ("body", "api_key")
    unknown = run("other", "sk-good")
    assert unknown.loc == ("body", "triton_model_name") and "served-model" in unknown.msg


def test_an_unreachable_endpoint_is_named():
    # a port nothing listens on (connection refused): the answer names the endpoint, without waiting
    with pytest.raises(RegistryError) as caught:
        asyncio.run(
            probe(
                backend="triton",
                endpoint="http://127.0.0.1:9",
                served_name="m",
                served_version=None,
                kind="generation",
                contract="uep",
                spec={},
                egress=LOCAL,
            )  # fmt: skip
        )
    assert (caught.value.loc, caught.value.kind) == (("body", "endpoint"), "unreachable")
    with pytest.raises(RegistryError, match="HTTP endpoint"):
        asyncio.run(
            probe(
                backend="triton",
                endpoint="127.0.0.1:8001",
                served_name="m",
                served_version=None,
                kind="generation",
                contract="uep",
                spec={},
                egress=LOCAL,
            )  # fmt: skip
        )


def test_dispatch_carries_the_registry_kind_contract_and_spec():
    import uuid

    from uep_common.registry.targets import model_target
    from uep_common.tables.models import Model

    spec = {"class_names": ["malignant", "benign"], "input": "features", "n_features": 30}
    m = Model(id=uuid.uuid4(), name="tumour", version="1", backend="triton", endpoint="http://t:8000",
              triton_model_name="uep_breast_cancer", decoding_defaults={}, max_in_flight=4,
              kind="classification", contract="features", spec=spec)  # fmt: skip
    target = model_target(m)
    assert (target.kind, target.contract, target.spec, target.max_concurrency) == (ModelKind.classification, "features", spec, 4)


def test_dispatch_gives_a_model_without_a_capacity_the_default():
    import uuid

    from uep_common.registry.targets import model_target
    from uep_common.tables.models import Model
    from uep_scheduler.capacity import model_bound

    m = Model(id=uuid.uuid4(), name="unknown-endpoint", version="1", backend="openai_compatible", endpoint="http://t:8000",
              decoding_defaults={}, max_in_flight=None, kind="generation", contract="openai_chat", spec={})  # fmt: skip
    assert model_target(m, 4).max_concurrency == 4  # inference makes at most 4 calls at once
    assert model_target(m).max_concurrency is None  # no default: unbounded, as before
    assert model_bound(m, 1.0, None, default_capacity=4) == 4
    assert model_bound(m, 1.0, 1.5, default_capacity=4) == 1  # the adaptive limit after overloads
    assert model_bound(m, 1.0, None) is None


# ------------------------------------------------------------------ the egress allowlist


def _address_check(host: str, policy: EgressPolicy | None) -> RegistryError | None:
    try:
        asyncio.run(check_endpoint_address(host, 8000, egress=policy))
    except RegistryError as exc:
        return exc
    return None


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "localhost", "::1", "10.0.0.7", "192.168.0.1", "172.31.255.255", "100.64.1.1", "fd00::1", "::ffff:10.0.0.1"],
)
def test_loopback_and_private_addresses_are_refused_unless_the_site_lists_them(host):
    # "localhost" resolves to 127.0.0.1 (or ::1): the name's addresses are what counts
    refused = _address_check(host, EgressPolicy())
    assert refused is not None and (refused.loc, refused.kind) == (("body", "endpoint"), "egress_refused")
    assert refused.msg.count("127.0.0.1") == (1 if host == "127.0.0.1" else 0)  # the resolved address is not told
    allowed = EgressPolicy.parse("127.0.0.0/8, ::1, 10.0.0.0/8, 192.168.0.0/16, 172.16.0.0/12, 100.64.0.0/16, fc00::/7")
    assert _address_check(host, allowed) is None


def test_an_allowlist_entry_allows_that_network_or_name_only():
    policy = EgressPolicy.parse("10.1.0.0/16,localhost", public=False)
    assert _address_check("10.1.2.3", policy) is None
    assert _address_check("localhost", policy) is None  # a listed name, whatever it resolves to
    assert _address_check("10.2.0.1", policy).kind == "egress_refused"
    assert _address_check("8.8.8.8", policy).kind == "egress_refused"  # public: off
    assert _address_check("8.8.8.8", EgressPolicy()) is None  # public addresses by default
    # what the platform never calls stays refused whatever the list says
    assert _address_check("169.254.169.254", EgressPolicy.parse("10.0.0.0/8")).kind == "blocked_address"
    for bad in ("169.254.0.0/16", "not a host!", "a..b", "-x.example"):
        with pytest.raises(ValueError, match="egress allowlist entry"):
            EgressPolicy.parse(bad)


def test_the_allowlist_is_a_setting(monkeypatch):
    monkeypatch.setenv("UEP_MODEL_EGRESS_ALLOW", "127.0.0.0/8,triton.uep.svc")
    monkeypatch.setenv("UEP_MODEL_EGRESS_PUBLIC", "false")
    policy = EgressSettings().egress_policy()
    assert policy == EgressPolicy((ipaddress.ip_network("127.0.0.0/8"),), frozenset({"triton.uep.svc"}), False)
    monkeypatch.setenv("UEP_MODEL_EGRESS_ALLOW", "169.254.169.254")
    with pytest.raises(ValueError, match="never calls"):
        EgressSettings()


def test_an_unresolvable_name_is_unreachable_like_a_closed_port():
    refused = _address_check("no-such-host.invalid", EgressPolicy())
    assert refused is not None and refused.kind == "unreachable"
    assert refused.msg == UNREACHABLE.format(target="no-such-host.invalid:8000")


def test_the_scheduler_and_the_judge_build_one_target_with_the_key_and_the_owner():
    import uuid

    import uep_judge.store
    import uep_scheduler.allocation
    from uep_common.registry.targets import model_target
    from uep_common.tables.models import Model

    assert vars(uep_judge.store)["model_target"] is model_target is vars(uep_scheduler.allocation)["model_target"]
    m = Model(id=uuid.uuid4(), name="judge", version="1", backend="openai_compatible", endpoint="https://api.example.com/v1",
              decoding_defaults={"max_tokens": 64, "stop": ["\n"]}, max_in_flight=None, kind="generation",
              contract="openai", spec=None, api_key_encrypted=b"gAAAA-token", api_key_ref=None,
              owner_tenant_id=uuid.uuid4())  # fmt: skip
    target = model_target(m)
    assert (target.api_key_encrypted, target.tenant_model, target.max_tokens, target.temperature, target.stop) == (
        "gAAAA-token",
        True,
        64,
        0.0,
        ["\n"],
    )
    assert model_target(Model(**{**{c: getattr(m, c) for c in ("id", "name", "version", "backend", "endpoint",
        "decoding_defaults", "kind", "contract")}, "owner_tenant_id": None})).tenant_model is False  # fmt: skip
