"""One evaluation is one trace, across all six services, on the real stack.

Every service of the test stack writes its finished spans, one JSON object per line, to
``<run dir>/traces/<service>.jsonl`` (``UEP_OTEL_EXPORTER=console``, uep_common.runtime.telemetry). For an evaluation
the test reads them all and checks the trace whose id is in the evaluation's stored ``traceparent``: its one
root is the gateway's ``POST /v1/evaluations`` server span (FastAPI's own), every other span's parent is a span of the same trace, each item
has its span in every stage (the batched consumers' per-item spans included), and the instrumented clients
(SQLAlchemy, Redis, httpx) made spans inside it. Needs the Triton models oracle and judge
(UEP_TEST_TRITON_MODELS=oracle,judge)."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Callable

from sqlalchemy import text

from .helpers import all_results, submit, wait_done

SQL = "opentelemetry.instrumentation.sqlalchemy"
REDIS = "opentelemetry.instrumentation.redis"
HTTPX = "opentelemetry.instrumentation.httpx"


def _spans_of(stack, trace_id: str) -> list[dict]:
    """Every exported span of ``trace_id`` (0x-hex), each with ``service`` (its file's name) added."""
    spans = []
    for path in sorted((stack.run_dir / "traces").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if trace_id in line:  # cheap filter before parsing
                span = json.loads(line)
                if span["context"]["trace_id"] == trace_id:
                    spans.append(span | {"service": path.stem})
    return spans


def _broken(spans: list[dict]) -> list[dict]:
    """Spans whose parent is not a span of the same list."""
    ids = {s["context"]["span_id"] for s in spans}
    return [s for s in spans if s["parent_id"] is not None and s["parent_id"] not in ids]


def _trace(stack, db, evaluation_id: str, ready: Callable[[list[dict]], bool], timeout_s: float = 30) -> list[dict]:
    """The evaluation's trace once ``ready`` holds and no span lacks its parent (the exporters flush every
    0.5 s, and a parent ends after its children); the last read when the time is up."""
    with db.connect() as c:
        traceparent = c.execute(
            text("SELECT trace_context->>'traceparent' FROM evaluations WHERE id = :e"), {"e": evaluation_id}
        ).scalar()
    trace_id = "0x" + traceparent.split("-")[1]
    deadline = time.monotonic() + timeout_s
    while True:
        spans = _spans_of(stack, trace_id)
        if (ready(spans) and not _broken(spans)) or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


def _named(spans: list[dict], service: str, name: str) -> list[dict]:
    return [s for s in spans if s["service"] == service and s["name"] == name]


def _items(spans: list[dict], service: str, name: str) -> Counter[str]:
    """How many spans ``name`` of ``service`` each item (attribute ``uep.item``) has."""
    return Counter(s["attributes"]["uep.item"] for s in _named(spans, service, name))


def _item_keys(gateway, evaluation_id: str) -> set[str]:
    """``evaluation:sample:repeat:arm`` of every stored result (ScoreComputed.item_key)."""
    return {f"{evaluation_id}:{r['sample_id']}:{r['repeat']}:{r['arm']}" for r in all_results(gateway, evaluation_id)}


def _check_tree(spans: list[dict], evaluation_id: str) -> None:
    """One root, the gateway's server span of the POST that created the evaluation; below it, in the
    gateway, the ``evaluation`` span, whose context the evaluation stores; no span lacks its parent."""
    (root,) = [s for s in spans if s["parent_id"] is None]
    assert (root["service"], root["name"], root["kind"]) == ("gateway", "POST /v1/evaluations", "SpanKind.SERVER")
    assert root["attributes"]["http.response.status_code"] == 202
    (evaluation,) = _named(spans, "gateway", "evaluation")
    assert evaluation["attributes"]["uep.evaluation_id"] == evaluation_id
    assert _broken(spans) == []
    by_id = {s["context"]["span_id"]: s for s in spans}
    chain, span = [], evaluation
    while span["parent_id"] is not None:  # up to the root, through FastAPI's endpoint span
        span = by_id[span["parent_id"]]
        chain.append((span["service"], span["name"]))
    assert chain[-1] == ("gateway", "POST /v1/evaluations") and {svc for svc, _ in chain} == {"gateway"}


def test_two_oracle_evaluations_are_two_closed_traces_over_five_services(gateway, db, stack):
    """Two evaluations at once share the batched consumers' batches; each item's spans still land in its
    own evaluation's trace and nowhere else."""
    first = submit(gateway, benchmark="gsm8k", model="uep-oracle", sample_limit=5)
    second = submit(gateway, benchmark="gsm8k", model="uep-oracle", sample_limit=5)
    for evaluation_id in (first, second):
        assert wait_done(gateway, evaluation_id)["status"] == "completed"
    report_process = "report on completion"
    traces = {}
    for evaluation_id in (first, second):
        keys = _item_keys(gateway, evaluation_id)
        assert len(keys) == 5

        def ready(spans: list[dict], keys: set[str] = keys) -> bool:
            """Every span asserted on below is exported: each service's exporter flushes on its own clock."""
            per_item = [("scorer", "score sample"), ("scheduler", "release lease"), ("reporter", "store result")]
            return (
                all(set(_items(spans, svc, name)) == keys for svc, name in per_item)
                and len(_named(spans, "scheduler", "dispatch sample")) >= 5
                and len(_named(spans, "inference", "generate")) >= 5
                and bool(_named(spans, "reporter", report_process))
            )

        spans = _trace(stack, db, evaluation_id, ready)
        traces[evaluation_id] = spans
        _check_tree(spans, evaluation_id)
        by_service = Counter(s["service"] for s in spans)
        assert {"gateway", "scheduler", "inference", "scorer", "reporter"} <= set(by_service), by_service
        # each item once in every stage: dispatch, model call, scoring, lease release and storage (the last
        # two in batched consumers: one span per item, in the item's trace)
        ordinals = sorted(s["attributes"]["uep.sample_ordinal"] for s in _named(spans, "scheduler", "dispatch sample"))
        assert ordinals == [0, 1, 2, 3, 4]
        assert len(_named(spans, "inference", "generate")) == 5
        one_each = Counter(dict.fromkeys(keys, 1))
        assert _items(spans, "scorer", "score sample") == one_each
        assert _items(spans, "scheduler", "release lease") == one_each
        assert _items(spans, "reporter", "store result") == one_each
        # every per-item span of a batch is linked to its batch span (a trace of its own, shared by the batch)
        for s in _named(spans, "reporter", "store result") + _named(spans, "scheduler", "release lease"):
            assert s["attributes"]["uep.batch_size"] >= 1 and len(s["links"]) == 1
            assert s["links"][0]["context"]["trace_id"] != s["context"]["trace_id"]
        # SQL (the report written on EvaluationCompleted reads the results) and Redis (the live progress,
        # written under an item's span of this evaluation) are in the trace, as children of its spans
        sql = [s for s in spans if s["scope"] == SQL]
        assert any(s["service"] == "reporter" and "sample_results" in s["attributes"]["db.statement"] for s in sql), sql
        assert {s["attributes"]["db.system"] for s in sql} == {"postgresql"}
        redis = [s for s in spans if s["scope"] == REDIS and s["service"] == "reporter"]  # the gateway's: rate limits
        assert {s["name"] for s in redis} == {"HSET", "EXPIRE"}
        assert {s["attributes"]["db.system"] for s in redis} == {"redis"}
        store_ids = {s["context"]["span_id"] for s in _named(spans, "reporter", "store result")}
        assert all(s["parent_id"] in store_ids for s in redis)
    # no span of one evaluation's items is in the other's trace
    for evaluation_id, spans in traces.items():
        items = {s["attributes"]["uep.item"] for s in spans if "uep.item" in s["attributes"]}
        assert items and all(i.startswith(evaluation_id) for i in items)
    assert not {s["context"]["span_id"] for s in traces[first]} & {s["context"]["span_id"] for s in traces[second]}


def test_a_judge_evaluation_is_one_trace_over_all_six_services(gateway, db, stack):
    """An llm_judge evaluation of two items: the judge's calls to the inference service over HTTP are httpx
    client spans, each the parent of the inference service's server span for that call."""
    slug = f"trace-judge-{uuid.uuid4().hex[:8]}"
    rows = ["[[say:Paris is the capital of France. JUDGE:SCORE=8]]", "[[say:Lyon. JUDGE:SCORE=3]]"]
    spec = {
        "slug": slug,
        "name": slug,
        "prompt": {"template": "{{ question }}", "max_tokens": 64},
        "metric": {"name": "exact_match", "params": {}},
        "evaluation_type": "llm_judge",
        "judge": {"mode": "rubric", "judges": ["uep-judge"], "max_retries": 1},
    }
    data = "\n".join(json.dumps({"id": f"q{i}", "question": q, "answer": "B"}) for i, q in enumerate(rows))
    r = gateway.post("/v1/benchmarks", data={"spec": json.dumps(spec)}, files={"file": ("rows.jsonl", data.encode())})
    assert r.status_code == 201, r.text
    evaluation_id = submit(gateway, benchmark=slug, model="uep-judge")
    final = wait_done(gateway, evaluation_id, timeout_s=90)
    assert final["status"] == "completed", final
    assert [x["score"] for x in all_results(gateway, evaluation_id)] == [0.8, 0.3]  # judge_stub: SCORE=n → n / 10
    keys = _item_keys(gateway, evaluation_id)

    def ready(spans: list[dict]) -> bool:
        """The spans asserted on below are exported; the inference service's server spans end after the judge
        has its answers, and each service's exporter flushes on its own clock."""
        return (
            set(_items(spans, "reporter", "store result")) == keys
            and len(_named(spans, "judge", "judge item")) >= 2
            and len(_named(spans, "inference", "POST /internal/generate")) >= 2
        )

    spans = _trace(stack, db, evaluation_id, ready)
    _check_tree(spans, evaluation_id)
    assert {s["service"] for s in spans} >= {"gateway", "scheduler", "inference", "scorer", "judge", "reporter"}
    judged = _named(spans, "judge", "judge item")
    assert sorted(s["attributes"]["uep.item"] for s in judged) == sorted(keys)
    # one judge call per item (valid answers, no re-asks): an httpx client span under the item's judge span …
    calls = [s for s in spans if s["service"] == "judge" and s["scope"] == HTTPX]
    assert len(calls) == 2 and all(s["kind"] == "SpanKind.CLIENT" for s in calls)
    assert all(s["attributes"]["http.url"].endswith("/internal/generate") for s in calls)
    assert {s["parent_id"] for s in calls} == {s["context"]["span_id"] for s in judged}
    # … continued by the inference service's server span (traceparent sent on the request), which answered 200
    served = _named(spans, "inference", "POST /internal/generate")
    assert len(served) == 2 and all(s["kind"] == "SpanKind.SERVER" for s in served)
    assert {s["parent_id"] for s in served} == {s["context"]["span_id"] for s in calls}
    assert [s["attributes"]["http.response.status_code"] for s in served] == [200, 200]
    # the judge reads its item's context from PostgreSQL inside the trace
    assert any(s["service"] == "judge" and s["scope"] == SQL for s in spans)
