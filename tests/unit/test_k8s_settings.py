"""Every setting a workload reads without a safe default for a cluster is set in its Kubernetes manifest.

The defaults of the ``UEP_*`` settings are the local stack's (``make up``): PostgreSQL, Redis, Kafka and the
other services on 127.0.0.1. In a pod, 127.0.0.1 is the pod itself, so a setting left at such a default
fails at run time (the judge's database readiness check, judge → inference calls). This reads, for each
workload of ``deploy/k8s/base``:

* the settings it reads: every field of :class:`uep_common.runtime.settings.CommonSettings` and of each
  pydantic-settings class defined in the workload's package (``BaseSettings`` subclasses, variable
  ``UEP_<FIELD>``), plus ``os.environ.get("UEP_…", default)`` reads in that package. Three shared fields
  are read only where the source says so (:data:`OPENED_WHEN`): the database and Redis URLs where the
  service asks ``ServiceRuntime`` for them (``use_db=True`` / ``use_redis=True``) or uses the URL itself,
  and the internal service credential where the source uses it;
* which of them have no safe default (:func:`unsafe_default`): required fields, defaults naming a
  loopback address, and secrets (``repr=False``) whose default is empty;
* the environment its manifest gives the container: ``env`` entries (a value, a non-optional Secret key,
  a ConfigMap key that exists) and ``envFrom`` ConfigMaps/Secrets, resolved through the
  ``configMapGenerator``/``secretGenerator`` of ``base/kustomization.yaml`` (YAML parsed with PyYAML).

Each unsafe setting a workload reads must be in that environment.
"""

from __future__ import annotations

import ast
import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from uep_common.runtime.settings import CommonSettings

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "k8s" / "base"
COMMON_SRC = ROOT / "libs" / "common" / "src" / "uep_common"
LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
"""Defaults naming these hosts point at the pod itself (a server bound to them is unreachable from outside it)."""

OPENED_WHEN: dict[str, tuple[str, ...]] = {
    "database_url": (r"\buse_db=True\b", r"\.database_url\b"),
    "redis_url": (r"\buse_redis=True\b", r"\.redis_url\b"),
    "internal_token": (r"\.internal_token\b",),
}
"""Shared settings a workload reads only when its source matches one of these patterns."""


@dataclass(frozen=True)
class Workload:
    """One Deployment or Job of the base and the source whose settings it reads."""

    kind: str
    name: str
    sources: tuple[Path, ...]
    """Python files or package directories of the process(es) the manifest runs."""


def _service(name: str) -> Workload:
    return Workload("Deployment", f"uep-{name}", (ROOT / "services" / name / "src" / f"uep_{name}",))


WORKLOADS = {
    **{n: _service(n) for n in ("gateway", "scheduler", "inference", "scorer", "judge", "reporter")},
    # uep-admin migrate, create-topics and seed
    "migrate": Workload("Job", "uep-migrate", (COMMON_SRC / "admin.py", COMMON_SRC / "builtin" / "seed.py")),
}


# ------------------------------------------------------------------------------------------- settings
def _files(workload: Workload) -> list[Path]:
    return sorted(f for src in workload.sources for f in ([src] if src.is_file() else src.rglob("*.py")))


def _module_name(path: Path) -> str:
    src = next(p for p in path.parents if p.name == "src")
    return ".".join(path.relative_to(src).with_suffix("").parts)


def settings_classes(workload: Workload) -> list[type[BaseSettings]]:
    """``CommonSettings`` and every ``BaseSettings`` subclass defined in the workload's source (found by AST,
    imported)."""
    found: list[type[BaseSettings]] = [CommonSettings]
    for path in _files(workload):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id.endswith("Settings") for b in node.bases):
                cls = getattr(importlib.import_module(_module_name(path)), node.name)
                if isinstance(cls, type) and issubclass(cls, BaseSettings) and cls not in found:
                    found.append(cls)
    return found


def unsafe_default(info: FieldInfo) -> str | None:
    """Why a field's default is not safe in a cluster, or None when it is."""
    if info.is_required():
        return "required"
    default = info.get_default(call_default_factory=True)
    if info.repr is False and not default:
        return "a secret with an empty default"
    if any(host in str(default) for host in LOOPBACK):
        return f"default {default!r} is the pod itself"
    return None


def _env_name(cls: type[BaseSettings], field: str, info: FieldInfo) -> str:
    alias = info.validation_alias
    return alias.upper() if isinstance(alias, str) else f"{cls.model_config.get('env_prefix', '')}{field}".upper()


def _direct_env_reads(path: Path) -> dict[str, str | None]:
    """``os.environ.get("UEP_X", "default")`` / ``os.getenv`` with a constant default, and ``os.environ["UEP_X"]``
    (None: required) in ``path``. A ``get`` without a default is an optional setting (unset: the feature is off)."""
    reads: dict[str, str | None] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("os.environ.get", "os.getenv") and len(node.args) == 2:
            name, default = node.args
            if isinstance(name, ast.Constant) and str(name.value).startswith("UEP_") and isinstance(default, ast.Constant):
                reads[name.value] = str(default.value)
        elif (
            isinstance(node, ast.Subscript)
            and ast.unparse(node.value) == "os.environ"
            and isinstance(node.slice, ast.Constant)
            and str(node.slice.value).startswith("UEP_")
        ):
            reads[node.slice.value] = None
    return reads


def required_env(workload: Workload) -> dict[str, str]:
    """The variables the workload reads without a safe default: name -> why."""
    source = "\n".join(p.read_text() for p in _files(workload))
    needed: dict[str, str] = {}
    for cls in settings_classes(workload):
        for field, info in cls.model_fields.items():
            if field in OPENED_WHEN and not any(re.search(p, source) for p in OPENED_WHEN[field]):
                continue
            why = unsafe_default(info)
            if why:
                needed[_env_name(cls, field, info)] = f"{cls.__name__}.{field}: {why}"
    for path in _files(workload):
        for name, default in _direct_env_reads(path).items():
            if default is None:
                needed[name] = f"{path.name} reads it with no default"
            elif any(host in default for host in LOOPBACK):
                needed[name] = f"{path.name}: default {default!r} is the pod itself"
    return needed


# ------------------------------------------------------------------------------------------- manifests
def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def kustomization() -> dict[str, Any]:
    """``base/kustomization.yaml``."""
    doc: dict[str, Any] = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    return doc


def generated_keys(kind: str) -> dict[str, set[str]]:
    """Keys of the ConfigMaps (``kind="configMapGenerator"``) or Secrets (``"secretGenerator"``) the base
    generates: name -> keys (``literals`` and ``envs`` files)."""
    out: dict[str, set[str]] = {}
    for gen in kustomization().get(kind, []):
        keys = out.setdefault(gen["name"], set())
        keys.update(str(lit).split("=", 1)[0] for lit in gen.get("literals", []))
        for env_file in gen.get("envs", []):
            lines = (BASE / env_file).read_text().splitlines()
            keys.update(ln.split("=", 1)[0].strip() for ln in lines if "=" in ln and not ln.lstrip().startswith("#"))
    return out


def manifest(workload: Workload) -> dict[str, Any]:
    """The workload's object among the base's resources."""
    for resource in kustomization()["resources"]:
        for doc in _documents(BASE / resource):
            if doc.get("kind") == workload.kind and doc["metadata"]["name"] == workload.name:
                return doc
    raise AssertionError(f"no {workload.kind} {workload.name} in {BASE}")


def containers(workload: Workload) -> list[dict[str, Any]]:
    """Every container (init containers included) of the workload's pod template."""
    spec = manifest(workload)["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def container_env(container: dict[str, Any]) -> dict[str, str]:
    """The variables a container is given: name -> where from. Optional references and ConfigMap keys that the
    base does not generate do not count."""
    maps, secrets = generated_keys("configMapGenerator"), generated_keys("secretGenerator")
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        prefix = source.get("prefix", "")
        if "configMapRef" in source:
            ref, keys = source["configMapRef"], maps.get(source["configMapRef"]["name"], set())
        elif "secretRef" in source:
            ref, keys = source["secretRef"], secrets.get(source["secretRef"]["name"], set())
        else:
            continue
        env.update({f"{prefix}{k}": f"envFrom {ref['name']}" for k in keys})
    for entry in container.get("env", []):
        name, value_from = entry["name"], entry.get("valueFrom")
        if value_from is None:
            if str(entry.get("value", "")):
                env[name] = "value"
            continue
        if "secretKeyRef" in value_from and not value_from["secretKeyRef"].get("optional", False):
            env[name] = f"Secret {value_from['secretKeyRef']['name']}"
        elif "configMapKeyRef" in value_from:
            ref = value_from["configMapKeyRef"]
            if ref["key"] in maps.get(ref["name"], set()):
                env[name] = f"ConfigMap {ref['name']}"
        elif "fieldRef" in value_from or "resourceFieldRef" in value_from:
            env[name] = "field"
    return env


def env_value(container: dict[str, Any], name: str) -> str:
    """The literal value of ``name`` in the container's ``env`` or in a generated ConfigMap it loads."""
    for entry in container.get("env", []):
        if entry["name"] == name and "value" in entry:
            return str(entry["value"])
    literals = {
        k: v
        for gen in kustomization().get("configMapGenerator", [])
        for k, v in (str(lit).split("=", 1) for lit in gen.get("literals", []))
    }
    return literals[name]


# ----------------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_unsafe_setting_is_set_in_the_manifest(name: str) -> None:
    workload = WORKLOADS[name]
    needed = required_env(workload)
    assert needed, "the scan found nothing: every workload reads at least the broker address"
    for container in containers(workload):
        given = container_env(container)
        missing = {var: why for var, why in needed.items() if var not in given}
        assert missing == {}, f"{workload.kind} {workload.name}, container {container['name']}: not set: {missing}"


def test_the_scan_finds_the_settings_each_service_opens() -> None:
    judge, inference, gateway = (required_env(WORKLOADS[n]) for n in ("judge", "inference", "gateway"))
    # the judge opens the database (use_db=True), calls inference and sends the internal credential
    assert {"UEP_DATABASE_URL", "UEP_INFERENCE_URL", "UEP_INTERNAL_TOKEN", "UEP_KAFKA_BOOTSTRAP"} <= judge.keys()
    assert "UEP_REDIS_URL" not in judge
    # inference opens no database and checks the internal credential
    assert "UEP_DATABASE_URL" not in inference and "UEP_INTERNAL_TOKEN" in inference
    # the gateway uses the database and Redis itself, binds its API and never sends the internal credential
    assert {"UEP_DATABASE_URL", "UEP_REDIS_URL", "UEP_GATEWAY_HOST"} <= gateway.keys()
    assert "UEP_INTERNAL_TOKEN" not in gateway
    # seed registers the built-in models at TritonSettings.triton_host (default 127.0.0.1)
    assert "UEP_TRITON_HOST" in required_env(WORKLOADS["migrate"])


def test_unsafe_default_rules() -> None:
    from pydantic import Field

    assert unsafe_default(FieldInfo(annotation=str)) == "required"
    assert unsafe_default(Field("redis://127.0.0.1:26379/0")) is not None
    assert unsafe_default(Field("", repr=False)) == "a secret with an empty default"
    assert unsafe_default(Field(None, description="optional API key")) is None
    assert unsafe_default(Field(8, ge=1)) is None


def test_the_judge_calls_the_inference_service_on_its_port() -> None:
    """``UEP_INFERENCE_URL`` names the inference Service and the port that reaches inference's health port, where
    ``POST /internal/generate`` is served (``uep_inference.main``)."""
    [judge] = containers(WORKLOADS["judge"])
    match = re.fullmatch(r"http://([a-z0-9-]+)(?:\.[a-z0-9.-]+)?:(\d+)", env_value(judge, "UEP_INFERENCE_URL"))
    assert match, env_value(judge, "UEP_INFERENCE_URL")
    host, port = match.group(1), int(match.group(2))
    [inference] = containers(WORKLOADS["inference"])
    health_port = int(env_value(inference, "UEP_HEALTH_PORT"))
    container_ports = {p["name"]: p["containerPort"] for p in inference["ports"]}
    services = [d for d in _documents(BASE / "inference.yaml") if d["kind"] == "Service"]
    [service] = [s for s in services if s["metadata"]["name"] == host]
    [target] = [p["targetPort"] for p in service["spec"]["ports"] if p["port"] == port]
    assert container_ports.get(target, target) == health_port
