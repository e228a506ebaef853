"""Prometheus metrics (uep_common.runtime.metrics and the hooks that use it), without servers.

Values are read back from the process registry with ``REGISTRY.get_sample_value`` (prometheus-client), as
differences before/after, since every test of a session shares that registry.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from fastapi import Depends, FastAPI, HTTPException
from faststream.kafka import KafkaBroker, KafkaMessage, TestKafkaBroker

from uep_common.contract.events import ErrorInfo, ReportRequested, Topics
from uep_common.runtime import logs, metrics
from uep_common.runtime.consuming import consume
from uep_common.runtime.messaging import DEAD_LETTER_TOPIC
from uep_common.runtime.settings import CommonSettings

pytestmark = pytest.mark.unit

E, T = uuid.UUID(int=11), uuid.UUID(int=12)


def value(name: str, **labels: str) -> float:
    """The registry's current value of one sample (0 when it does not exist yet)."""
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def metrics_on() -> Iterator[None]:
    metrics.configure(CommonSettings(metrics_enabled=True))
    yield
    metrics.configure(CommonSettings())


def test_bounded_label_keeps_the_first_values_and_folds_the_rest():
    label = metrics.BoundedLabel(2)
    assert [label(v) for v in ["a", "b", "a", "c", None, "b", "d"]] == ["a", "b", "a", "other", "none", "b", "other"]
    assert label("x" * 300) == "other"  # a third distinct value, cut or not


def test_fold_top_keeps_the_largest_and_sums_the_rest():
    snapshot = {("normal", "t1"): 5.0, ("high", "t1"): 1.0, ("normal", "t2"): 4.0, ("normal", "t3"): 3.0, ("high", "t4"): 2.0}
    # totals: t1 = 6, t2 = 4, t3 = 3, t4 = 2; the two largest keep their slug
    assert metrics.fold_top(snapshot, 1, limit=2) == {
        ("normal", "t1"): 5.0,
        ("high", "t1"): 1.0,
        ("normal", "t2"): 4.0,
        ("normal", "other"): 3.0,
        ("high", "other"): 2.0,
    }


def test_reason_kinds_are_short_words_never_the_free_text():
    assert metrics.reason_kind("invalid SampleDispatched: input: Field required") == "undecodable"
    assert metrics.reason_kind("tenant_mismatch: event names tenant 1, evaluation 2 belongs to another") == "tenant_mismatch"
    assert metrics.reason_kind("triton_unavailable: connection refused (after 3 attempts)") == "triton_unavailable"
    assert metrics.reason_kind("lease attempts exhausted for 0b6e…") == "other"


def test_replace_sets_a_snapshot_and_drops_children_that_left(metrics_on):
    gauge = metrics.gauge("uep_test_snapshot", "test", ("topic", "partition"))
    gauge.replace({("a", "0"): 3.0, ("a", "1"): 1.0})
    gauge.replace({("a", "1"): 2.0})
    assert metrics.REGISTRY.get_sample_value("uep_test_snapshot", {"topic": "a", "partition": "0"}) is None
    assert value("uep_test_snapshot", topic="a", partition="1") == 2.0


def test_the_switch_turns_every_hook_into_a_no_op():
    before = value("uep_item_stage_seconds_count", stage="scoring")
    metrics.configure(CommonSettings(metrics_enabled=False))
    try:
        metrics.observe_stage("scoring", 0.5)
        metrics.MESSAGES_OUT.labels("t").inc()
        with metrics.ITEM_STAGE_SECONDS.labels("scoring").time():
            pass
        assert value("uep_item_stage_seconds_count", stage="scoring") == before
        assert not metrics.on_health_port(CommonSettings(metrics_enabled=False))
    finally:
        metrics.configure(CommonSettings())
    metrics.observe_stage("scoring", 0.5, items=3)
    assert value("uep_item_stage_seconds_count", stage="scoring") == before + 3


def test_item_errors_are_counted_in_the_stage_they_arose_in(metrics_on):
    err = ErrorInfo(stage="inference", type="timeout", message="no answer within 60 s")
    before = value("uep_item_errors_total", stage="inference", kind="timeout")
    metrics.count_item_error(err, "scoring")  # passed on by the scorer: not counted again
    metrics.count_item_error(err, "inference")
    metrics.count_item_error(None, "inference")
    assert value("uep_item_errors_total", stage="inference", kind="timeout") == before + 1


def test_the_exposition_names_the_shared_metrics(metrics_on):
    body, content_type = metrics.render("text/plain")
    text = body.decode()
    assert content_type.startswith("text/plain")
    for name in ("uep_messages_in_total", "uep_messages_out_total", "uep_consumer_lag", "uep_item_stage_seconds"):
        assert f"# TYPE {name} " in text, name
    assert "process_cpu_seconds_total" in text  # the default registry's process collector


async def test_the_consumer_path_counts_records_errors_and_dead_letters_and_binds_the_log_context(metrics_on):
    broker = KafkaBroker()
    seen: list[tuple[str | None, str | None]] = []

    @broker.subscriber(Topics.REPORT_REQUESTED)
    @consume(broker, ReportRequested)
    async def on_requested(event: ReportRequested, msg: KafkaMessage) -> None:
        seen.append((logs.EVALUATION_ID.get(), logs.TENANT_ID.get()))
        if event.report_id == uuid.UUID(int=99):
            raise RuntimeError("boom")

    @broker.subscriber(DEAD_LETTER_TOPIC)
    async def sink(msg: KafkaMessage) -> None:
        pass

    labels = {"topic": Topics.REPORT_REQUESTED, "handler": "on_requested"}
    before_in = value("uep_messages_in_total", **labels)
    before_err = value("uep_handler_errors_total", **labels, kind="RuntimeError")
    before_dead = value("uep_messages_dead_lettered_total", topic=Topics.REPORT_REQUESTED, reason="undecodable")
    before_time = value("uep_handler_seconds_count", **labels)
    ok = ReportRequested(evaluation_id=E, tenant_id=T, report_id=uuid.UUID(int=3))
    bad = ReportRequested(evaluation_id=E, tenant_id=T, report_id=uuid.UUID(int=99))
    async with TestKafkaBroker(broker) as br:
        await br.publish(ok.model_dump(mode="json"), Topics.REPORT_REQUESTED)
        await br.publish({"evaluation_id": "not a uuid"}, Topics.REPORT_REQUESTED)
        with pytest.raises(RuntimeError):
            await br.publish(bad.model_dump(mode="json"), Topics.REPORT_REQUESTED)
    assert seen == [(str(E), str(T))] * 2
    assert logs.EVALUATION_ID.get() is None  # unbound after the handler
    assert value("uep_messages_in_total", **labels) == before_in + 3
    assert value("uep_handler_errors_total", **labels, kind="RuntimeError") == before_err + 1
    assert value("uep_handler_seconds_count", **labels) == before_time + 2  # the undecodable one never reached it
    assert value("uep_messages_dead_lettered_total", topic=Topics.REPORT_REQUESTED, reason="undecodable") == before_dead + 1


async def test_the_gateway_labels_requests_with_the_route_template(metrics_on):
    from uep_gateway.observability import HttpMetricsMiddleware, bind_log_context, metrics_endpoint

    app = FastAPI(dependencies=[Depends(bind_log_context)])
    app.add_middleware(HttpMetricsMiddleware)
    app.add_route("/metrics", metrics_endpoint, methods=["GET"])
    bound: list[str | None] = []

    @app.get("/v1/evaluations/{evaluation_id}")
    async def get_one(evaluation_id: str) -> dict[str, str]:
        bound.append(logs.EVALUATION_ID.get())
        if evaluation_id == "limited":
            raise HTTPException(429, "slow down")
        return {"id": evaluation_id}

    route = "/v1/evaluations/{evaluation_id}"
    before = value("uep_gateway_requests_total", method="GET", route=route, status="200")
    before_429 = value("uep_gateway_rate_limited_total", route=route)
    before_404 = value("uep_gateway_requests_total", method="GET", route="<unmatched>", status="404")
    ids = [str(uuid.uuid4()) for _ in range(3)]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        for i in ids:
            assert (await client.get(f"/v1/evaluations/{i}")).status_code == 200
        assert (await client.get("/v1/evaluations/limited")).status_code == 429
        assert (await client.get("/nowhere")).status_code == 404
        scraped = (await client.get("/metrics")).text
    assert bound == [*ids, "limited"]
    assert value("uep_gateway_requests_total", method="GET", route=route, status="200") == before + 3
    assert value("uep_gateway_rate_limited_total", route=route) == before_429 + 1
    assert value("uep_gateway_requests_total", method="GET", route="<unmatched>", status="404") == before_404 + 1
    assert not any(i in scraped for i in ids)  # no id became a label value
    assert 'route="/v1/evaluations/{evaluation_id}"' in scraped
