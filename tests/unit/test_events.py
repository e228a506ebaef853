"""The event contract: every event round-trips through JSON unchanged; keys and headers are as documented;
bad payloads are refused with the field named."""

import uuid
from datetime import UTC, datetime

import pytest

from uep_common.contract.events import (
    EVENT_TYPES,
    ErrorInfo,
    EvaluationCompleted,
    EvaluationRequested,
    EvaluationStatus,
    EvaluationSummary,
    JudgeRequested,
    ModelTarget,
    OutputGenerated,
    PromptSpec,
    ReportReady,
    ReportRequested,
    RescoreRequested,
    SampleDispatched,
    ScoreComputed,
    Topics,
)
from uep_common.runtime.messaging import UndecodableEvent, decode_event

E, T, S, B, M = (uuid.UUID(int=i) for i in range(1, 6))
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
COMMON = {"evaluation_id": E, "tenant_id": T, "occurred_at": NOW}
ITEM = {**COMMON, "sample_id": S, "repeat": 2, "arm": "main", "attempt": 1}
SUMMARY = EvaluationSummary(
    n=10,
    scored=9,
    correct=3,
    errors=1,
    accuracy=1 / 3,
    ci_low=0.12,
    ci_high=0.65,
    latency_ms_p50=12.0,
    latency_ms_p90=20.0,
    prompt_tokens=100,
    completion_tokens=50,
    metric_name="exact_match",
    metric_means={"exact_match": 0.33},
)
SAMPLES = [
    EvaluationRequested(
        **COMMON,
        benchmark_id=B,
        benchmark_slug="gsm8k",
        benchmark_version="ab" * 32,
        model_id=M,
        model_name="m",
        sample_limit=5,
        repeats=2,
        total_items=10,
    ),
    SampleDispatched(
        **ITEM,
        benchmark_id=B,
        sample_ordinal=7,
        input={"question": "1+1? ünïcode"},
        prompt=PromptSpec(template="Q: {{ question }}", max_tokens=8, stop=["\n"]),
        target=ModelTarget(model_id=M, name="m", backend="triton", endpoint="grpc://127.0.0.1:8001", triton_model_name="m"),
        lease_expires_at=NOW,
    ),
    OutputGenerated(
        **ITEM, benchmark_id=B, model_id=M, prompt="Q: 1+1?", output="2", latency_ms=5.5, prompt_tokens=4, completion_tokens=1
    ),
    OutputGenerated(
        **ITEM,
        benchmark_id=B,
        model_id=M,
        prompt="Q",
        output=None,
        error=ErrorInfo(stage="inference", type="timeout", message="no answer"),
    ),
    ScoreComputed(
        **ITEM,
        benchmark_id=B,
        model_id=M,
        metric_name="exact_match",
        metric_version="1",
        is_correct=True,
        score=1.0,
        extracted="2",
        metrics={"exact_match": 1.0, "flag": True},
        output="2",
    ),
    EvaluationCompleted(**COMMON, status=EvaluationStatus.completed, summary=SUMMARY),
    JudgeRequested(**ITEM, benchmark_id=B, model_id=M, prompt="p", output="o"),
    RescoreRequested(**COMMON, rescore_id=S, benchmark_id=B, model_id=M),
    ReportRequested(**COMMON, report_id=S, baseline_evaluation_id=M),
    ReportReady(
        **COMMON,
        report_id=S,
        report_schema_version="1.0",
        formats=["html", "json", "pdf"],
        artifacts={"html": "ab" * 32},
        links={"html": f"/v1/evaluations/{E}/report.html"},
    ),
]


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: type(e).__name__)
def test_round_trip(event):
    assert decode_event(type(event), event.model_dump_json()) == event
    assert decode_event(type(event), event.model_dump(mode="json")) == event


def test_every_event_type_is_covered_and_on_its_topic():
    assert {type(e).__name__ for e in SAMPLES} == set(EVENT_TYPES)
    assert {cls.topic for cls in EVENT_TYPES.values()} == set(Topics.all())
    assert all(t.endswith(".v1") for t in Topics.all())


def test_keys_partition_by_evaluation_or_item():
    assert SAMPLES[0].key() == str(E).encode()
    assert SAMPLES[5].key() == str(E).encode()
    assert SAMPLES[2].key() == f"{E}:{S}:2:main".encode()


def test_headers_name_type_version_and_tenant():
    assert SAMPLES[4].headers() == {
        "uep-event-type": "ScoreComputed",
        "uep-schema-version": "1",
        "uep-tenant-id": str(T),
        "content-type": "application/json",
    }


def test_event_id_is_unique_per_event_and_times_are_aware():
    a = ScoreComputed(
        **{k: v for k, v in ITEM.items() if k != "occurred_at"},
        benchmark_id=B,
        model_id=M,
        metric_name="x",
        metric_version="1",
        is_correct=None,
        score=None,
        output=None,
    )
    b = a.model_copy(update={"event_id": uuid.uuid4()})
    assert a.event_id != b.event_id
    assert a.occurred_at.tzinfo is not None


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (b"not json", "<body>"),
        (b'{"schema_version": 1}', "evaluation_id"),
        (SAMPLES[4].model_dump_json().replace('"repeat":2', '"repeat":-1').encode(), "repeat"),
        (SAMPLES[4].model_dump_json().replace('"schema_version":1', '"schema_version":2').encode(), "schema_version"),
    ],
)
def test_bad_payload_names_the_field(payload, field):
    with pytest.raises(UndecodableEvent, match=field):
        decode_event(ScoreComputed, payload)


def test_naive_timestamp_is_refused():
    data = SAMPLES[4].model_dump(mode="json") | {"occurred_at": "2026-11-30T12:00:00"}
    with pytest.raises(UndecodableEvent, match="occurred_at"):
        decode_event(ScoreComputed, data)
