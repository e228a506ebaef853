"""``uep`` against the real test stack, run as a user runs it (a subprocess of the console script).

The deterministic ``uep-oracle`` model answers a built-in item correctly iff ``ordinal % 3 != 2``, so the
first 6 GSM8K items score 4/6 = 0.6667, whose 95 % Wilson score interval is [0.29999, 0.90324]
(``uep_common.analytics.stats.wilson_interval(4, 6)``; Wilson 1927).
"""

from __future__ import annotations

import csv
import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

UEP = str(Path(sys.executable).with_name("uep"))


@pytest.fixture(scope="module")
def cli(stack, admin_key, tmp_path_factory):
    env = {k: v for k, v in os.environ.items() if not k.startswith("UEP_")}
    config = str(tmp_path_factory.mktemp("cli") / "c.json")
    env |= {"UEP_URL": stack.gateway_url, "UEP_API_KEY": admin_key, "UEP_CONFIG": config}

    def run(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run([UEP, *args], env=env, capture_output=True, text=True, timeout=timeout)

    run.config = config  # type: ignore[attr-defined]
    return run


def test_run_follow_ends_with_the_score_and_the_gate_decides_the_exit_code(cli):
    r = cli("run", "-b", "gsm8k", "-m", "uep-oracle", "--limit", "6", "--fail-under", "0.6", "--gate-on", "point", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    (view,) = out["evaluations"]
    assert view["status"] == "completed"
    assert (view["summary"]["correct"], view["summary"]["scored"]) == (4, 6)
    assert view["summary"]["ci_low"] == pytest.approx(0.29999, abs=1e-4)
    assert out["gate"][0]["passed"] is True and out["gate"][0]["value"] == pytest.approx(4 / 6)

    # the same run gated on the interval's lower bound (0.2999 < 0.6) fails with exit code 4
    r = cli("run", "-b", "gsm8k", "-m", "uep-oracle", "--limit", "6", "--fail-under", "0.6")
    assert r.returncode == 4, (r.stdout, r.stderr)
    assert "FAIL" in r.stdout and "95 % lower bound 0.3000 < 0.6" in r.stdout

    # every item, as CSV and as JSON Lines
    eid = view["id"]
    rows = list(csv.DictReader(io.StringIO(cli("results", eid, "--format", "csv").stdout)))
    assert [(int(x["sample_ordinal"]), x["is_correct"]) for x in rows] == [(i, str(i % 3 != 2)) for i in range(6)]
    lines = [json.loads(x) for x in cli("results", eid).stdout.splitlines()]
    assert [x["sample_ordinal"] for x in lines] == list(range(6))

    st = json.loads(cli("status", eid, "--json").stdout)
    assert st["id"] == eid and st["progress"]["completed"] == 6
    listed = json.loads(cli("list", "--json", "--benchmark", "gsm8k", "--limit", "50").stdout)
    assert eid in [e["id"] for e in listed]


def test_api_errors_are_one_line_naming_the_field(cli):
    r = cli("run", "-b", "gsm8k", "-m", "uep-oracle", "--limit", "0")
    assert r.returncode == 1
    assert r.stderr.strip().startswith("uep: 422 body.sample_limit:"), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = cli("status", "00000000-0000-0000-0000-000000000000")
    assert r.returncode == 1 and r.stderr.startswith("uep: 404 path.evaluation_id:"), r.stderr


def test_login_stores_the_key_privately(cli, stack, admin_key):
    r = cli("login", "--url", stack.gateway_url, "--api-key", admin_key)
    assert r.returncode == 0, r.stderr
    stored = Path(cli.config)
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
    assert json.loads(stored.read_text()) == {"url": stack.gateway_url, "api_key": admin_key}
    me = json.loads(cli("whoami", "--json").stdout)
    assert (me["tenant"]["slug"], me["role"]) == ("default", "admin")
    assert "signed in to" in r.stdout and "(mode 0600)" in r.stdout


def test_login_with_a_password_keeps_a_session(stack, tmp_path):
    creds = stack.admin_credentials()
    env = {k: v for k, v in os.environ.items() if not k.startswith("UEP_")} | {"UEP_CONFIG": str(tmp_path / "c.json")}
    r = subprocess.run(
        [UEP, "login", "--url", stack.gateway_url, "--username", creds["username"], "--password", creds["password"]],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    stored = json.loads((tmp_path / "c.json").read_text())
    assert set(stored) == {"url", "session", "csrf", "username"} and stored["username"] == creds["username"]
    # a cookie-authenticated write with the stored CSRF token is accepted (a 422 on the body, not a 403)
    r = subprocess.run(
        [UEP, "run", "-b", "gsm8k", "-m", "uep-oracle", "--limit", "0"], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 1 and r.stderr.startswith("uep: 422 body.sample_limit"), r.stderr
    r = subprocess.run([UEP, "logout"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and not (tmp_path / "c.json").exists()


def test_models_add_list_and_disable(cli, stack):
    import uuid

    name = f"cli-oracle-{uuid.uuid4().hex[:8]}"
    triton = f"http://127.0.0.1:{stack.triton_http}"
    r = cli("models", "add", name, "--endpoint", triton, "--triton-name", "uep_oracle", "--capacity", "4")
    assert r.returncode == 0 and r.stdout.strip() == f"registered {name}@1 (generation/uep)", r.stderr
    listed = {m["name"]: m for m in json.loads(cli("models", "list", "--json").stdout)}
    assert (listed[name]["max_in_flight"], listed[name]["owned"], listed[name]["active"]) == (4, True, True)
    # a model that does not speak the declared contract: one line naming the field and the tensor
    r = cli("models", "add", f"{name}-cls", "--endpoint", triton, "--triton-name", "uep_oracle", "--kind",
            "classification", "--class-names", "yes,no")  # fmt: skip
    assert r.returncode == 1 and r.stderr.startswith("uep: 422 body.contract: tensor 'text'"), r.stderr
    r = cli("models", "disable", f"{name}@1")
    assert r.returncode == 0 and r.stdout.strip() == f"{name}@1: deactivated", r.stderr
    r = cli("run", "-b", "gsm8k", "-m", name, "--limit", "1")
    assert r.returncode == 1 and "body.model" in r.stderr and "model_inactive" in r.stderr, r.stderr
