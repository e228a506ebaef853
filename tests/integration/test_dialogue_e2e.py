"""Conversation benchmarks end to end on the stack, with the embedded LLM as the model, the simulator and the
judge: the built-in multi-turn benchmark (each conversation's last customer turn answered with the history as
chat messages) and the simulated-customer benchmark (the embedded LLM plays each customer for up to 3 turns)
complete, with every item's transcript stored and returned by the results API, and every verdict of the
embedded judge valid and on its 1-5 scale; an upload with a malformed conversation is a 422 naming the line and
the field. Values asserted are structure, bounds and counts, never the small models' opinions. A calibration
task over the 20 judged conversations with two annotators (scripted labels, a computation check rather than a
human judgement) gives the judge's Cohen's kappa against each equal to scikit-learn's on the same labels."""

import json
import uuid

import pytest
from sklearn.metrics import cohen_kappa_score

from .helpers import all_results, submit, wait_done

LLM = "smollm2-135m-instruct"


def _verdicts(gateway, evaluation_id: str) -> list[dict]:
    r = gateway.get("/v1/judges/verdicts", params={"evaluation_id": evaluation_id, "limit": 500})
    assert r.status_code == 200, r.text
    return r.json()


def _samples(gateway, slug: str) -> dict[int, dict]:
    r = gateway.get(f"/v1/benchmarks/{slug}/samples", params={"limit": 100})
    assert r.status_code == 200, r.text
    return {s["ordinal"]: s for s in r.json()}


def _scores_on_scale(items: list[dict]) -> None:
    for x in items:
        m = x["metrics"]
        assert m["judge_invalid"] == 0 and m["judge_overall"] in {1, 2, 3, 4, 5}, m


@pytest.fixture(scope="module")
def dialogue_run(gateway) -> str:
    """The built-in multi-turn benchmark (20 conversations) answered and judged by the embedded LLM."""
    evaluation_id = submit(gateway, benchmark="support-dialogues", model=LLM)
    final = wait_done(gateway, evaluation_id, timeout_s=900)
    assert final["status"] == "completed", final
    return evaluation_id


@pytest.mark.slow  # minutes of the embedded LLM: make test-slow
def test_the_multi_turn_benchmark_answers_each_conversation_and_stores_its_transcript(gateway, dialogue_run):
    evaluation_id = dialogue_run
    items = all_results(gateway, evaluation_id)
    assert len(items) == 20 and all(x["error"] is None for x in items)
    samples = _samples(gateway, "support-dialogues")
    for x in items:
        t = x["transcript"]
        given = samples[x["sample_ordinal"]]["input"]["messages"]
        assert t["messages"][:-1] == given  # the history as uploaded, references included
        assert t["messages"][-1] == {"role": "assistant", "content": x["output"]}
        assert (t["simulated"], t["turns"], t["ended"]) == (False, 1, "answered")
    _scores_on_scale(items)
    verdicts = _verdicts(gateway, evaluation_id)
    validity = sum(v["valid"] for v in verdicts) / len(verdicts)
    print(f"embedded judge on 20 conversations: verdict validity {validity:.0%} of {len(verdicts)}")
    assert len(verdicts) == 20 and validity == 1.0


@pytest.mark.slow  # minutes of the embedded LLM: make test-slow
def test_the_simulated_customers_talk_to_the_model_and_the_judge_grades_the_transcript(gateway):
    evaluation_id = submit(gateway, benchmark="support-simulated", model=LLM, sample_limit=3)
    final = wait_done(gateway, evaluation_id, timeout_s=900)
    assert final["status"] == "completed", final
    items = all_results(gateway, evaluation_id)
    assert len(items) == 3 and all(x["error"] is None for x in items)
    samples = _samples(gateway, "support-simulated")
    for x in items:
        t = x["transcript"]
        sample = samples[x["sample_ordinal"]]["input"]
        assert t["simulated"] is True and (t["persona"], t["goal"]) == (sample["persona"], sample["goal"])
        roles = [m["role"] for m in t["messages"]]
        assert roles[0] == "system" and roles[1] == "user" and t["messages"][1]["content"] == sample["opening"]
        replies = roles.count("assistant")
        assert 1 <= t["turns"] == replies <= 3
        assert t["ended"] in {"user_done", "max_turns", "simulator_silent", "time_limit"}
        assert (t["ended"] == "max_turns") == (t["turns"] == 3)
        assert all(a != b for a, b in zip(roles[1:], roles[2:], strict=False))  # user and assistant take turns
        assert x["output"].startswith("System: ") and t["messages"][-1]["content"] in x["output"]
    _scores_on_scale(items)
    verdicts = _verdicts(gateway, evaluation_id)
    assert len(verdicts) == 3 and all(v["valid"] for v in verdicts)
    print("simulated customers: " + ", ".join(f"{x['transcript']['turns']} turns ({x['transcript']['ended']})" for x in items))


def test_a_malformed_conversation_upload_is_refused_naming_the_line_and_field(gateway):
    spec = {
        "slug": f"bad-dialogue-{uuid.uuid4().hex[:8]}",
        "name": "Malformed conversations",
        "prompt": {"template": "", "dialogue": {"messages_field": "messages"}},
        "metric": {"name": "contains", "params": {}},
    }
    good = [{"role": "user", "content": "Hello?"}]
    rows = [
        {"id": "a", "messages": good, "answer": "hi"},
        {"id": "b", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hi!"}], "answer": "x"},
    ]
    body = "\n".join(json.dumps(r) for r in rows).encode()
    r = gateway.post("/v1/benchmarks", data={"spec": json.dumps(spec)}, files={"file": ("rows.jsonl", body)})
    assert r.status_code == 422, r.text
    (problem,) = r.json()["detail"]
    assert problem["loc"] == ["body", "file", "line 2", "messages"] and problem["type"] == "bad_conversation"
    assert "the last message must be a user turn" in problem["msg"]


# scripted annotators for the calibration check (not human judgements): "P"/"F" per ordinal, politeness 1-5
ANNOTATOR_A = ("PPFPFPPFFPPPFPFFPPFP", [5, 4, 2, 4, 1, 3, 5, 2, 1, 4, 5, 4, 2, 5, 3, 1, 4, 5, 2, 3])
ANNOTATOR_B = ("PFFPFPPPFPPFFPFPPPFF", [4, 4, 3, 4, 2, 3, 5, 2, 2, 4, 4, 4, 1, 5, 3, 2, 4, 5, 3, 3])
PF = {"P": "pass", "F": "fail"}


def _annotate(gateway, task_id: str, name: str, labels: tuple[str, list[int]]) -> int:
    for done in range(30):
        body = gateway.get(f"/v1/annotation-tasks/{task_id}/next", params={"annotator": name}).json()
        if body["item"] is None:
            return done
        o = body["item"]["sample_ordinal"]
        r = gateway.post(
            f"/v1/annotation-tasks/{task_id}/annotations",
            headers={"X-UEP-Annotator": name},
            json={"assignment_id": body["assignment_id"], "answers": {"correct": PF[labels[0][o]], "politeness": labels[1][o]}},
        )
        assert r.status_code == 201, r.text
    raise AssertionError("annotator loop did not end")


@pytest.mark.slow  # minutes of the embedded LLM: make test-slow
def test_the_embedded_judges_agreement_with_two_annotators_is_sklearns_kappa(gateway, dialogue_run):
    questions = [
        {"name": "correct", "type": "pass_fail", "prompt": "Is the reply a good help-desk answer?"},
        {"name": "politeness", "type": "rating", "scale_min": 1, "scale_max": 5, "prompt": "Politeness"},
    ]
    r = gateway.post(
        "/v1/annotation-tasks",
        json={"name": "dialogue calibration", "evaluation_id": dialogue_run, "questions": questions,
              "annotations_per_item": 2, "calibration_sample": 20, "calibration_seed": 1},
    )  # fmt: skip
    assert r.status_code == 201, r.text
    task = r.json()
    assert _annotate(gateway, task["id"], "dlg-a", ANNOTATOR_A) == _annotate(gateway, task["id"], "dlg-b", ANNOTATOR_B) == 20
    (judge,) = gateway.get(f"/v1/annotation-tasks/{task['id']}/judge-agreement").json()["judges"]
    assert (judge["judge_model"], judge["items"]) == (LLM, 20)
    q = {x["question"]: x["calibration"] for x in judge["questions"]}
    items = {x["sample_ordinal"]: x for x in all_results(gateway, dialogue_run)}
    j = ["P" if items[o]["is_correct"] else "F" for o in range(20)]
    kappas = [cohen_kappa_score(j, list(labels[0])) for labels in (ANNOTATOR_A, ANNOTATOR_B)]
    got = [x["kappa"] for x in q["correct"]["per_annotator"]]
    print(f"embedded judge vs two scripted annotators (pass/fail): kappa API {got}, scikit-learn {kappas}")
    assert got == [pytest.approx(k, abs=1e-12) for k in kappas]
    jr = [items[o]["metrics"]["judge_politeness"] for o in range(20)]
    weighted = [
        cohen_kappa_score(jr, labels[1], labels=[1, 2, 3, 4, 5], weights="quadratic") for labels in (ANNOTATOR_A, ANNOTATOR_B)
    ]
    assert q["politeness"]["kappa_mean"] == pytest.approx(sum(weighted) / 2, abs=1e-12)
