"""deploy/k8s/base/monitoring against the code: the ServiceMonitor scrapes the port the services serve /metrics on,
and every metric an alert rule or a dashboard panel queries is one the services define.

The metric names come from the registry of this process after importing every module that defines uep metrics
(:mod:`uep_common.runtime.metrics` and each service's ``instruments``), so renaming a metric fails here until the rules and
the dashboard follow. Sample names follow the Prometheus text format: a counter ``x`` is sampled as ``x_total``,
a histogram ``x`` as ``x_bucket``, ``x_count`` and ``x_sum``.
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from uep_common.runtime import metrics

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "k8s" / "base"
MONITORING = BASE / "monitoring"
SERVICES = ["gateway", "scheduler", "inference", "scorer", "judge", "reporter"]
INSTRUMENTS = [
    "uep_gateway.observability",
    "uep_scheduler.instruments",
    "uep_inference.instruments",
    "uep_scorer.instruments",
    "uep_judge.instruments",
    "uep_reporter.instruments",
]
STANDARD = {"up", "process_cpu_seconds_total", "process_resident_memory_bytes"}
"""Series Prometheus itself (``up``) or prometheus-client's process collector provides."""


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def sample_names() -> set[str]:
    """Every sample name the uep metrics of this process can expose."""
    for module in INSTRUMENTS:
        importlib.import_module(module)
    names: set[str] = set()
    for family in metrics.REGISTRY.collect():
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_count", "_sum"]}.get(family.type, [""])
        names |= {family.name + s for s in suffixes}
    return names


def queried_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression (identifiers followed by a selector, a range or a parenthesis close)."""
    no_strings = re.sub(r'"[^"]*"', '""', expr)
    return {m for m in re.findall(r"\b([a-z_][a-z0-9_]*)\s*(?=[{\[)])", no_strings) if m.startswith(("uep_", "process_", "up"))}


def _rules() -> list[dict[str, Any]]:
    [rule_doc] = _docs(MONITORING / "alerts.yaml")
    return [r for g in rule_doc["spec"]["groups"] for r in g["rules"]]


def _panel_exprs() -> list[str]:
    dashboard = json.loads((MONITORING / "uep-dashboard.json").read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def test_the_expression_parser_finds_names():
    expr = 'sum by (job) (increase(uep_messages_out_total{topic="uep.x"}[10m])) / sum(rate(uep_a_bucket[5m])) or up{job="x"}'
    assert queried_names(expr) == {"uep_messages_out_total", "uep_a_bucket", "up"}


def test_every_queried_metric_is_defined():
    known = sample_names() | STANDARD
    exprs = [str(r["expr"]) for r in _rules()] + _panel_exprs()
    assert len(exprs) > 40
    unknown = {name for e in exprs for name in queried_names(e)} - known
    assert not unknown, f"alert rules or dashboard query metrics no service defines: {sorted(unknown)}"


def test_jobs_are_the_services():
    exprs = [str(r["expr"]) for r in _rules()] + _panel_exprs()
    jobs = {j for e in exprs for j in re.findall(r'job="([^"]+)"', e)}
    assert jobs <= {f"uep-{s}" for s in SERVICES} and "uep-scheduler" in jobs


def test_every_alert_says_what_and_how_bad():
    alerts = _rules()
    names = {r["alert"] for r in alerts}
    assert {"UepConsumerLagGrowing", "UepDeadLetters", "UepGatewayErrorRate", "UepOutboxBacklog", "UepNoSchedulerAlive"} <= names
    for rule in alerts:
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]
    lag = next(r for r in alerts if r["alert"] == "UepConsumerLagGrowing")
    assert lag["for"] == "10m" and "[10m:" in lag["expr"]


def test_the_service_monitor_scrapes_the_metrics_port_of_the_six_services():
    [monitor] = _docs(MONITORING / "servicemonitor.yaml")
    [selector] = monitor["spec"]["selector"]["matchExpressions"]
    assert selector["key"] == "app.kubernetes.io/name" and sorted(selector["values"]) == sorted(f"uep-{s}" for s in SERVICES)
    assert monitor["spec"]["jobLabel"] == "app.kubernetes.io/name"
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "metrics" and endpoint["path"] == "/metrics"
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    config = dict(str(lit).split("=", 1) for lit in kustomization["configMapGenerator"][0]["literals"])
    for service in SERVICES:
        docs = {d["kind"]: d for d in _docs(BASE / f"{service}.yaml")}
        svc_ports = {p["name"]: p for p in docs["Service"]["spec"]["ports"]}
        assert svc_ports["metrics"]["targetPort"] == "metrics", service
        [container] = docs["Deployment"]["spec"]["template"]["spec"]["containers"]
        container_ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert container_ports["metrics"] == int(config["UEP_METRICS_PORT"]), service
        assert docs["Service"]["metadata"]["labels"]["app.kubernetes.io/name"] == f"uep-{service}"


def test_the_dashboard_has_a_row_per_service_and_one_for_the_pipeline():
    dashboard = json.loads((MONITORING / "uep-dashboard.json").read_text())
    rows = [p["title"] for p in dashboard["panels"] if p["type"] == "row"]
    assert rows == ["Pipeline", *[s.capitalize() for s in SERVICES]]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    kustomization = yaml.safe_load((MONITORING / "kustomization.yaml").read_text())
    [generated] = kustomization["configMapGenerator"]
    assert generated["files"] == ["uep-dashboard.json"] and generated["options"]["labels"] == {"grafana_dashboard": "1"}
