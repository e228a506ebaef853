"""LLM-as-judge and hybrid evaluations end to end on the real stack: the deterministic judges `uep-judge` and
`uep-judge-first` are served by Triton (deploy/model-server judge_stub.py) and called through the inference
service's /internal/generate. Needs the Triton models judge and judge_first
(UEP_TEST_TRITON_MODELS=oracle,judge,judge_first).

The candidate model is `uep-judge` itself answering the text of a `[[say:…]]` marker (judge_stub: a prompt
that is not a judge prompt is echoed), so each item's answer — and the markers in it that fix the judge's
answer — is chosen here. Expected values follow judge_stub's documented rules."""

import json
import time
import uuid

import pytest
from sqlalchemy import text

from .helpers import all_results, submit, wait_done


def upload(
    gateway,
    slug: str,
    rows: list[str],
    evaluation_type: str,
    judge: dict,
    metric: dict | None = None,
    answers: list[str] | None = None,
):
    spec = {
        "slug": slug,
        "name": slug,
        "prompt": {"template": "{{ question }}", "max_tokens": 64},
        "metric": metric or {"name": "exact_match", "params": {}},
        "evaluation_type": evaluation_type,
        "judge": judge,
    }
    data = "\n".join(
        json.dumps({"id": f"q{i}", "question": q, "answer": (answers or ["B"] * len(rows))[i]}) for i, q in enumerate(rows)
    )
    return gateway.post("/v1/benchmarks", data={"spec": json.dumps(spec)}, files={"file": ("rows.jsonl", data.encode())})


def _slug(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def other_tenant(stack):
    """An httpx client authenticated as the admin of a second tenant."""
    import httpx

    from uep_common.admin import create_api_key, create_tenant

    slug = f"judge-b-{uuid.uuid4().hex[:6]}"
    create_tenant(stack.database_url, slug)
    key = create_api_key(stack.database_url, slug, "admin", "judge tests")
    with httpx.Client(base_url=stack.gateway_url, timeout=30, headers={"Authorization": f"Bearer {key}"}) as client:
        yield client


def test_rubric_and_failure_paths(gateway, db, other_tenant):
    slug = _slug("judge-rubric")
    rows = [
        "[[say:Paris is the capital of France. JUDGE:SCORE=8]]",  # valid JSON
        "[[say:Paris. JUDGE:SCORE=8 JUDGE:FENCED]]",  # fenced JSON
        "[[say:Paris. JUDGE:PROSE]]",  # "I would rate it highly." every time
        "[[say:Paris. JUDGE:SCORE=3 JUDGE:GARBAGE_ONCE]]",  # prose, then valid JSON after the feedback
        "[[say:Paris. JUDGE:SCORE=8 JUDGE:OUT_OF_SCALE]]",  # overall 14 on 0-10
    ]
    r = upload(gateway, slug, rows, "llm_judge", {"mode": "rubric", "judges": ["uep-judge"], "max_retries": 2})
    assert r.status_code == 201, r.text
    evaluation_id = submit(gateway, benchmark=slug, model="uep-judge")
    final = wait_done(gateway, evaluation_id, timeout_s=90)
    assert final["status"] == "completed", final
    items = all_results(gateway, evaluation_id)
    assert [x["score"] for x in items] == [0.8, 0.8, None, 0.3, None]  # overall / 10
    assert [x["is_correct"] for x in items] == [True, True, None, False, None]  # overall >= 5
    fenced = items[1]["metrics"]
    assert (fenced["judge_overall"], fenced["judge_accuracy"], fenced["decided_by"]) == (8, 8, "judge")
    assert items[1]["metric_name"] == "llm_judge_rubric" and items[1]["metric_version"] == "v1"
    prose = items[2]
    assert prose["error"]["stage"] == "judge" and prose["error"]["type"] == "judge_unparsed_output"
    assert "I would rate it highly." in prose["error"]["message"] and prose["metrics"]["judge_raw"] == "I would rate it highly."
    assert prose["metrics"]["judge_attempts"] == 3 and prose["metrics"]["judge_parse_failures"] == 3  # 1 + 2 retries
    assert items[3]["metrics"]["judge_parse_failures"] == 1 and items[3]["metrics"]["judge_attempts"] == 2
    assert "outside the scale [0, 10]" in items[4]["error"]["message"]
    s = final["summary"]
    assert (s["n"], s["errors"], s["scored"], s["correct"]) == (5, 2, 3, 2)
    assert s["metric_means"]["judge_invalid"] == 0.4  # 2 of 5 items without a valid verdict

    verdicts = gateway.get("/v1/judges/verdicts", params={"evaluation_id": evaluation_id}).json()
    v = next(x for x in verdicts if x["sample_ordinal"] == 2)
    assert v["valid"] is False and v["raw_text"] == "I would rate it highly." and v["attempts"] == 3
    assert [a["error"] for a in v["attempts_log"]] == ["no JSON object found in the reply, nor a score in its text"] * 3
    assert [(a["status"], a["constrained"]) for a in v["attempts_log"]] == [("unparsed", False)] * 3

    (d,) = gateway.get("/v1/judges/diagnostics", params={"evaluation_id": evaluation_id}).json()["judges"]
    # replies 1 + 1 + 3 + 2 + 3 = 10, unusable 0 + 0 + 3 + 1 + 3 = 7
    assert (d["judge_model"], d["template_version"], d["replies"], d["parse_failures"]) == ("uep-judge", "v1", 10, 7)
    assert d["parse_failure_rate"] == 0.7 and d["invalid_rate"] == 0.4
    with db.connect() as c:  # every judge reply is charged to the evaluation's budget, role "judge"
        charges = c.execute(
            text("SELECT count(*) FROM spend_ledger WHERE evaluation_id = :e AND role = 'judge' AND kind = 'charge'"),
            {"e": evaluation_id},
        ).scalar()
    assert charges == 10
    # the candidate is the judge itself: every graded answer is its own
    assert d["self_preference"]["rubric"]["n_own"] == 3 and d["self_preference"]["rubric"]["own_mean"] == 19 / 3

    # another tenant sees none of it: its evaluation id is unknown there, and its verdicts count nowhere
    for path in ("/v1/judges/verdicts", "/v1/judges/routes", "/v1/judges/diagnostics"):
        r = other_tenant.get(path, params={"evaluation_id": evaluation_id})
        assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["query", "evaluation_id"], (path, r.text)
    theirs = other_tenant.get("/v1/judges/diagnostics", params={"judge_model": "uep-judge"}).json()
    assert (theirs["verdicts"], theirs["judges"]) == (0, [])
    assert other_tenant.get("/v1/judges/diagnostics", params={"benchmark": slug}).json()["verdicts"] == 0


def test_pairwise_both_orders_jury_and_position_bias(gateway):
    slug = _slug("judge-pair")
    # baseline: uep-oracle answers "I do not know." (3 words + marker-free: quality 2 + 4 // 3 = 3)
    rows = ["[[say:JUDGE:SCORE=9]]", "[[say:JUDGE:SCORE=1]]", "[[say:I do not know.]]"]
    r = upload(gateway, slug, rows, "llm_judge", {"mode": "rubric", "judges": ["uep-judge"]})
    assert r.status_code == 201, r.text
    baseline = submit(gateway, benchmark=slug, model="uep-oracle")
    assert wait_done(gateway, baseline, timeout_s=60)["status"] == "completed"

    pairwise = {"mode": "pairwise", "baseline_evaluation_id": baseline}
    consistent = submit(gateway, benchmark=slug, model="uep-judge", judge=pairwise)
    biased = submit(gateway, benchmark=slug, model="uep-judge", judge=pairwise | {"judges": ["uep-judge-first"]})
    jury = submit(
        gateway,
        benchmark=slug,
        model="uep-judge",
        judge=pairwise | {"judges": ["uep-judge", "uep-judge-first"], "aggregate": "majority"},
    )
    for e in (consistent, biased, jury):
        assert wait_done(gateway, e, timeout_s=90)["status"] == "completed"

    c = all_results(gateway, consistent)
    assert [x["metrics"]["pairwise_outcome"] for x in c] == ["win", "loss", "tie"]  # 9 > 3, 1 < 3, 3 = 3
    assert [x["is_correct"] for x in c] == [True, False, None] and [x["score"] for x in c] == [1.0, 0.0, 0.5]
    assert [x["metrics"]["pairwise_inconsistent"] for x in c] == [0, 0, 0]
    b = all_results(gateway, biased)
    assert [x["metrics"]["pairwise_outcome"] for x in b] == ["tie"] * 3  # "A" in both orders: inconsistent
    assert [x["metrics"]["pairwise_inconsistent"] for x in b] == [1, 1, 1]
    j = all_results(gateway, jury)
    # consistent juror: win / loss / tie; biased juror: tie every time -> no majority on items 0, 1
    assert [x["metrics"]["pairwise_outcome"] for x in j] == ["tie", "tie", "tie"]
    assert [x["metrics"]["judge_low_confidence"] for x in j] == [1, 1, 0]

    diag = gateway.get("/v1/judges/diagnostics", params={"benchmark": slug}).json()["judges"]
    by = {(d["judge_model"], d["template"]): d for d in diag}
    first = by[("uep-judge-first", "pairwise")]
    assert (first["pairwise_comparisons"], first["position_swap_inconsistency_rate"], first["first_position_rate"]) == (
        6,
        1.0,
        1.0,
    )
    good = by[("uep-judge", "pairwise")]
    assert (good["pairwise_comparisons"], good["position_swap_inconsistency_rate"]) == (6, 0.0)
    # the judge's own answers (candidate uep-judge) against uep-oracle's: win, loss, tie twice -> (1+0+.5)*2/6
    assert good["self_preference"]["pairwise"] == {"own_win_rate": 0.5, "n": 6}


def test_hybrid_routes_automatic_judge_and_human(gateway, db):
    slug = _slug("judge-hybrid")
    rows = [
        "[[say:The answer is (B).]]",  # automatic: correct
        "[[say:The answer is (C).]]",  # automatic: wrong
        "[[say:I cannot tell. JUDGE:SCORE=2]]",  # no letter -> judge; jurors 2 and 0 agree (spread 2 <= 3)
        "[[say:Unsure. JUDGE:SCORE=8]]",  # no letter -> judge; jurors 8 and 3 disagree -> human
        "[[say:No idea. JUDGE:PROSE]]",  # no letter -> judge; no valid verdict -> human
    ]
    judge = {"mode": "rubric", "judges": ["uep-judge", "uep-judge-first"], "max_retries": 1}
    r = upload(gateway, slug, rows, "hybrid", judge, metric={"name": "multiple_choice_letter", "params": {"choices": "ABCD"}})
    assert r.status_code == 201, r.text
    evaluation_id = submit(gateway, benchmark=slug, model="uep-judge")
    routes: list = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        # progress first: a judged item's route row is committed before its result is stored, so routes read after
        # progress counts an item hold that item's route
        done = gateway.get(f"/v1/evaluations/{evaluation_id}").json()["progress"]["completed"]
        routes = gateway.get("/v1/judges/routes", params={"evaluation_id": evaluation_id}).json()
        if done == 3 and sum(x["stage"] == "human" for x in routes) == 2 and len(routes) == 5:
            break
        time.sleep(0.3)
    items = all_results(gateway, evaluation_id)
    assert [(x["sample_ordinal"], x["metrics"]["decided_by"]) for x in items] == [
        (0, "automatic"),
        (1, "automatic"),
        (2, "judge"),
    ]
    assert [x["is_correct"] for x in items] == [True, False, False]  # judge: mean (2 + 0) / 2 = 1 < 5
    assert items[2]["metrics"]["route_reason"] == "no_answer" and items[2]["metrics"]["judge_overall"] == 1
    assert [(x["sample_ordinal"], x["stage"], x["reason"]) for x in routes] == [
        (2, "judge", "no_answer"),
        (3, "human", "jury_disagreement"),
        (3, "judge", "no_answer"),
        (4, "human", "judge_invalid"),
        (4, "judge", "no_answer"),
    ]
    human = {x["sample_ordinal"]: x["details"] for x in routes if x["stage"] == "human"}
    assert human[3]["juror_uep-judge"] == 8 and human[3]["juror_uep-judge-first"] == 3
    view = gateway.get(f"/v1/evaluations/{evaluation_id}").json()
    assert view["status"] == "running" and view["progress"]["completed"] == 3  # waits for the annotators
    with db.connect() as c:  # routed items hold no lease the scheduler would re-dispatch
        leases = c.execute(
            text(
                "SELECT l.state, l.lease_expires_at > now() + interval '1 year' FROM sample_leases l "
                "JOIN hybrid_routes h USING (evaluation_id, sample_id, repeat, arm) "
                "WHERE h.stage = 'human' AND l.evaluation_id = :e"
            ),
            {"e": evaluation_id},
        ).all()
    assert sorted(leases) == [("released", True), ("released", True)]

    # Stage 3: the two human-routed items are annotated; their ScoreComputed completes the evaluation.
    r = gateway.post(
        "/v1/annotation-tasks",
        json={
            "name": "hybrid-e2e",
            "source": "hybrid",
            "evaluation_id": evaluation_id,
            "questions": [{"name": "correct", "type": "pass_fail"}],
            "annotations_per_item": 1,
        },
    )
    assert r.status_code == 201, r.text
    task = r.json()
    assert task["total_items"] == 2
    verdicts = {3: "pass", 4: "fail"}
    for _ in range(2):
        nxt = gateway.get(f"/v1/annotation-tasks/{task['id']}/next", params={"annotator": "hybrid-e2e-ann"}).json()
        ordinal = nxt["item"]["sample_ordinal"]
        assert nxt["item"]["output"] == rows[ordinal].removeprefix("[[say:").removesuffix("]]")  # the model's answer
        s = gateway.post(
            f"/v1/annotation-tasks/{task['id']}/annotations",
            params={"annotator": "hybrid-e2e-ann"},
            json={"assignment_id": nxt["assignment_id"], "answers": {"correct": verdicts[ordinal]}},
        )
        assert s.status_code == 201, s.text
    final = wait_done(gateway, evaluation_id, timeout_s=60)
    assert final["status"] == "completed" and final["summary"]["n"] == 5
    items = all_results(gateway, evaluation_id)
    assert [(x["sample_ordinal"], x["metrics"]["decided_by"], x["is_correct"]) for x in items] == [
        (0, "automatic", True),
        (1, "automatic", False),
        (2, "judge", False),
        (3, "human", True),
        (4, "human", False),
    ]


def test_judge_configuration_errors_name_the_field(gateway):
    slug = _slug("judge-bad")
    r = upload(gateway, slug, ["[[say:x]]"], "llm_judge", {"mode": "rubric", "judges": ["no-such-judge"]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "spec", "judge", "judges", 0], r.text
    r = upload(gateway, slug, ["[[say:x]]"], "llm_judge", None)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "spec", "judge"]
    assert upload(gateway, slug, ["[[say:x]]"], "llm_judge", {"judges": ["uep-judge"]}).status_code == 201
    r = gateway.post("/v1/evaluations", json={"benchmark": slug, "model": "uep-judge", "judge": {"mode": "pairwise"}})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "judge", "baseline_evaluation_id"], r.text
    r = gateway.post("/v1/evaluations", json={"benchmark": slug, "model": "uep-judge", "judge": {"max_retries": 99}})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "judge", "max_retries"], r.text
    r = gateway.post("/v1/evaluations", json={"benchmark": "gsm8k", "model": "uep-oracle", "judge": {"judges": ["uep-judge"]}})
    assert r.status_code == 422 and r.json()["detail"][0]["type"] == "not_judged", r.text


def test_builtin_reference_guided_benchmark(gateway):
    """gsm8k-judged with the stand-in judge and a 0-10 scale in the evaluation's override: the oracle answers
    GSM8K items right iff ordinal % 3 != 2 ("#### <answer>", else answer + 1); uep-judge's reference rule gives 9
    when the last number equals the reference, else 2 -> 6 of 9 correct."""
    scale = {
        "dimensions": [{"name": "accuracy", "min": 0, "max": 10}],
        "overall_min": 0,
        "overall_max": 10,
        "overall_integer": False,
    }
    judge = {"judges": ["uep-judge"], **scale}
    evaluation_id = submit(gateway, benchmark="gsm8k-judged", model="uep-oracle", sample_limit=9, judge=judge)
    final = wait_done(gateway, evaluation_id, timeout_s=90)
    assert final["status"] == "completed" and (final["summary"]["correct"], final["summary"]["scored"]) == (6, 9)
    items = all_results(gateway, evaluation_id)
    assert [x["metrics"]["judge_overall"] for x in items] == [9, 9, 2] * 3
    assert {x["metric_name"] for x in items} == {"llm_judge_reference"}
    (d,) = gateway.get("/v1/judges/diagnostics", params={"evaluation_id": evaluation_id}).json()["judges"]
    assert (d["template"], d["parse_failure_rate"], d["self_preference"]) == ("reference", 0.0, None)


def test_hybrid_regex_match_sends_items_without_a_match_to_the_judge(gateway):
    """regex_match reports a pattern that found nothing as "no answer", like the other extracting metrics, so a
    hybrid evaluation asks the judge about that item instead of deciding it wrong automatically."""
    slug = _slug("judge-hybrid-regex")
    rows = ["[[say:answer: B]]", "[[say:I cannot tell. JUDGE:SCORE=8]]"]
    metric = {"name": "regex_match", "params": {"pattern": r"answer: (\w+)"}}
    r = upload(gateway, slug, rows, "hybrid", {"mode": "rubric", "judges": ["uep-judge"], "max_retries": 1}, metric=metric)
    assert r.status_code == 201, r.text
    evaluation_id = submit(gateway, benchmark=slug, model="uep-judge")
    assert wait_done(gateway, evaluation_id, timeout_s=60)["status"] == "completed"
    items = all_results(gateway, evaluation_id)
    assert [(x["sample_ordinal"], x["metrics"]["decided_by"], x["is_correct"]) for x in items] == [
        (0, "automatic", True),
        (1, "judge", True),  # the judge's 8 on 0-10 passes the midpoint 5
    ]
    assert items[1]["metrics"]["route_reason"] == "no_answer" and items[1]["metrics"]["judge_overall"] == 8
    routes = gateway.get("/v1/judges/routes", params={"evaluation_id": evaluation_id}).json()
    assert [(x["sample_ordinal"], x["stage"], x["reason"]) for x in routes] == [(1, "judge", "no_answer")]
