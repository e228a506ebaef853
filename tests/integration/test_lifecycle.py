"""Lifecycle and faults on the real stack: stop, retry, interrupted on a scheduler restart (and not with a
second live replica), per-sample timeout, dead letters and their redrive, leases that expire on a killed
inference worker or run out of attempts.

The module restarts the scheduler with short leases (3 s, at most 6 dispatches per item) so that lease
expiry is observable in seconds, and restores the defaults at the end.

Expected verdicts come from the oracle model's rule (deploy/model-server/.../oracle.py): it answers the item
with ordinal i correctly iff ``i % 3 != 2``.
"""

from __future__ import annotations

import json
import time

import pytest
from sqlalchemy import text

from .helpers import register_model, submit
from .lifecycle_helpers import Forwarder, counts, scheduler_with_short_leases, status_of, verdicts, wait_for, wait_status

LEASE_ENV = {"UEP_LEASE_SECONDS": "3", "UEP_MAX_LEASE_ATTEMPTS": "6"}


def oracle_correct(n: int) -> dict[int, bool]:
    """The oracle's verdicts for ordinals 0..n-1 (correct iff ordinal % 3 != 2)."""
    return {i: i % 3 != 2 for i in range(n)}


@pytest.fixture(scope="module")
def short_leases(stack):
    """The scheduler restarted (gracefully) with 3 s leases; restored with the defaults afterwards."""
    with scheduler_with_short_leases(stack, max_attempts=int(LEASE_ENV["UEP_MAX_LEASE_ATTEMPTS"])):
        yield stack


def _dead_letters(gateway, evaluation_id: str) -> list[dict]:
    r = gateway.get("/v1/dead-letters", params={"evaluation_id": evaluation_id, "limit": 500})
    assert r.status_code == 200, r.text
    return r.json()["items"]


def test_stop_stores_in_flight_results_and_ends_stopped(gateway, db, short_leases):
    evaluation_id = submit(gateway, benchmark="gsm8k", model="uep-oracle", sample_limit=100, max_in_flight=2)
    wait_for("3 results", lambda: status_of(gateway, evaluation_id)["progress"]["completed"] >= 3, 60)
    r = gateway.post(f"/v1/evaluations/{evaluation_id}/stop")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "stopped" and body["error"] == "stopped by request"
    assert body["summary"] is not None and body["summary"]["n"] >= 3
    leased = counts(db, evaluation_id)["leases"]  # read after the stop committed: nothing is leased after it
    # every item leased before the stop comes back and is stored (not discarded, unlike a cancel)
    wait_for("in-flight results stored", lambda: counts(db, evaluation_id)["results"] == leased, 30)
    time.sleep(2.5)  # a couple of reconcile ticks: still nothing new dispatched
    after = counts(db, evaluation_id)
    assert after["leases"] == leased and after["results"] == leased < 100
    final = status_of(gateway, evaluation_id)
    assert final["status"] == "stopped" and final["progress"]["discarded"] == 0
    assert final["summary"]["n"] == leased == final["progress"]["completed"]  # the partial summary was refreshed
    again = gateway.post(f"/v1/evaluations/{evaluation_id}/stop")
    assert again.status_code == 409 and again.json()["detail"][0]["type"] == "not_stoppable"
    assert "stopped" in again.json()["detail"][0]["msg"]


def test_retry_reruns_only_failed_items_and_dead_letters_them(gateway, db, stack, short_leases):
    fwd = Forwarder(stack.triton_http)  # starts "down": every call fails (connection refused), after 3 tries
    try:
        model = register_model(db, f"http://127.0.0.1:{fwd.port}", "uep_oracle", "flaky")
        evaluation_id = submit(gateway, benchmark="gsm8k", model=model, sample_limit=9, max_in_flight=1)
        wait_for("2 failed items", lambda: status_of(gateway, evaluation_id)["progress"]["errors"] >= 2, 60)
        fwd.set("pass")  # the endpoint is back: the items dispatched from now on succeed
        first = wait_status(gateway, evaluation_id, ("completed", "failed"), 60)
        failed = first["progress"]["errors"]
        assert first["status"] == "completed" and 2 <= failed < 9

        with db.connect() as c:
            before = {
                row.sample_id: row
                for row in c.execute(
                    text("SELECT sample_id, id, score_event_id, attempt, error FROM sample_results WHERE evaluation_id = :e"),
                    {"e": evaluation_id},
                )
            }
        assert sum(r.error is not None for r in before.values()) == failed
        letters = wait_for("dead letters", lambda: (d := _dead_letters(gateway, evaluation_id)) and len(d) >= failed and d, 30)
        assert {d["source_topic"] for d in letters} == {"uep.sample.dispatched.v1"}
        assert all(d["reason"].startswith("triton_") and d["event_type"] == "SampleDispatched" for d in letters)

        r = gateway.post(f"/v1/evaluations/{evaluation_id}/retry")
        assert r.status_code == 202, r.text
        out = r.json()
        assert (out["previous_status"], out["failed_items"], out["unfinished_items"], out["undispatched_items"]) == (
            "completed",
            failed,
            0,
            0,
        )
        assert out["evaluation"]["status"] == "running" and out["evaluation"]["progress"]["completed"] == 9 - failed
        busy = gateway.post(f"/v1/evaluations/{evaluation_id}/retry")
        if busy.status_code == 409:  # unless it already finished again
            assert busy.json()["detail"][0]["type"] in ("not_retryable", "nothing_to_retry")

        final = wait_status(gateway, evaluation_id, ("completed", "failed"), 60)
        assert final["status"] == "completed" and final["progress"]["errors"] == 0
        assert final["summary"]["n"] == 9 and final["summary"]["correct"] == 6  # ordinals 2, 5, 8 are wrong
        assert verdicts(db, evaluation_id) == oracle_correct(9)
        with db.connect() as c:
            after = {
                row.sample_id: row
                for row in c.execute(
                    text("SELECT sample_id, id, score_event_id, attempt, error FROM sample_results WHERE evaluation_id = :e"),
                    {"e": evaluation_id},
                )
            }
            retired = c.execute(
                text("SELECT sample_id, reason, error IS NOT NULL FROM retired_results WHERE evaluation_id = :e"),
                {"e": evaluation_id},
            ).all()
        assert len(after) == 9
        for sample_id, old in before.items():
            new = after[sample_id]
            if old.error is None:  # finished: untouched (same row, same score event)
                assert (new.id, new.score_event_id, new.attempt) == (old.id, old.score_event_id, old.attempt)
            else:  # failed: run again, as a later attempt, the failed row kept aside
                assert new.error is None and new.id != old.id and new.attempt > old.attempt
        assert sorted((s, reason, e) for s, reason, e in retired) == sorted(
            (s, "retry", True) for s, old in before.items() if old.error is not None
        )
        c_ = counts(db, evaluation_id)
        assert (c_["completed_items"], c_["error_items"], c_["results"], c_["items"]) == (9, 0, 9, 9)
        nothing = gateway.post(f"/v1/evaluations/{evaluation_id}/retry")
        assert nothing.status_code == 409 and nothing.json()["detail"][0]["type"] == "nothing_to_retry"
    finally:
        fwd.close()


def test_retry_is_refused_for_a_running_or_unknown_evaluation(gateway, short_leases):
    evaluation_id = submit(gateway, benchmark="gsm8k", model="uep-oracle", sample_limit=60, max_in_flight=1)
    r = gateway.post(f"/v1/evaluations/{evaluation_id}/retry")
    assert r.status_code == 409, r.text
    detail = r.json()["detail"][0]
    assert detail["type"] == "not_retryable" and detail["loc"] == ["path", "evaluation_id"]
    assert detail["msg"].startswith(("evaluation is pending", "evaluation is running"))
    assert gateway.post(f"/v1/evaluations/{evaluation_id}/cancel").status_code == 200
    missing = gateway.post("/v1/evaluations/00000000-0000-0000-0000-000000000000/retry")
    assert missing.status_code == 404 and missing.json()["detail"][0]["type"] == "unknown_evaluation"


def test_redrive_reopens_a_dead_lettered_item(gateway, db, stack, short_leases):
    fwd = Forwarder(stack.triton_http)
    try:
        model = register_model(db, f"http://127.0.0.1:{fwd.port}", "uep_oracle", "redrive")
        evaluation_id = submit(gateway, benchmark="gsm8k", model=model, sample_limit=2)
        assert wait_status(gateway, evaluation_id, ("completed", "failed"), 60)["status"] == "failed"
        letters = wait_for("2 dead letters", lambda: (d := _dead_letters(gateway, evaluation_id)) and len(d) >= 2 and d, 30)
        fwd.set("pass")
        target = letters[0]
        r = gateway.post(f"/v1/dead-letters/{target['id']}/redrive")
        assert r.status_code == 202, r.text
        assert r.json()["reopened_item"] is True and r.json()["republished_to"] == "uep.sample.dispatched.v1"
        assert r.json()["dead_letter"]["redrive_count"] == 1
        final = wait_status(gateway, evaluation_id, ("completed",), 60)  # one item now scored, the other still failed
        assert final["summary"]["n"] == 2 and final["summary"]["errors"] == 1 and final["summary"]["correct"] == 1
        redriven = json.loads(target["body"])
        with db.connect() as c:
            row = c.execute(
                text("SELECT error, attempt FROM sample_results WHERE evaluation_id = :e AND sample_id = :s"),
                {"e": evaluation_id, "s": redriven["sample_id"]},
            ).one()
            retired = (
                c.execute(text("SELECT reason FROM retired_results WHERE evaluation_id = :e"), {"e": evaluation_id})
                .scalars()
                .all()
            )
        assert row.error is None and retired == ["redrive"]
        again = gateway.post(f"/v1/dead-letters/{target['id']}/redrive")  # finished items are never run again
        assert again.status_code == 409 and again.json()["detail"][0]["type"] == "already_finished"
        assert gateway.get("/v1/dead-letters/00000000-0000-0000-0000-000000000000").status_code == 404
    finally:
        fwd.close()


def test_undecodable_message_is_dead_lettered_with_its_reason_and_redriven(gateway, stack, short_leases):
    import asyncio

    from aiokafka import AIOKafkaProducer

    marker = f"garbage-{time.time_ns()}"

    async def publish() -> None:
        p = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{stack.broker_port}")
        await p.start()
        try:
            await p.send_and_wait("uep.output.generated.v1", json.dumps({"marker": marker}).encode(), key=marker.encode())
        finally:
            await p.stop()

    asyncio.run(publish())

    site = {"X-UEP-Site-Admin": "true"}  # a message without an evaluation belongs to no tenant

    def find(headers=site):
        params = {"source_topic": "uep.output.generated.v1", "limit": 500}
        items = gateway.get("/v1/dead-letters", params=params, headers=headers).json()["items"]
        return next((d for d in items if marker in d["body"]), None)

    letter = wait_for("the dead letter of the undecodable output", find, 30)
    assert letter["reason"].startswith("invalid OutputGenerated: ") and "evaluation_id" in letter["reason"]
    assert letter["evaluation_id"] is None and letter["redrive_count"] == 0
    # no tenant sees it, nor re-drives it: only the site admin acting across tenants
    assert find(headers={}) is None
    assert gateway.get(f"/v1/dead-letters/{letter['id']}").status_code == 404
    assert gateway.post(f"/v1/dead-letters/{letter['id']}/redrive").status_code == 404
    r = gateway.post(f"/v1/dead-letters/{letter['id']}/redrive", headers=site)
    assert r.status_code == 202 and r.json()["reopened_item"] is False
    # still undecodable: the scorer dead-letters it again, which refreshes the same record (idempotent consumer)
    seen = wait_for("seen again", lambda: (d := find()) and d["last_seen_at"] > letter["last_seen_at"] and d, 30)
    assert seen["id"] == letter["id"] and seen["redrive_count"] == 1


def test_per_sample_timeout_bounds_each_model_call(gateway, db, stack, short_leases):
    fwd = Forwarder(stack.triton_grpc)
    fwd.set("blackhole")  # the model never answers
    try:
        model = register_model(db, f"grpc://127.0.0.1:{fwd.port}", "uep_oracle", "hang")
        t0 = time.monotonic()
        evaluation_id = submit(gateway, benchmark="gsm8k", model=model, sample_limit=1, sample_timeout_s=0.5)
        final = wait_status(gateway, evaluation_id, ("completed", "failed"), 30)
        elapsed = time.monotonic() - t0
        with db.connect() as c:
            err = c.execute(text("SELECT error FROM sample_results WHERE evaluation_id = :e"), {"e": evaluation_id}).scalar_one()
        assert final["status"] == "failed" and err["type"] == "timeout" and err["message"].endswith("(after 3 attempts)")
        assert elapsed < 15  # 3 calls of 0.5 s + backoff, not the 120 s default
    finally:
        fwd.close()


def test_lease_expiring_on_a_killed_inference_worker_is_dispatched_again(gateway, db, stack, short_leases):
    import uep_stack

    fwd = Forwarder(stack.triton_grpc)
    fwd.set("blackhole")  # items reach inference and hang there
    try:
        model = register_model(db, f"grpc://127.0.0.1:{fwd.port}", "uep_oracle", "killed")
        evaluation_id = submit(gateway, benchmark="gsm8k", model=model, sample_limit=4, sample_timeout_s=60)
        wait_for("4 leases", lambda: counts(db, evaluation_id)["leases"] == 4, 30)
        time.sleep(0.5)  # inference has taken them
        assert uep_stack.kill(stack, "inference") is not None  # kill -9: the items it held are lost
        fwd.set("pass")
        uep_stack.start_service(stack, "inference")
        final = wait_status(gateway, evaluation_id, ("completed", "failed"), 60)
        c = counts(db, evaluation_id)
        assert final["status"] == "completed" and (c["results"], c["items"], c["errors"]) == (4, 4, 0)
        assert c["max_attempt"] >= 2  # the expired leases were dispatched again
        assert verdicts(db, evaluation_id) == oracle_correct(4)
    finally:
        fwd.close()


def test_lease_attempts_exhausted_item_is_recorded_failed_and_dead_lettered(gateway, db, stack, short_leases):
    # HTTP: a call into the black hole hangs for the client's 60 s (gRPC would give up on the handshake after
    # ~20 s, and the item would fail in inference before its 6 leases of 3 s run out)
    fwd = Forwarder(stack.triton_http)
    fwd.set("blackhole")
    try:
        model = register_model(db, f"http://127.0.0.1:{fwd.port}", "uep_oracle", "lost")
        evaluation_id = submit(gateway, benchmark="gsm8k", model=model, sample_limit=1, sample_timeout_s=120)
        final = wait_status(gateway, evaluation_id, ("completed", "failed"), 45)  # 6 leases of 3 s
        with db.connect() as c:
            err = c.execute(text("SELECT error FROM sample_results WHERE evaluation_id = :e"), {"e": evaluation_id}).scalar_one()
        assert final["status"] == "failed" and err["type"] == "lease_attempts_exhausted"
        assert err["message"].startswith("no result after 6 dispatch attempt(s)")
        assert counts(db, evaluation_id)["max_attempt"] == 6
        letter = wait_for(
            "the dead letter",
            lambda: next((d for d in _dead_letters(gateway, evaluation_id) if d["reason"].startswith("no result after")), None),
            30,
        )
        assert letter["source_topic"] == "uep.sample.dispatched.v1" and json.loads(letter["body"])["attempt"] == 6
    finally:
        fwd.close()
    time.sleep(1)
    assert counts(db, evaluation_id)["results"] == 1  # the hanging calls' late failures change nothing


def test_scheduler_restart_interrupts_running_evaluation_and_retry_resumes_it(gateway, db, stack, short_leases):
    import uep_stack

    evaluation_id = submit(gateway, benchmark="gsm8k", model="uep-oracle", sample_limit=60, max_in_flight=2)
    wait_for("5 results", lambda: status_of(gateway, evaluation_id)["progress"]["completed"] >= 5, 60)
    assert uep_stack.kill(stack, "scheduler") is not None  # kill -9
    time.sleep(1.0)
    uep_stack.start_service(stack, "scheduler", LEASE_ENV)
    body = wait_status(gateway, evaluation_id, ("interrupted",), 10)
    assert "/retry" in body["error"]
    time.sleep(1.5)  # results that were in flight may still land; nothing new is dispatched
    c = counts(db, evaluation_id)
    assert c["status"] == "interrupted" and c["completed_items"] == c["results"] < 60  # counters match the rows
    leases = c["leases"]
    time.sleep(2.0)
    assert counts(db, evaluation_id)["leases"] == leases

    r = gateway.post(f"/v1/evaluations/{evaluation_id}/retry")
    assert r.status_code == 202 and r.json()["previous_status"] == "interrupted"
    final = wait_status(gateway, evaluation_id, ("completed", "failed"), 90)
    c = counts(db, evaluation_id)
    assert final["status"] == "completed" and (c["results"], c["items"], c["errors"]) == (60, 60, 0)
    assert final["summary"]["correct"] == 40 and verdicts(db, evaluation_id) == oracle_correct(60)


def test_a_second_replica_starting_does_not_interrupt_the_live_ones(gateway, db, stack, short_leases):
    import uep_stack

    evaluation_id = submit(gateway, benchmark="gsm8k", model="uep-oracle", sample_limit=40, max_in_flight=2)
    wait_for("2 results", lambda: status_of(gateway, evaluation_id)["progress"]["completed"] >= 2, 60)
    # Its own consumer-group prefix: to PostgreSQL (instances, leases, outbox) it is a second replica, but it does
    # not join the first one's groups, so it reads every record too — what is asserted is that its start and
    # registration leave the live instance's evaluation alone (both handle every message idempotently).
    env = {
        **stack.service_env("scheduler"),
        **LEASE_ENV,
        "UEP_HEALTH_PORT": str(stack.service_ports["scheduler"] + 100),
        "UEP_CONSUMER_GROUP_PREFIX": "uep-replica-2",
    }
    uep_stack.spawn(stack, "scheduler-2", [str(uep_stack.BIN / "uep-scheduler")], env)
    try:
        uep_stack.wait_until(
            "/readyz", lambda: uep_stack._http_ok(f"http://127.0.0.1:{env['UEP_HEALTH_PORT']}/readyz"), 90, stack, "scheduler-2"
        )
        with db.connect() as c:
            live = c.execute(text("SELECT count(*) FROM scheduler_instances")).scalar()
        assert live == 2
        assert status_of(gateway, evaluation_id)["status"] in ("running", "completed")
    finally:
        uep_stack.stop(stack, ["scheduler-2"])
    final = wait_status(gateway, evaluation_id, ("completed", "failed", "interrupted"), 90)
    assert final["status"] == "completed" and final["summary"]["n"] == 40
