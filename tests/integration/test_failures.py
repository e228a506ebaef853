"""Failures are reported, never dropped: a model its endpoint does not serve is refused at creation; an
evaluation cancelled in flight keeps what it stored."""

from sqlalchemy import select, text

from .helpers import register_model, submit, wait_done


async def test_a_model_its_endpoint_does_not_serve_is_refused_at_creation(db, stack):
    """The creation check (``uep_gateway.usecases.planning.check_models_answer``, which ``POST /v1/evaluations``
    runs with ``UEP_MODEL_READY_CHECK``) asked of the stack's real Triton and of a closed port: a 409
    ``model_unavailable`` naming the field that named the model. The test stack's gateway runs with the check off,
    since the fault tests register models that must fail only after creation."""
    import uuid

    import pytest

    from uep_common.runtime.session import make_async_engine, make_sessionmaker
    from uep_common.tables.models import Evaluation, Model
    from uep_gateway.errors import DomainError
    from uep_gateway.model_health import ModelHealth
    from uep_gateway.schemas import EvaluationCreate
    from uep_gateway.usecases.planning import check_models_answer

    ghost = register_model(db, f"grpc://127.0.0.1:{stack.triton_grpc}", "no_such_triton_model", "ghost")
    down = register_model(db, "grpc://127.0.0.1:9", "uep_oracle", "down")  # nothing listens on port 9
    http_ghost = register_model(db, f"http://127.0.0.1:{stack.triton_http}", "no_such_triton_model", "hghost")
    engine = make_async_engine(stack.database_url)
    health = ModelHealth(timeout_s=3.0, cache_s=0.0)
    try:
        async with make_sessionmaker(engine)() as session:
            ids = {
                m.name: m.id
                for m in (await session.scalars(select(Model).where(Model.name.in_([ghost, down, http_ghost, "uep-oracle"]))))
            }

            async def refusal(body: EvaluationCreate, models: list[str]) -> dict:
                evs = [Evaluation(id=uuid.uuid4(), model_id=ids[m]) for m in models]
                with pytest.raises(DomainError) as info:
                    await check_models_answer(health, session, body, evs)
                assert info.value.kind == "conflict"  # answered 409
                (problem,) = info.value.detail
                return problem

            for name, why in (
                (ghost, "does not serve 'no_such_triton_model'"),
                (down, "unreachable"),
                (http_ghost, "does not serve"),
            ):
                problem = await refusal(EvaluationCreate(benchmark="gsm8k", model=name, sample_limit=3), [name])
                assert (tuple(problem["loc"]), problem["type"]) == (("body", "model"), "model_unavailable")
                assert f"model {name}@1 cannot be evaluated now" in problem["msg"] and why in problem["msg"]
            # in a batch, the field that named it; a served model passes
            batch = EvaluationCreate(benchmark="gsm8k", models=["uep-oracle", down], sample_limit=2)
            assert tuple((await refusal(batch, ["uep-oracle", down]))["loc"]) == ("body", "models", 1)
            oracle = [Evaluation(id=uuid.uuid4(), model_id=ids["uep-oracle"])]
            await check_models_answer(health, session, EvaluationCreate(benchmark="gsm8k", model="uep-oracle"), oracle)
    finally:
        await engine.dispose()


def test_cancel_stops_dispatch_and_discards_late_results(gateway, db):
    """SmolLM2 (one slot, ~3 s per GSM8K answer) keeps one item in flight; after the cancel nothing more is
    dispatched, stored results stay, and the item that was in flight is discarded when it arrives."""
    import time

    evaluation_id = submit(gateway, benchmark="gsm8k", model="smollm2-135m-instruct", sample_limit=20)

    def in_flight() -> int:
        with db.connect() as c:
            return c.execute(
                text("SELECT count(*) FROM sample_leases WHERE evaluation_id = :e AND state = 'leased'"), {"e": evaluation_id}
            ).scalar()

    deadline = time.monotonic() + 120
    # one result stored and the next item in flight (its lease is taken a few ms after the score arrives)
    while gateway.get(f"/v1/evaluations/{evaluation_id}").json()["progress"]["completed"] < 1 or in_flight() < 1:
        assert time.monotonic() < deadline, "no result with an item in flight within 120 s"
        time.sleep(0.05)
    r = gateway.post(f"/v1/evaluations/{evaluation_id}/cancel")
    assert r.status_code == 200 and r.json()["status"] == "cancelled" and r.json()["error"] == "cancelled by request"
    again = gateway.post(f"/v1/evaluations/{evaluation_id}/cancel")
    assert again.status_code == 409 and again.json()["detail"][0]["type"] == "already_finished"
    with db.connect() as c:
        leased_at_cancel = c.execute(
            text("SELECT count(*) FROM sample_leases WHERE evaluation_id = :e"), {"e": evaluation_id}
        ).scalar()
    # the scheduler leases at most 2 × the model's capacity (1 for SmolLM2) ahead
    assert 1 <= leased_at_cancel - r.json()["progress"]["completed"] <= 2
    deadline = time.monotonic() + 60
    while True:  # every item leased but not stored at the cancel comes back and is discarded, not stored
        body = gateway.get(f"/v1/evaluations/{evaluation_id}").json()
        if body["progress"]["completed"] + body["progress"]["discarded"] == leased_at_cancel:
            break
        assert time.monotonic() < deadline, f"in-flight items never came back: {body}"
        time.sleep(0.3)
    time.sleep(2.5)  # a reconcile tick or two: still nothing new may be dispatched
    with db.connect() as c:
        leased_now, stored = c.execute(
            text(
                "SELECT (SELECT count(*) FROM sample_leases WHERE evaluation_id = :e), "
                "(SELECT count(*) FROM sample_results WHERE evaluation_id = :e)"
            ),
            {"e": evaluation_id},
        ).one()
    assert leased_now == leased_at_cancel
    assert body["status"] == "cancelled" and stored == body["progress"]["completed"] < 20
    assert body["progress"]["discarded"] >= 1


def test_stop_loss_ends_a_failing_evaluation_early(gateway, db, stack):
    """Every call to a model Triton does not serve fails; after 20 results (error rate 100 % > 50 %) the
    evaluation stops itself as failed with the reason, long before its 100 items."""
    name = register_model(db, f"grpc://127.0.0.1:{stack.triton_grpc}", "no_such_triton_model", "stoploss")
    evaluation_id = submit(gateway, benchmark="gsm8k", model=name, sample_limit=100)
    final = wait_done(gateway, evaluation_id)
    assert final["status"] == "failed"
    assert final["error"].startswith("stop-loss: ") and "> 50% after at least 20 items" in final["error"]
    assert 20 <= final["summary"]["n"] < 100 and final["summary"]["errors"] == final["summary"]["n"]
