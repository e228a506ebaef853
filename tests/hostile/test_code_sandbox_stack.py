"""A hostile custom code benchmark on the real stack.

The uploader's ``reference.test`` tries to kill its parent (the scorer, before the sandbox), to reach
the stack's PostgreSQL on its loopback port (directly and by entering the parent's network namespace), to read the
scorer's environment (its ``UEP_DATABASE_URL``) through ``/proc`` and to leave a file in the host's ``/tmp``;
any attack that works makes it raise, so the one correct item would no longer pass. A second test kills
every process it can (``kill(-1)``), a model output forges through ``gc``/frames. The model is ``uep-judge``,
which answers a prompt holding ``[[say:TEXT]]`` with TEXT (deploy/model-server judge_stub), so each item's
completion is chosen here. Asserted: the evaluation completes, the scorer process is the same and healthy,
no marker file exists on the host, and only the correct item under the merely-probing test passes.
"""

from __future__ import annotations

import json
import os
import uuid

import httpx

from integration.helpers import all_results, submit, wait_done
from scorer.test_metrics_sandbox import _alive
from servers import config as servers_config

PROBING_TEST = '''
import ctypes, os, socket

def _attacks(marker):
    """Each attack that works is reported; the sandbox must make all of them fail."""
    worked = []
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.kill(os.getppid(), 9) == 0 and os.getppid() != 1:
        worked.append("killed parent")
    try:
        socket.create_connection(("127.0.0.1", PG_PORT), timeout=2).close()
        worked.append("postgres reachable")
    except OSError:
        pass
    for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
        try:
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
            if libc.setns(fd, 0x40000000) == 0:
                worked.append("setns")
        except OSError:
            pass
        try:
            if b"postgresql" in open(f"/proc/{pid}/environ", "rb").read():
                worked.append("read a database URL from /proc")
        except OSError:
            pass
    try:
        open(marker, "w").write("x")
    except OSError:
        pass
    return worked

def check(candidate):
    worked = _attacks("MARKER")
    assert not worked, worked
    assert candidate(1) == 2 and candidate(-5) == -4
'''

KILL_ALL_TEST = """
import ctypes
def check(candidate):
    ctypes.CDLL(None).kill(-1, 9)
    assert candidate(1) == 2
"""

CORRECT = "```python\ndef inc(x):\n    return x + 1\n```"
WRONG = "```python\ndef inc(x):\n    return x\n```"
FORGER = (
    "```python\ndef inc(x):\n"
    "    import gc, sys\n"
    "    frame = sys._getframe()\n"
    "    while frame is not None:\n"
    "        for v in list(frame.f_locals.values()):\n"
    "            if callable(v) and getattr(v, '__name__', '') in ('finish', 'fail'):\n"
    "                try:\n                    v(True)\n                except BaseException:\n                    pass\n"
    "        frame = frame.f_back\n"
    "    for obj in gc.get_objects():\n"
    "        if callable(obj) and getattr(obj, '__name__', '') == 'finish':\n"
    "            obj(True)\n"
    "    return x\n```"
)


def _scorer_pid(stack) -> int:
    return int((stack.run_dir / "pids" / "scorer.pid").read_text())


def test_hostile_code_benchmark_cannot_harm_the_scorer_or_forge_a_pass(stack, gateway):
    marker = f"/tmp/uep-hostile-code-{uuid.uuid4().hex}"
    probing = PROBING_TEST.replace("MARKER", marker).replace("PG_PORT", str(servers_config().pg_port))
    rows = [
        ("correct", CORRECT, probing),
        ("wrong", WRONG, probing),
        ("forger", FORGER, probing),
        ("kill_all", CORRECT, KILL_ALL_TEST),
    ]
    data = "\n".join(
        json.dumps(
            {
                "id": name,
                "input": {"question": f"Write inc. [[say:{output}]]"},
                "reference": {"prompt": 'def inc(x):\n    """x + 1"""\n', "test": test, "entry_point": "inc"},
            }
        )
        for name, output, test in rows
    )
    slug = f"hostile-code-{uuid.uuid4().hex[:8]}"
    spec = {
        "slug": slug,
        "name": slug,
        "category": "custom",
        "capability_dimensions": ["code"],
        "prompt": {"template": "{{ question }}", "max_tokens": 256},
        "metric": {"name": "humaneval_pass_at_1", "params": {"timeout_s": 10}},
    }
    r = gateway.post("/v1/benchmarks", data={"spec": json.dumps(spec)}, files={"file": ("code.jsonl", data.encode())})
    assert r.status_code == 201, r.text
    scorer_pid = _scorer_pid(stack)
    assert _alive(scorer_pid)

    evaluation_id = submit(gateway, benchmark=slug, model="uep-judge")
    final = wait_done(gateway, evaluation_id, timeout_s=120)
    assert final["status"] == "completed", final

    items = {item["external_id"]: item for item in all_results(gateway, evaluation_id)}
    assert sorted(items) == sorted(name for name, _, _ in rows), items
    verdicts = {name: (items[name]["is_correct"], (items[name].get("metrics") or {}).get("status")) for name in items}
    assert verdicts == {
        "correct": (True, "passed"),  # the probing test's attacks all failed, so it went on to check()
        "wrong": (False, "failed"),
        "forger": (False, "failed"),
        "kill_all": (False, "failed"),  # kill(-1) reached only the sandbox's own candidate process
    }, verdicts

    assert _scorer_pid(stack) == scorer_pid and _alive(scorer_pid)  # never killed, never restarted
    health = httpx.get(f"http://127.0.0.1:{stack.service_ports['scorer']}/healthz", timeout=5)
    assert health.status_code == 200
    assert not os.path.exists(marker)
