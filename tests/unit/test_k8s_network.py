"""The NetworkPolicies of deploy/k8s/base, evaluated as Kubernetes does, give each workload exactly the traffic it needs.

:func:`allowed` implements the NetworkPolicy rules (networking.k8s.io/v1, "Network Policies" in the Kubernetes
documentation): a pod selected by no policy of a direction is open in that direction; once selected, a
connection is allowed if any selecting policy has a rule whose peers (``from``/``to``: ``podSelector`` in the
policy's namespace, ``namespaceSelector``, both, ``ipBlock``; none = everyone) and ``ports`` (none = all; a
name resolves to the destination container's port) match. A connection needs the source's egress and the
destination's ingress. Expected ports come from the manifests' settings (``uep-config``), so a moved Kafka or
Redis port fails here until the policies follow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "k8s" / "base"
NAMESPACE = "uep"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


KUSTOMIZATION = yaml.safe_load((BASE / "kustomization.yaml").read_text())
DOCS = [d for r in KUSTOMIZATION["resources"] for d in _docs(BASE / r)]
POLICIES = [d for d in DOCS if d["kind"] == "NetworkPolicy"]
CONFIG = dict(str(lit).split("=", 1) for lit in KUSTOMIZATION["configMapGenerator"][0]["literals"])


@dataclass(frozen=True)
class Peer:
    """One end of a connection: a pod (labels, its namespace's labels, named container ports) or an address
    outside the cluster's pods (``pod=False``)."""

    name: str
    labels: dict[str, str] = field(default_factory=dict, hash=False)
    namespace: str = NAMESPACE
    ports: dict[str, int] = field(default_factory=dict, hash=False)
    env: frozenset[str] = frozenset()
    pod: bool = True

    @property
    def namespace_labels(self) -> dict[str, str]:
        extra = {"uep.io/scrape": "true"} if self.namespace == "monitoring" else {}
        return {"kubernetes.io/metadata.name": self.namespace, **extra}


def _workloads() -> dict[str, Peer]:
    out = {}
    for doc in DOCS:
        if doc["kind"] in ("Deployment", "Job"):
            spec = doc["spec"]["template"]["spec"]
            cs = [*spec.get("initContainers", []), *spec["containers"]]
            out[doc["metadata"]["name"]] = Peer(
                doc["metadata"]["name"],
                doc["spec"]["template"]["metadata"]["labels"],
                ports={p["name"]: p["containerPort"] for c in cs for p in c.get("ports", [])},
                env=frozenset(e["name"] for c in cs for e in c.get("env", [])),
            )
    return out


WORKLOADS = _workloads()
OUTSIDE = {
    "other-namespace pod": Peer("other-namespace pod", {"app": "x"}, namespace="default"),
    "scraper": Peer("scraper", {"app.kubernetes.io/name": "prometheus"}, namespace="monitoring"),
    "internet": Peer("internet", pod=False),
}


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A label selector (``matchLabels``, ``matchExpressions`` In/NotIn/Exists/DoesNotExist) against labels."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {
            "In": labels.get(key) in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def _peer_matches(rule_peer: dict[str, Any], policy_ns: str, peer: Peer) -> bool:
    if "ipBlock" in rule_peer:
        return not peer.pod  # the policies here never name pod addresses in an ipBlock
    if not peer.pod:
        return False
    if "namespaceSelector" in rule_peer:
        if not _matches(rule_peer["namespaceSelector"], peer.namespace_labels):
            return False
    elif peer.namespace != policy_ns:
        return False
    return _matches(rule_peer.get("podSelector", {}), peer.labels)


def _port_matches(rule_ports: list[dict[str, Any]] | None, port: int, protocol: str, dst: Peer) -> bool:
    if not rule_ports:
        return True
    for p in rule_ports:
        if p.get("protocol", "TCP") != protocol:
            continue
        value = p.get("port")
        if value is None or (dst.ports.get(value) if isinstance(value, str) else value) == port:
            return True
    return False


def _direction_allows(pod: Peer, other: Peer, port: int, protocol: str, dst: Peer, kind: str) -> bool:
    """Whether ``pod``'s policies of direction ``kind`` ("Ingress"/"Egress") allow the connection with ``other``."""
    if not pod.pod or pod.namespace != NAMESPACE:
        return True  # not governed by these policies
    selecting = [p for p in POLICIES if kind in p["spec"]["policyTypes"] and _matches(p["spec"]["podSelector"], pod.labels)]
    if not selecting:
        return True
    key, peers_key = kind.lower(), "from" if kind == "Ingress" else "to"
    for policy in selecting:
        for rule in policy["spec"].get(key, []):
            peers = rule.get(peers_key)
            if (not peers or any(_peer_matches(rp, NAMESPACE, other) for rp in peers)) and _port_matches(
                rule.get("ports"), port, protocol, dst
            ):
                return True
    return False


def allowed(src: Peer, dst: Peer, port: int, protocol: str = "TCP") -> bool:
    """Whether a connection from ``src`` to ``dst``:``port`` passes both ends' policies."""
    return _direction_allows(src, dst, port, protocol, dst, "Egress") and _direction_allows(
        dst, src, port, protocol, dst, "Ingress"
    )


def _port_of(url_or_hostport: str) -> int:
    parts = urlsplit(url_or_hostport if "://" in url_or_hostport else f"tcp://{url_or_hostport}")
    assert parts.port is not None, url_or_hostport
    return parts.port


KAFKA, REDIS, OTLP = (_port_of(CONFIG[k]) for k in ("UEP_KAFKA_BOOTSTRAP", "UEP_REDIS_URL", "UEP_OTEL_OTLP_ENDPOINT"))
POSTGRES = 5432  # the port of every database URL of the overlays (a Secret, not in the base)
REDIS_USERS = {"uep-gateway", "uep-reporter"}  # ServiceRuntime(use_redis=True) or the gateway's own client
TRITON, HTTPS = {8000, 8001}, 443
ARTIFACT_USERS = {"uep-gateway", "uep-reporter"}  # UEP_ARTIFACT_BACKEND=s3: the reporter writes, the gateway serves
OBJECT_STORE = {HTTPS, 9000}  # S3 over HTTPS, or an S3-compatible store on its usual port (MinIO)


def expected_egress(w: Peer) -> set[int]:
    """Ports a workload must reach outside the namespace's workloads (besides DNS)."""
    ports = {KAFKA}
    ports |= {POSTGRES} if "UEP_DATABASE_URL" in w.env else set()
    ports |= {REDIS} if w.name in REDIS_USERS else set()
    ports |= {OTLP} if w.name != "uep-migrate" else set()
    ports |= TRITON | {HTTPS} if w.name == "uep-inference" else set()
    ports |= OBJECT_STORE if w.name in ARTIFACT_USERS else set()
    return ports


def test_the_namespace_denies_by_default() -> None:
    [deny] = [p for p in POLICIES if p["metadata"]["name"] == "default-deny"]
    assert deny["spec"]["podSelector"] == {} and set(deny["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    assert "ingress" not in deny["spec"] and "egress" not in deny["spec"]


def test_only_the_judge_reaches_inference() -> None:
    inference = WORKLOADS["uep-inference"]
    port = inference.ports["health"]
    sources = {p.name for p in [*WORKLOADS.values(), *OUTSIDE.values()] if allowed(p, inference, port)}
    assert sources == {"uep-judge"}
    assert not any(allowed(p, inference, 9999) for p in [*WORKLOADS.values(), *OUTSIDE.values()])


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_who_reaches_each_workload(name: str) -> None:
    dst = WORKLOADS[name]
    expected = {
        "uep-gateway": set(OUTSIDE),  # the API, through the cluster's ingress (no uep workload calls it)
        "uep-inference": {"uep-judge", "scraper"},  # the scraper on the metrics port only (see below)
        "uep-migrate": set(),
    }.get(name, {"scraper"})  # the other services: their health and metrics ports, from a scraping namespace only
    reached = {p.name for p in [*WORKLOADS.values(), *OUTSIDE.values()] for port in dst.ports.values() if allowed(p, dst, port)}
    assert reached == expected


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_each_workload_reaches_only_its_backing_services(name: str) -> None:
    src, internet = WORKLOADS[name], OUTSIDE["internet"]
    assert allowed(src, internet, 53, "UDP") and allowed(src, internet, 53, "TCP")  # DNS
    probe = {KAFKA, REDIS, OTLP, POSTGRES, *TRITON, *OBJECT_STORE, 22, 80, 8080, 8092, 9093}
    assert {port for port in probe if allowed(src, internet, port)} == expected_egress(src)


@pytest.mark.parametrize("name", sorted(n for n in WORKLOADS if n != "uep-migrate"))
def test_scrapers_reach_every_service_on_its_metrics_port(name: str) -> None:
    """Prometheus reaches GET /metrics of all six services on the port ``metrics`` (UEP_METRICS_PORT), and through
    it neither inference's internal endpoint (its health port) nor anything from outside a scraping namespace."""
    dst, scraper = WORKLOADS[name], OUTSIDE["scraper"]
    assert dst.ports["metrics"] == int(CONFIG["UEP_METRICS_PORT"])
    assert allowed(scraper, dst, dst.ports["metrics"])
    assert not allowed(OUTSIDE["other-namespace pod"], dst, dst.ports["metrics"])
    assert not allowed(OUTSIDE["internet"], dst, dst.ports["metrics"])
    if name == "uep-inference":
        assert not allowed(scraper, dst, dst.ports["health"])


def test_the_judge_reaches_inference_on_its_configured_port() -> None:
    [judge_container] = next(d for d in DOCS if d["metadata"]["name"] == "uep-judge" and d["kind"] == "Deployment")["spec"][
        "template"
    ]["spec"]["containers"]
    url = next(e["value"] for e in judge_container["env"] if e["name"] == "UEP_INFERENCE_URL")
    assert allowed(WORKLOADS["uep-judge"], WORKLOADS["uep-inference"], _port_of(url))
    assert not allowed(WORKLOADS["uep-scorer"], WORKLOADS["uep-inference"], _port_of(url))  # runs untrusted code


def test_the_evaluator_follows_the_rules() -> None:
    """:func:`_matches` and :func:`_peer_matches` on the cases of the Kubernetes documentation."""
    assert _matches({}, {"a": "1"})  # an empty selector selects everything
    assert _matches({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}) is True
    assert not _matches({"matchLabels": {"a": "1"}}, {"a": "2"})
    pod_in_other_ns = Peer("p", {"a": "1"}, namespace="default")
    assert not _peer_matches({"podSelector": {"matchLabels": {"a": "1"}}}, NAMESPACE, pod_in_other_ns)  # own namespace only
    assert _peer_matches({"namespaceSelector": {}}, NAMESPACE, pod_in_other_ns)  # every namespace
    assert not _peer_matches({"namespaceSelector": {}}, NAMESPACE, OUTSIDE["internet"])
