"""PostgreSQL is the record of truth: work whose messages were lost is recovered from it.

Each scenario writes the state a crash or a lost message leaves behind straight into PostgreSQL (no event
is published), then waits for the running scheduler's reconcile loop to finish the job.
"""

import uuid

from sqlalchemy import text

from .helpers import all_results, wait_done


def _ids(db) -> dict:
    with db.connect() as c:
        return dict(
            c.execute(
                text(
                    "SELECT (SELECT id FROM tenants WHERE slug = 'default') AS tenant, "
                    "(SELECT id FROM benchmarks WHERE slug = 'gsm8k' ORDER BY created_at DESC LIMIT 1) AS benchmark, "
                    "(SELECT id FROM models WHERE name = 'uep-oracle') AS model"
                )
            )
            .one()
            ._mapping
        )


def _insert_evaluation(c, ids: dict, status: str, total: int, dispatched: int, age_s: int) -> uuid.UUID:
    evaluation_id = uuid.uuid4()
    c.execute(
        text(
            "INSERT INTO evaluations (id, tenant_id, benchmark_id, model_id, status, priority, sample_limit, repeats, "
            "total_items, dispatched_items, completed_items, error_items, config, trace_context, created_at, updated_at, started_at) "
            "VALUES (:id, :t, :b, :m, :st, 'normal', :n, 1, :n, :d, 0, 0, '{}', '{}', now() - make_interval(secs => :age), now(), "
            "CASE WHEN CAST(:st AS varchar) = 'running' THEN now() END)"
        ),
        {
            "id": evaluation_id,
            "t": ids["tenant"],
            "b": ids["benchmark"],
            "m": ids["model"],
            "st": status,
            "n": total,
            "d": dispatched,
            "age": age_s,
        },
    )
    return evaluation_id


def test_expired_leases_are_dispatched_again(gateway, db):
    """Items 0–2 were leased but their SampleDispatched messages were lost (leases expired, no results);
    items 3–5 were never dispatched. All six end up scored exactly once."""
    ids = _ids(db)
    with db.begin() as c:
        evaluation_id = _insert_evaluation(c, ids, "running", total=6, dispatched=3, age_s=600)
        c.execute(
            text(
                "INSERT INTO sample_leases (evaluation_id, sample_id, repeat, arm, state, attempt, leased_at, lease_expires_at) "
                "SELECT :e, id, 0, 'main', 'leased', 1, now() - interval '10 minutes', now() - interval '5 minutes' "
                "FROM samples WHERE benchmark_id = :b AND ordinal < 3"
            ),
            {"e": evaluation_id, "b": ids["benchmark"]},
        )
    final = wait_done(gateway, str(evaluation_id), timeout_s=60)
    assert final["status"] == "completed"
    assert (final["summary"]["n"], final["summary"]["correct"]) == (6, 4)  # oracle misses ordinals 2 and 5
    results = all_results(gateway, str(evaluation_id))
    assert [(r["sample_ordinal"], r["attempt"]) for r in results] == [(0, 2), (1, 2), (2, 2), (3, 1), (4, 1), (5, 1)]
    with db.connect() as c:
        leases = c.execute(
            text("SELECT count(*), max(attempt) FROM sample_leases WHERE evaluation_id = :e"), {"e": evaluation_id}
        ).one()
    assert tuple(leases) == (6, 2)


def test_pending_evaluation_whose_request_event_was_lost_is_admitted(gateway, db):
    ids = _ids(db)
    with db.begin() as c:
        evaluation_id = _insert_evaluation(c, ids, "pending", total=3, dispatched=0, age_s=60)
    final = wait_done(gateway, str(evaluation_id), timeout_s=60)
    assert final["status"] == "completed" and final["started_at"] is not None
    assert [r["is_correct"] for r in all_results(gateway, str(evaluation_id))] == [True, True, False]
