"""Failures are reported per item, never dropped: an unreachable model yields OutputGenerated errors, which
are stored, and the evaluation ends ``failed`` with every item accounted for."""

from .helpers import all_results, register_model, submit, wait_done


def test_missing_triton_model_fails_every_item_visibly(gateway, db, stack):
    name = register_model(db, f"grpc://127.0.0.1:{stack.triton_grpc}", "no_such_triton_model", "ghost")
    evaluation_id = submit(gateway, benchmark="gsm8k", model=name, sample_limit=3)
    final = wait_done(gateway, evaluation_id)
    assert final["status"] == "failed"
    assert final["error"] == "all 3 items failed; see the results for each item's error"
    assert final["summary"]["errors"] == 3 and final["summary"]["accuracy"] is None and final["summary"]["ci_low"] is None
    results = all_results(gateway, evaluation_id)
    assert len(results) == 3
    assert all(r["error"]["stage"] == "inference" and r["error"]["type"] == "triton_error" for r in results)
    assert all("no_such_triton_model" in r["error"]["message"] and r["is_correct"] is None for r in results)


def test_unreachable_endpoint_is_an_error_not_a_hang(gateway, db):
    name = register_model(db, "grpc://127.0.0.1:9", "uep_oracle", "down")  # nothing listens on port 9
    evaluation_id = submit(gateway, benchmark="mmlu", model=name, sample_limit=2)
    final = wait_done(gateway, evaluation_id, timeout_s=150)
    assert final["status"] == "failed" and final["summary"]["errors"] == 2
    assert {r["error"]["type"] for r in all_results(gateway, evaluation_id)} <= {"triton_error", "triton_unavailable", "timeout"}
