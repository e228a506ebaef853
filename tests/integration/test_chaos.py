"""One short, representative chaos run on the real stack (the full one — every service, the scheduler and a
broker restart, 500 samples, 5 times — is ``make bench-chaos``): kill -9 inference, then the reporter, during
a 100-sample evaluation; it completes with every sample scored exactly once and the oracle's verdicts.

The oracle answers the MMLU item with ordinal i (i < 200) correctly iff ``i % 3 != 2``
(deploy/model-server/src/uep_model_server/oracle.py), which is what a clean run gives.
"""

from __future__ import annotations

import time

import pytest

from .helpers import submit
from .lifecycle_helpers import counts, scheduler_with_short_leases, status_of, verdicts, wait_for, wait_status


@pytest.fixture(scope="module")
def short_leases(stack):
    """The scheduler restarted with 3 s leases (lost items come back in seconds); defaults restored after."""
    with scheduler_with_short_leases(stack, max_attempts=20):
        yield stack


def test_killed_inference_and_reporter_lose_nothing_and_score_nothing_twice(gateway, db, stack, short_leases):
    import uep_stack

    n = 100
    evaluation_id = submit(gateway, benchmark="mmlu", model="uep-oracle", sample_limit=n, max_in_flight=2, sampling="first")
    for at, name in ((10, "inference"), (40, "reporter")):
        wait_for(f"{at} results", lambda at=at: status_of(gateway, evaluation_id)["progress"]["completed"] >= at, 120)
        assert uep_stack.kill(stack, name) is not None  # kill -9, one service at a time
        time.sleep(1.5)
        uep_stack.start_service(stack, name)
    final = wait_status(gateway, evaluation_id, ("completed", "failed"), 120)
    time.sleep(1.0)  # a late duplicate, if any, would land now
    c = counts(db, evaluation_id)
    assert final["status"] == "completed"
    assert (c["results"], c["items"], c["errors"], c["completed_items"]) == (n, n, 0, n)  # exactly once
    assert verdicts(db, evaluation_id) == {i: i % 3 != 2 for i in range(n)}
    assert final["summary"]["correct"] == 67  # 100 - |{2, 5, …, 98}| = 100 - 33
