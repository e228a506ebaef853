"""``UEP_STACK_PORT_BASE`` of the local stack (deploy/local/uep_stack.py): every port it gives is a real port.

The stack's ports are the base plus fixed offsets (Triton 8000-8002, gateway 8080, the services' health
ports 8091-8095, the broker 9092 and its controller 9093), so the highest usable base is 65535 - 9093 = 56442.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import uep_stack  # deploy/local is on sys.path (tests/conftest.py)

ROOT = uep_stack.ROOT


def ports(cfg: uep_stack.StackConfig) -> list[int]:
    return cfg.ports()


def test_the_highest_usable_base_is_computed_from_the_highest_offset() -> None:
    assert max(uep_stack.PORT_OFFSETS.values()) == 9093  # the broker's controller
    assert uep_stack.MAX_PORT_BASE == 65535 - 9093 == 56442


@pytest.mark.parametrize("base", [0, 10000, 56442])
def test_a_usable_base_moves_every_port(monkeypatch: pytest.MonkeyPatch, base: int) -> None:
    monkeypatch.setenv("UEP_STACK_PORT_BASE", str(base))
    cfg = uep_stack.config()
    assert (
        cfg.broker_port == base + 9092
        and cfg.controller_port == base + 9093
        and cfg.gateway_port == base + 8080
        and cfg.triton_grpc == base + 8001
    )
    assert cfg.service_ports == {
        n: base + p for n, p in zip(["scheduler", "inference", "scorer", "judge", "reporter"], range(8091, 8096), strict=True)
    }
    assert len(ports(cfg)) == 11  # broker, controller, Triton's three, gateway, five health ports
    assert all(1 <= p <= 65535 for p in ports(cfg))
    assert len(set(ports(cfg))) == len(ports(cfg))


@pytest.mark.parametrize("base", ["56443", "60000", "-1", "ten", "1e4"])
def test_an_unusable_base_is_refused_naming_the_highest_usable_base(monkeypatch: pytest.MonkeyPatch, base: str) -> None:
    monkeypatch.setenv("UEP_STACK_PORT_BASE", base)
    with pytest.raises(uep_stack.StackConfigError) as info:
        uep_stack.config()
    assert "UEP_STACK_PORT_BASE" in str(info.value) and "56442" in str(info.value)


def test_the_cli_refuses_before_starting_anything(tmp_path) -> None:
    env = {"PATH": "/usr/bin:/bin", "UEP_STACK_PORT_BASE": "60000", "UEP_STACK_RUN_DIR": str(tmp_path / "run")}
    r = subprocess.run(
        [sys.executable, str(ROOT / "deploy" / "local" / "uep_stack.py"), "up"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert "UEP_STACK_PORT_BASE=60000 is out of range" in r.stderr and "56442" in r.stderr
    assert not (tmp_path / "run").exists()  # nothing was started, not even the run directory
