"""Every fixed ``UEP_*`` variable is read through a pydantic-settings class, and those classes read the same
variables, with the same defaults, as the direct reads they replaced."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "libs", ROOT / "services"]


def _direct_uep_reads(path: Path) -> list[str]:
    """``os.environ.get("UEP_…")``, ``os.getenv("UEP_…")`` and ``os.environ["UEP_…"]`` in ``path``, as
    ``file:line name``. Reads of a variable whose name is data (an API key reference) are not settings."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        name: ast.expr | None = None
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("os.environ.get", "os.getenv") and node.args:
            name = node.args[0]
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
            name = node.slice
        if isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.startswith("UEP_"):
            found.append(f"{path}:{getattr(node, 'lineno', 0)} {name.value}")
    return found


def test_no_direct_reads_of_uep_variables_in_the_library_and_services() -> None:
    files = [f for src in SOURCES for f in src.rglob("*.py") if "/tests/" not in str(f) and ".venv" not in f.parts]
    assert len(files) > 100  # the scan saw the code
    assert [r for f in files for r in _direct_uep_reads(f)] == []


def test_the_scan_finds_a_direct_read(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text(
        'import os\nA = os.environ.get("UEP_X", "1")\nB = os.getenv("UEP_Y")\nC = os.environ["UEP_Z"]\nD = os.environ.get(ref)\n'
    )
    assert sorted(r.rsplit(" ", 1)[1] for r in _direct_uep_reads(src)) == ["UEP_X", "UEP_Y", "UEP_Z"]


def test_seed_registers_triton_at_the_configured_address(monkeypatch: pytest.MonkeyPatch) -> None:
    from uep_common.builtin.seed import triton_endpoint

    for var in ("UEP_TRITON_HOST", "UEP_TRITON_PROTOCOL", "UEP_TRITON_HTTP_PORT", "UEP_TRITON_GRPC_PORT"):
        monkeypatch.delenv(var, raising=False)
    assert triton_endpoint() == "grpc://127.0.0.1:8001"
    monkeypatch.setenv("UEP_TRITON_HOST", "triton.triton.svc")
    monkeypatch.setenv("UEP_TRITON_GRPC_PORT", "9001")
    assert triton_endpoint() == "grpc://triton.triton.svc:9001"
    monkeypatch.setenv("UEP_TRITON_PROTOCOL", "http")
    monkeypatch.setenv("UEP_TRITON_HTTP_PORT", "9000")
    assert triton_endpoint() == "http://triton.triton.svc:9000"


def test_site_currency_and_sandbox_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from uep_common.contract.costs import CostSettings
    from uep_common.sandbox.settings import SandboxSettings
    from uep_scorer.settings import ScorerSettings

    for var in ("UEP_BUDGET_CURRENCY", "UEP_SANDBOX_MODE", "UEP_SANDBOX_PYTHON", "UEP_SANDBOX_POOL"):
        monkeypatch.delenv(var, raising=False)
    assert CostSettings().budget_currency == "USD"
    assert (SandboxSettings().sandbox_mode, SandboxSettings().sandbox_python, SandboxSettings().sandbox_pool) == (
        "bwrap",
        None,
        2,
    )
    monkeypatch.setenv("UEP_BUDGET_CURRENCY", "EUR")
    monkeypatch.setenv("UEP_SANDBOX_MODE", "unsafe_process")
    monkeypatch.setenv("UEP_SANDBOX_POOL", "5")
    assert CostSettings().budget_currency == "EUR"
    scorer = ScorerSettings()
    assert (scorer.sandbox_mode, scorer.sandbox_pool) == ("unsafe_process", 5)


def test_create_user_password_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from uep_common.admin import _new_password

    monkeypatch.setenv("UEP_NEW_PASSWORD", "correct horse battery staple")
    assert _new_password() == "correct horse battery staple"
