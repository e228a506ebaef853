"""The upload page lists a metric's parameters from the ``params_schema`` that GET /v1/metrics publishes
(``paramLines`` of the UI's benchmarks.js, run in Node on the schema of a real parameter model)."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from uep_common.contract.metric_params import params_schema

STATIC = Path(__file__).resolve().parents[2] / "services/gateway/src/uep_gateway/ui/static"


def _param_lines(schema: dict) -> list[str]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = f"const m = await import('./benchmarks.js'); console.log(JSON.stringify(m.paramLines({json.dumps(schema)})));"
    done = subprocess.run([node, "--input-type=module", "-e", script], cwd=STATIC, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_each_parameter_is_shown_with_type_default_bounds_unit_and_description():
    lines = _param_lines(params_schema("fuzzy_match"))
    assert (
        "threshold: number, default 90, >= 0, <= 100, points (0-100) — minimum similarity for a correct answer, inclusive"
        in lines
    )
    assert (
        "regexes_to_ignore: list of string, default [] — regexes whose matches are deleted first, as lm-evaluation-harness exact_match"
        in lines
    )
    assert len(lines) == 9


def test_required_and_enum_parameters():
    regex = _param_lines(params_schema("regex_match"))
    assert regex[0].startswith("pattern: string, required — regex searched") and regex[1].startswith("ignore_case: boolean")
    assert _param_lines(params_schema("token_f1"))[0].startswith('style: "squad" | "drop", default "squad" — ')
    assert _param_lines(params_schema("loglik_multiple_choice")) == []
