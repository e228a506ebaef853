"""Scaling and faults on the real broker (Apache Kafka), on the test stack:

- a second scorer instance joins the scorer's consumer group, the two share the partitions of the outputs topic
  (each receives records of the same evaluation), and a ``kill -9`` of one hands its partitions to the other:
  the evaluation completes with every item scored exactly once and the oracle's verdicts;
- a ``kill -9`` of the broker in the middle of an evaluation, then a start on the same log: the evaluation
  resumes within 15 s of the broker answering again and completes exactly once.

The oracle answers the MMLU item with ordinal i (i < 200) correctly iff ``i % 3 != 2``
(deploy/model-server/src/uep_model_server/oracle.py).
"""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

from .helpers import submit
from .lifecycle_helpers import counts, scheduler_with_short_leases, status_of, verdicts, wait_for, wait_status

OUTPUTS = "uep.output.generated.v1"


def _received(stack, instance: str, topic: str) -> float:
    """``uep_messages_in_total`` of ``topic`` summed over the handlers of one service instance (its /metrics)."""
    port = stack.health_port(instance)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    pattern = rf'^uep_messages_in_total\{{[^}}]*topic="{re.escape(topic)}"[^}}]*\}} ([0-9.e+]+)$'
    return sum(float(v) for v in re.findall(pattern, text, re.M))


@pytest.fixture(scope="module")
def short_leases(stack):
    """The scheduler restarted with 3 s leases (items lost with a killed process come back in seconds)."""
    with scheduler_with_short_leases(stack, max_attempts=20):
        yield stack


def _completed(gateway, evaluation_id: str) -> int:
    return status_of(gateway, evaluation_id)["progress"]["completed"]


def test_two_scorer_replicas_share_partitions_and_survive_a_kill_9(gateway, db, stack, short_leases):
    import uep_stack

    n = 120
    uep_stack.start_service(stack, "scorer-2")
    try:
        evaluation_id = submit(gateway, benchmark="mmlu", model="uep-oracle", sample_limit=n, max_in_flight=4, sampling="first")
        wait_for("40 results", lambda: _completed(gateway, evaluation_id) >= 40, 120)
        shares = {name: _received(stack, name, OUTPUTS) for name in ("scorer", "scorer-2")}
        assert all(v > 0 for v in shares.values()), shares  # both members were assigned partitions of the topic
        assert uep_stack.kill(stack, "scorer") is not None  # its partitions go to scorer-2 after the session timeout
        final = wait_status(gateway, evaluation_id, ("completed", "failed"), 180)
        after = _received(stack, "scorer-2", OUTPUTS)
    finally:
        uep_stack.stop(stack, ["scorer-2"])
        if uep_stack.read_pid(stack, "scorer") is None:
            uep_stack.start_service(stack, "scorer")
    time.sleep(1.0)  # a late duplicate, if any, would land now
    c = counts(db, evaluation_id)
    assert final["status"] == "completed"
    assert (c["results"], c["items"], c["errors"], c["completed_items"]) == (n, n, 0, n)  # exactly once
    assert verdicts(db, evaluation_id) == {i: i % 3 != 2 for i in range(n)}
    assert after > shares["scorer-2"]  # the survivor took over the rest


def test_a_broker_killed_mid_evaluation_resumes_within_15_s(gateway, db, stack, short_leases):
    import uep_stack

    n = 150
    evaluation_id = submit(gateway, benchmark="mmlu", model="uep-oracle", sample_limit=n, max_in_flight=4, sampling="first")
    wait_for("30 results", lambda: _completed(gateway, evaluation_id) >= 30, 120)
    uep_stack.kill(stack, "broker")
    at_kill = _completed(gateway, evaluation_id)
    uep_stack.start_broker(stack)
    back = time.monotonic()
    wait_for("progress after the restart", lambda: _completed(gateway, evaluation_id) > at_kill, 60, 0.1)
    resumed_s = time.monotonic() - back
    final = wait_status(gateway, evaluation_id, ("completed", "failed"), 180)
    time.sleep(1.0)
    c = counts(db, evaluation_id)
    assert final["status"] == "completed"
    assert (c["results"], c["items"], c["errors"], c["completed_items"]) == (n, n, 0, n)  # exactly once
    assert verdicts(db, evaluation_id) == {i: i % 3 != 2 for i in range(n)}
    assert at_kill < n
    assert resumed_s <= 15, f"resumed {resumed_s:.1f} s after the broker answered"
