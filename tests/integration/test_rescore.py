"""Rescoring end to end: stored outputs are scored again with the current metric versions without calling
the model; replaced scores stay in score_history; the rescore reports what changed."""

import time

from sqlalchemy import text

from uep_scorer.metrics import get_metric

from .helpers import all_results, db_rows, submit, wait_done


def _wait_rescore(gateway, evaluation_id: str, rescore_id: str, timeout_s: float = 60) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        body = gateway.get(f"/v1/evaluations/{evaluation_id}/rescores/{rescore_id}").json()
        if body["status"] != "pending":
            return body
        time.sleep(0.2)
    raise AssertionError(f"rescore not finished: {body}")


def test_rescore_restores_scores_of_an_old_scorer_version(gateway, db):
    evaluation_id = submit(gateway, benchmark="gsm8k", model="uep-oracle", sample_limit=6)
    before = wait_done(gateway, evaluation_id)
    assert before["summary"]["correct"] == 4
    # Pretend ordinals 0 and 2 were scored by an older, buggy scorer version: verdicts inverted.
    with db.begin() as c:
        c.execute(
            text(
                "UPDATE sample_results r SET is_correct = NOT r.is_correct, score = 1 - r.score, metric_version = '0' "
                "FROM samples s WHERE s.id = r.sample_id AND r.evaluation_id = :e AND s.ordinal IN (0, 2)"
            ),
            {"e": evaluation_id},
        )
        calls_before = c.execute(
            text("SELECT count(*) FROM sample_leases WHERE evaluation_id = :e"), {"e": evaluation_id}
        ).scalar()

    r = gateway.post(f"/v1/evaluations/{evaluation_id}/rescore")
    assert r.status_code == 202, r.text
    v = get_metric("gsm8k_numeric_exact_match").version  # the scorer's current version
    assert r.json()["old_metric_versions"] == {"gsm8k_numeric_exact_match": ["0", v]}
    again = gateway.post(f"/v1/evaluations/{evaluation_id}/rescore")
    assert again.status_code == 409 and again.json()["detail"][0]["type"] == "rescore_pending"

    done = _wait_rescore(gateway, evaluation_id, r.json()["id"])
    assert done["status"] == "completed"
    assert (done["total_items"], done["done_items"], done["flipped_items"]) == (6, 6, 2)
    assert (done["to_correct"], done["to_incorrect"]) == (1, 1)  # ordinal 0 back to correct, 2 back to wrong
    assert done["new_metric_versions"] == {"gsm8k_numeric_exact_match": [v]}
    assert done["new_summary"]["correct"] == 4 and done["new_summary"]["accuracy"] == before["summary"]["accuracy"]

    after = gateway.get(f"/v1/evaluations/{evaluation_id}").json()
    assert after["summary"] == done["new_summary"]
    assert [x["is_correct"] for x in all_results(gateway, evaluation_id)] == [True, True, False, True, True, False]
    history = db_rows(
        db,
        "SELECT s.ordinal, h.metric_version, h.is_correct FROM score_history h JOIN sample_results r ON r.id = h.result_id "
        "JOIN samples s ON s.id = r.sample_id WHERE h.evaluation_id = :e ORDER BY s.ordinal",
        e=evaluation_id,
    )
    ((calls_after,),) = db_rows(db, "SELECT count(*) FROM sample_leases WHERE evaluation_id = :e", e=evaluation_id)
    assert [tuple(h) for h in history] == [
        (0, "0", False),
        (1, v, True),
        (2, "0", True),
        (3, v, True),
        (4, v, True),
        (5, v, False),
    ]
    assert calls_after == calls_before  # the model was not called again


def test_rescore_refuses_unfinished_or_unknown(gateway):
    import uuid

    r = gateway.post(f"/v1/evaluations/{uuid.uuid4()}/rescore")
    assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["path", "evaluation_id"]
    evaluation_id = submit(gateway, benchmark="humaneval", model="smollm2-135m-instruct", sample_limit=1)
    r = gateway.post(f"/v1/evaluations/{evaluation_id}/rescore")
    assert r.status_code == 409 and r.json()["detail"][0]["type"] == "not_finished"
    wait_done(gateway, evaluation_id, timeout_s=120)
