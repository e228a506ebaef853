"""Metrics and logs of the real stack: every service's ``GET /metrics`` before and after a small evaluation,
and the services' log files.

The evaluation is ``uep-oracle`` on the first N = 4 GSM8K items, so each stage handles exactly N items and
each counter below moves by exactly N (or 1: one POST, one evaluation finished): one SampleDispatched per item
into inference, one OutputGenerated per item into the scorer, one ScoreComputed per item into the reporter
and the scheduler, one model call per item (the oracle answers at once: no retry), one end-to-end latency per
released lease. The exposition is parsed with prometheus-client's own parser.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Mapping

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from .helpers import submit, wait_done

N = 4
SERVICES = ["gateway", "scheduler", "inference", "scorer", "judge", "reporter"]
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
Samples = list[tuple[str, dict[str, str], float]]


def _port(stack, service: str) -> int:
    return stack.gateway_port if service == "gateway" else stack.service_ports[service]


def scrape(stack) -> dict[str, tuple[str, Samples]]:
    """``{service: (exposition text, [(sample name, labels, value)])}`` of every service's /metrics."""
    out = {}
    for service in SERVICES:
        with urllib.request.urlopen(f"http://127.0.0.1:{_port(stack, service)}/metrics", timeout=10) as r:
            assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain"), service
            body = r.read().decode()
        samples = [(s.name, dict(s.labels), s.value) for fam in text_string_to_metric_families(body) for s in fam.samples]
        out[service] = (body, samples)
    return out


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum of the samples ``name`` whose labels include ``labels``."""
    return sum(v for n, ls, v in samples if n == name and all(ls.get(k) == x for k, x in labels.items()))


def delta(
    before: Mapping[str, tuple[str, Samples]], after: Mapping[str, tuple[str, Samples]], service: str, name: str, **labels: str
) -> float:
    return total(after[service][1], name, **labels) - total(before[service][1], name, **labels)


def quiet_scrape(stack, settle_s: float = 3.0, timeout_s: float = 60.0) -> dict[str, tuple[str, Samples]]:
    """A scrape taken once no lease is open and inference has received no SampleDispatched for ``settle_s``
    (longer than an idle consumer's fetch wait): items an earlier test left queued (a cancelled evaluation's
    items are still delivered to inference, which drops them) must not count for this evaluation."""
    deadline = time.monotonic() + timeout_s
    last = scrape(stack)
    while True:
        time.sleep(settle_s)
        now = scrape(stack)
        received = delta(last, now, "inference", "uep_messages_in_total", topic="uep.sample.dispatched.v1")
        if (received == 0 and total(now["scheduler"][1], "uep_scheduler_open_leases") == 0) or time.monotonic() > deadline:
            return now
        last = now


@pytest.fixture(scope="module")
def run(stack, gateway):
    """Wait until the stack is quiet, scrape, run the evaluation to completion, wait until the scheduler has
    released every lease, scrape."""
    before = quiet_scrape(stack)
    evaluation_id = submit(gateway, benchmark="gsm8k", model="uep-oracle", sample_limit=N, sampling="first")
    final = wait_done(gateway, evaluation_id)
    assert final["status"] == "completed" and final["summary"]["n"] == N, final
    deadline = time.monotonic() + 30
    # the scheduler's ScoreComputed consumer is the reporter's sibling: it may finish a moment later; and the
    # evaluation is admitted on PostgreSQL's NOTIFY, so its EvaluationRequested may be consumed after the end
    while True:
        after = scrape(stack)
        released = delta(before, after, "scheduler", "uep_item_stage_seconds_count", stage="end_to_end")
        requested = delta(before, after, "scheduler", "uep_messages_in_total", topic="uep.evaluation.requested.v1")
        if (released >= N and requested >= 1) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    return evaluation_id, before, after


def test_every_service_exposes_its_metrics(run):
    _, _, after = run
    everywhere = ["process_cpu_seconds_total", "uep_messages_out_total", "uep_publish_errors_total"]
    own = {
        "gateway": ["uep_gateway_requests_total", "uep_gateway_request_seconds", "uep_gateway_rate_limited_total"],
        "scheduler": [
            "uep_scheduler_queue_depth",
            "uep_scheduler_open_leases",
            "uep_scheduler_dispatched_total",
            "uep_scheduler_model_limit",
            "uep_scheduler_instances_alive",
            "uep_outbox_unpublished",
            "uep_outbox_oldest_age_seconds",
            "uep_budget_reserved_open",
            "uep_budget_settled",
        ],
        "inference": ["uep_inference_model_call_seconds", "uep_consumer_lag", "uep_item_stage_seconds"],
        "scorer": ["uep_scorer_items_total", "uep_handler_seconds", "uep_handler_errors_total"],
        "judge": ["uep_judge_items_total", "uep_messages_in_total"],
        "reporter": ["uep_reports_total", "uep_report_build_seconds", "uep_reporter_evaluations_finished_total"],
    }
    for service, names in own.items():
        body = after[service][0]
        for name in [*everywhere, *names]:
            assert f"# TYPE {name} " in body, (service, name)
    scheduler = after["scheduler"][1]
    assert total(scheduler, "uep_scheduler_instances_alive") >= 1  # sampled from scheduler_instances
    assert total(scheduler, "uep_outbox_oldest_age_seconds") >= 0


def test_counters_moved_by_the_evaluation(run):
    _, before, after = run
    d = lambda service, name, **labels: delta(before, after, service, name, **labels)  # noqa: E731
    # messages in, per topic, by the subscriber of each stage
    assert d("inference", "uep_messages_in_total", topic="uep.sample.dispatched.v1", handler="on_samples") == N
    assert d("scorer", "uep_messages_in_total", topic="uep.output.generated.v1", handler="on_outputs") == N
    assert d("reporter", "uep_messages_in_total", topic="uep.score.computed.v1") == N
    assert d("scheduler", "uep_messages_in_total", topic="uep.score.computed.v1") == N
    assert d("scheduler", "uep_messages_in_total", topic="uep.evaluation.requested.v1") == 1
    # messages out, per topic: SampleDispatched by the scheduler, OutputGenerated by inference, ScoreComputed by the scorer
    assert d("scheduler", "uep_messages_out_total", topic="uep.sample.dispatched.v1") == N
    assert d("inference", "uep_messages_out_total", topic="uep.output.generated.v1") == N
    assert d("scorer", "uep_messages_out_total", topic="uep.score.computed.v1") == N
    assert d("scheduler", "uep_scheduler_dispatched_total", kind="new") == N
    # one model call per item, observed in the per-model histogram and the stage histogram
    assert d("inference", "uep_inference_model_call_seconds_count", model="uep-oracle", outcome="ok") == N
    for service, stage in [
        ("inference", "queue_wait"),
        ("inference", "model_call"),
        ("scorer", "scoring"),
        ("reporter", "storage"),
        ("scheduler", "end_to_end"),
    ]:
        assert d(service, "uep_item_stage_seconds_count", stage=stage) == N, stage
    assert d("scorer", "uep_scorer_items_total", metric="gsm8k_numeric_exact_match", outcome="correct") == 3  # ordinal 2 is wrong
    assert d("reporter", "uep_reporter_evaluations_finished_total", status="completed") == 1
    # the gateway, by templated route: the POST once, the polls of GET /v1/evaluations/{evaluation_id}
    assert d("gateway", "uep_gateway_requests_total", method="POST", route="/v1/evaluations", status="202") == 1
    assert d("gateway", "uep_gateway_requests_total", method="GET", route="/v1/evaluations/{evaluation_id}", status="200") >= 1
    # every status of the route is timed (earlier tests' refused POSTs too; the 202 above is this run's)
    assert d("gateway", "uep_gateway_request_seconds_count", method="POST", route="/v1/evaluations") >= 1
    # nothing failed on the way
    for service in SERVICES:
        assert d(service, "uep_handler_errors_total") == 0, service
        assert d(service, "uep_messages_dead_lettered_total") == 0, service


def test_consumer_lag_is_sampled_per_partition(run):
    _, _, after = run
    lag = [(ls, v) for n, ls, v in after["inference"][1] if n == "uep_consumer_lag" and ls["group"] == "uep.inference"]
    assert lag, "no lag sample of inference's consumer group"
    assert {ls["topic"] for ls, _ in lag} == {"uep.sample.dispatched.v1"}
    assert all(ls["partition"].isdigit() and v >= 0 for ls, v in lag)


def test_no_label_value_is_an_id(run, db):
    evaluation_id, _, after = run
    with db.connect() as c:
        evaluation_ids = {str(e) for e in c.execute(text("SELECT id FROM evaluations")).scalars()}
    assert evaluation_id in evaluation_ids
    for service, (body, samples) in after.items():
        values = {v for _, ls, _ in samples for v in ls.values()}
        assert not any(e in v for v in values for e in evaluation_ids), service
        assert not [v for v in values if UUID.search(v)], service
        assert evaluation_id not in body, service


def _log_lines(stack, service: str) -> list[dict]:
    raw = (stack.run_dir / "logs" / f"{service}.log").read_text()
    # no raw ESC byte (a colour code); a request that carried one shows it JSON-escaped, as inert text
    assert "\x1b" not in raw, f"{service}.log has ANSI escape codes"
    lines = []
    for line in raw.split("\n"):  # records end in \n (str.splitlines would also split at U+0085, U+2028…)
        if line.strip():
            doc = json.loads(line)  # every line is one JSON object
            assert {"time", "level", "service", "logger", "message"} <= set(doc), line
            lines.append(doc)
    return lines


def test_logs_are_json_lines_with_the_evaluations_trace(run, stack, db):
    evaluation_id, _, _ = run
    with db.connect() as c:
        traceparent = c.execute(
            text("SELECT trace_context->>'traceparent' FROM evaluations WHERE id = :id"), {"id": evaluation_id}
        ).scalar_one()
    trace_id = traceparent.split("-")[1]
    deadline = time.monotonic() + 60  # the completion report's line comes after the build (HTML, PDF)
    while True:
        lines = {service: _log_lines(stack, service) for service in SERVICES}
        ours = [(s, d) for s, docs in lines.items() for d in docs if d.get("evaluation_id") == evaluation_id]
        traced = [(s, d) for s, d in ours if d.get("trace_id") == trace_id]
        if traced or time.monotonic() > deadline:
            break
        time.sleep(1)
    for service, docs in lines.items():
        assert docs and all(d["service"] == service for d in docs), service
    assert any(d["logger"].startswith("uvicorn") for docs in lines.values() for d in docs)  # uvicorn's lines, same format
    assert any(d["logger"].startswith("faststream") for d in lines["scorer"])  # FastStream's too
    assert ours, "no log line names the evaluation"
    assert traced, f"no line of the evaluation carries its trace id {trace_id}: {ours[:5]}"
    assert all(len(d["span_id"]) == 16 for _, d in traced)
