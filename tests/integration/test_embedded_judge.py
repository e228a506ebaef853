"""The embedded LLM (SmolLM2-135M-Instruct on Triton) as a real judge, end to end on the stack: its judge
calls go through the inference service with the answer's JSON schema, Triton's model server decodes under
the grammar llama.cpp builds from it, so every verdict parses and lies on the declared integer scale.

A custom 1-5 rubric over 20 of the embedded model's own replies (the case that used to fail every item with
``"overall" 10 is outside the scale [1, 5]``) completes with no invalid verdict; a pairwise evaluation reports
the position-swap inconsistency computed from both orders of every comparison; the built-in gsm8k-judged
benchmark is judged by the embedded LLM. Values asserted are the scale's bounds and counts recomputed from the
stored verdicts, never the small model's opinions, which carry no meaning."""

import json
import uuid

from .helpers import all_results, submit, wait_done

JUDGE = "smollm2-135m-instruct"
PAIRS = 6
"""Comparisons of the pairwise test (each asked in both orders)."""

QUESTIONS = [
    "My parcel has not arrived after ten days. What should I do?",
    "How do I reset the password of my account?",
    "Can I return a pair of shoes I have worn once?",
    "Why was I charged twice for one order?",
    "Do you ship to Canada?",
    "How long does a refund take to reach my card?",
    "The blender I bought makes a burning smell. Is it safe?",
    "Can I change the delivery address after ordering?",
    "What does the warranty on a laptop cover?",
    "I received the wrong colour of a shirt. How do I exchange it?",
    "How can I cancel my subscription?",
    "Is there a discount for students?",
    "My coupon code says it is invalid. Why?",
    "Can I pick up my order in a store?",
    "What payment methods do you accept?",
    "How do I track my order?",
    "Can I order a gift without the price on the receipt?",
    "The app logs me out every few minutes. What can I do?",
    "Do you price match other shops?",
    "How do I delete my account and my data?",
]
RUBRIC = {
    "mode": "rubric",
    "judges": [JUDGE],
    "dimensions": [
        {"name": "helpfulness", "description": "Does the reply help the customer?", "min": 1, "max": 5, "integer": True},
        {"name": "politeness", "description": "Is the reply polite?", "min": 1, "max": 5, "integer": True},
    ],
    "overall_min": 1,
    "overall_max": 5,
    "overall_integer": True,
    "max_retries": 1,
}


def _upload(gateway, slug: str, judge: dict) -> None:
    spec = {
        "slug": slug,
        "name": "Customer-service replies, judged 1-5",
        "prompt": {"template": "You are a customer-service agent. Answer briefly.\n\n{{ question }}", "max_tokens": 48},
        "metric": {"name": "exact_match", "params": {}},  # required of an upload; llm_judge items all go to the judge
        "evaluation_type": "llm_judge",
        "judge": judge,
    }
    rows = "\n".join(json.dumps({"id": f"q{i}", "question": q, "answer": "-"}) for i, q in enumerate(QUESTIONS))
    r = gateway.post("/v1/benchmarks", data={"spec": json.dumps(spec)}, files={"file": ("rows.jsonl", rows.encode())})
    assert r.status_code == 201, r.text


def _verdicts(gateway, evaluation_id: str) -> list[dict]:
    r = gateway.get("/v1/judges/verdicts", params={"evaluation_id": evaluation_id, "limit": 500})
    assert r.status_code == 200, r.text
    return r.json()


def test_a_1_to_5_rubric_judged_by_the_embedded_llm_has_no_invalid_verdict(gateway):
    slug = f"cs-judged-{uuid.uuid4().hex[:8]}"
    _upload(gateway, slug, RUBRIC)
    evaluation_id = submit(gateway, benchmark=slug, model=JUDGE)
    final = wait_done(gateway, evaluation_id, timeout_s=900)
    assert final["status"] == "completed", final
    s = final["summary"]
    assert (s["n"], s["errors"], s["scored"]) == (20, 0, 20)
    items = all_results(gateway, evaluation_id)
    assert len(items) == 20 and all(x["error"] is None for x in items)
    for x in items:
        m = x["metrics"]
        assert m["judge_invalid"] == 0 and m["judge_constrained"] == 1, m
        assert m["judge_overall"] in {1, 2, 3, 4, 5}, m  # an integer on the declared scale, never 10
        assert m["judge_helpfulness"] in {1, 2, 3, 4, 5} and m["judge_politeness"] in {1, 2, 3, 4, 5}, m
        assert x["score"] == (m["judge_overall"] - 1) / 4  # overall rescaled to [0, 1]
        assert x["is_correct"] == (m["judge_overall"] >= 3)  # the midpoint of 1-5

    verdicts = _verdicts(gateway, evaluation_id)
    assert len(verdicts) == 20 and all(v["valid"] for v in verdicts)
    replies = [a for v in verdicts for a in v["attempts_log"]]
    assert all(a["constrained"] and a["status"] == "valid" for a in replies)
    validity = sum(v["valid"] for v in verdicts) / len(verdicts)
    first_try = sum(1 for v in verdicts if v["attempts"] == 1) / len(verdicts)
    print(f"embedded judge: verdict validity {validity:.0%} of {len(verdicts)}, valid at the first reply {first_try:.0%}")
    assert validity == 1.0

    (d,) = gateway.get("/v1/judges/diagnostics", params={"evaluation_id": evaluation_id}).json()["judges"]
    assert (d["judge_model"], d["invalid_rate"], d["parse_failures"]) == (JUDGE, 0.0, 0)


def test_a_pairwise_evaluation_by_the_embedded_llm_reports_its_position_swap_inconsistency(gateway):
    slug = f"cs-pairwise-{uuid.uuid4().hex[:8]}"
    _upload(gateway, slug, RUBRIC | {"mode": "rubric"})
    # the baseline's answers come from the oracle, graded by the deterministic stand-in on its 0-10 scale (fast)
    stand_in = {"judges": ["uep-judge"], "dimensions": [{"name": "helpfulness", "min": 0, "max": 10}]}
    stand_in |= {"overall_min": 0, "overall_max": 10, "overall_integer": False}
    baseline = submit(gateway, benchmark=slug, model="uep-oracle", sample_limit=PAIRS, judge=stand_in)
    assert wait_done(gateway, baseline, timeout_s=300)["status"] == "completed"
    pairwise = {"mode": "pairwise", "judges": [JUDGE], "baseline_evaluation_id": baseline, "max_retries": 1}
    evaluation_id = submit(gateway, benchmark=slug, model=JUDGE, sample_limit=PAIRS, judge=pairwise)
    final = wait_done(gateway, evaluation_id, timeout_s=900)
    assert final["status"] == "completed", final
    items = all_results(gateway, evaluation_id)
    assert len(items) == PAIRS and all(x["error"] is None for x in items)

    verdicts = _verdicts(gateway, evaluation_id)
    assert len(verdicts) == 2 * PAIRS and all(v["valid"] and v["winner"] in ("A", "B", "tie") for v in verdicts)
    by_item: dict[int, dict[str, dict]] = {}
    for v in verdicts:
        by_item.setdefault(v["sample_ordinal"], {})[v["position"]] = v
    inconsistent = sum(o["AB"]["candidate_outcome"] != o["BA"]["candidate_outcome"] for o in by_item.values())
    for x in items:  # each item's flag is its own comparison's
        o = by_item[x["sample_ordinal"]]
        assert x["metrics"]["pairwise_inconsistent"] == int(o["AB"]["candidate_outcome"] != o["BA"]["candidate_outcome"])
    (d,) = gateway.get("/v1/judges/diagnostics", params={"evaluation_id": evaluation_id}).json()["judges"]
    assert (d["pairwise_comparisons"], d["position_swap_inconsistent"]) == (PAIRS, inconsistent)
    assert d["position_swap_inconsistency_rate"] == inconsistent / PAIRS
    print(
        f"embedded judge, pairwise: position-swap inconsistency {inconsistent}/{PAIRS}, first-position rate {d['first_position_rate']}"
    )


def test_the_builtin_judged_benchmark_is_judged_by_the_embedded_llm(gateway):
    evaluation_id = submit(gateway, benchmark="gsm8k-judged", model="uep-oracle", sample_limit=4)
    final = wait_done(gateway, evaluation_id, timeout_s=600)
    assert final["status"] == "completed" and final["summary"]["errors"] == 0, final
    for x in all_results(gateway, evaluation_id):
        m = x["metrics"]
        assert (m["judge_models"], m["judge_invalid"], m["judge_constrained"]) == (JUDGE, 0, 1)
        assert m["judge_overall"] in {1, 2, 3, 4, 5} and m["judge_accuracy"] in {1, 2, 3, 4, 5}
