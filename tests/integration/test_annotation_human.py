"""Human evaluation through the API on the real stack: three annotators, gold items, Krippendorff's alpha
against a hand computation, flagged-annotator exclusion, judge–human agreement, and the human scores
arriving in sample_results (ScoreComputed → reporter) of a new human evaluation.

Source: ``uep-oracle`` on the first 8 GSM8K items; it answers ordinal 2 and 5 wrong (ordinal ≡ 2 mod 3),
the others right (deploy/model-server/README.md). Items 0 and 1 are gold (known answer: pass), so the
scored items are ordinals 2..7 and the human evaluation has 6 items.
"""

from __future__ import annotations

import uuid

import krippendorff
import numpy as np
import pytest
from sqlalchemy import text

from .helpers import all_results, submit, wait_done

QUESTIONS = [
    {"name": "correct", "type": "pass_fail", "prompt": "Is the final answer correct?"},
    {"name": "quality", "type": "rating", "scale_min": 1, "scale_max": 5, "prompt": "Quality of the reasoning"},
    {"name": "note", "type": "comment"},
]
# scored items by sample ordinal → (correct, quality); carol is a careless annotator who always says pass/5
# and gets both gold items wrong (answers fail), so she is flagged (0/2 < 0.7).
ALICE = {
    0: ("pass", 5),
    1: ("pass", 4),
    2: ("fail", 1),
    3: ("pass", 4),
    4: ("pass", 5),
    5: ("fail", 2),
    6: ("pass", 4),
    7: ("pass", 3),
}
BOB = {
    0: ("pass", 4),
    1: ("pass", 4),
    2: ("fail", 2),
    3: ("pass", 4),
    4: ("pass", 4),
    5: ("fail", 1),
    6: ("pass", 5),
    7: ("fail", 2),
}
CAROL = dict.fromkeys(range(8), ("pass", 5)) | {0: ("fail", 5), 1: ("fail", 5)}
SCRIPT = {"alice": ALICE, "bob": BOB, "carol": CAROL}


def annotate_all(gateway, task_id: str, name: str, answers: dict[int, tuple[str, int]]) -> list[int]:
    """next → submit until nothing is left; returns the sample ordinals in the order handed out."""
    seen = []
    for _ in range(50):
        r = gateway.get(f"/v1/annotation-tasks/{task_id}/next", params={"annotator": name})
        assert r.status_code == 200, r.text
        body = r.json()
        if body["item"] is None:
            return seen
        ordinal = body["item"]["sample_ordinal"]
        seen.append(ordinal)
        correct, quality = answers[ordinal]
        s = gateway.post(
            f"/v1/annotation-tasks/{task_id}/annotations",
            headers={"X-UEP-Annotator": name},
            json={"assignment_id": body["assignment_id"], "answers": {"correct": correct, "quality": quality}},
        )
        assert s.status_code == 201, s.text
    raise AssertionError("annotator loop did not end")


@pytest.fixture(scope="module")
def source_evaluation(gateway):
    evaluation_id = submit(gateway, benchmark="gsm8k", model="uep-oracle", sample_limit=8)
    assert wait_done(gateway, evaluation_id)["status"] == "completed"
    return evaluation_id


@pytest.fixture(scope="module")
def annotated_task(gateway, source_evaluation):
    r = gateway.post(
        "/v1/annotation-tasks",
        json={
            "name": "gsm8k oracle check",
            "evaluation_id": source_evaluation,
            "questions": QUESTIONS,
            "guidelines": "Mark pass when the final number equals the reference.",
            "annotations_per_item": 3,
            "gold": [
                {"sample_ordinal": 0, "answers": {"correct": "pass"}},
                {"sample_ordinal": 1, "answers": {"correct": "pass"}},
            ],
            "quality_threshold": 0.7,
            "min_gold_answers": 2,
        },
    )
    assert r.status_code == 201, r.text
    task = r.json()
    assert (task["total_items"], task["gold_items"], task["status"]) == (6, 2, "open")
    order = {name: annotate_all(gateway, task["id"], name, answers) for name, answers in SCRIPT.items()}
    return task, order


def test_assignment_order_and_completion(gateway, annotated_task):
    task, order = annotated_task
    # gold first (qualification), then benchmark order; everybody gets every item exactly once
    for name, seen in order.items():
        assert seen == [0, 1, 2, 3, 4, 5, 6, 7], name
    view = gateway.get(f"/v1/annotation-tasks/{task['id']}").json()
    assert (view["status"], view["completed_items"], view["annotations"]) == ("completed", 6, 24)
    # a fourth annotator gets nothing once every scored item is complete
    late = gateway.get(f"/v1/annotation-tasks/{task['id']}/next", params={"annotator": f"dave-{uuid.uuid4().hex[:6]}"}).json()
    assert late["item"] is None and late["reason"] == "task_completed"


def test_gold_accuracy_flags_the_careless_annotator(gateway, annotated_task):
    task, _ = annotated_task
    body = gateway.get(f"/v1/annotation-tasks/{task['id']}/annotators").json()
    by_name = {a["name"]: a for a in body["annotators"]}
    assert {n: (a["gold_checked"], a["gold_correct"], a["flagged"]) for n, a in by_name.items()} == {
        "alice": (2, 2, False),
        "bob": (2, 2, False),
        "carol": (2, 0, True),
    }
    assert by_name["carol"]["accuracy"] == 0.0 and by_name["alice"]["accuracy"] == 1.0


def test_alpha_per_question_against_hand_computation(gateway, annotated_task):
    task, _ = annotated_task
    everyone = gateway.get(f"/v1/annotation-tasks/{task['id']}/agreement").json()
    correct = next(q for q in everyone["questions"] if q["question"] == "correct")
    # 'correct' over the 8 items (gold included), coders alice, bob, carol (P = pass, F = fail):
    #   gold0 P P F · gold1 P P F · 2 F F P · 3 P P P · 4 P P P · 5 F F P · 6 P P P · 7 P F P
    # coincidences (m_u = 3): units with 2P+1F (gold0, gold1, 7) add o_PP 1, o_PF 1, o_FP 1 each;
    # units with 1P+2F (2, 5) add o_FF 1, o_PF 1, o_FP 1 each; units with 3P (3, 4, 6) add o_PP 3 each.
    # o_PP = 3 + 9 = 12, o_FF = 2, o_PF = o_FP = 5; n_P = 17, n_F = 7, n = 24.
    # alpha = 1 − (n − 1)(o_PF + o_FP) / (2 n_P n_F) = 1 − 23·10 / 238 = 8/238
    assert correct["level"] == "nominal" and correct["units"] == 8 and correct["coders"] == 3
    assert correct["alpha"] == pytest.approx(8 / 238, abs=1e-12)
    # without the flagged annotator (alice, bob; m_u = 2): agreeing units gold0, gold1, 3, 4, 6 add o_PP 2 each,
    # 2 and 5 add o_FF 2 each, unit 7 (P, F) adds o_PF = o_FP = 1. o_PP = 10, o_FF = 4, n_P = 11, n_F = 5, n = 16.
    # alpha = 1 − 15·2 / (2·11·5) = 1 − 30/110 = 8/11
    trusted = gateway.get(f"/v1/annotation-tasks/{task['id']}/agreement", params={"exclude_flagged": "true"}).json()
    assert trusted["excluded_annotators"] == ["carol"]
    t_correct = next(q for q in trusted["questions"] if q["question"] == "correct")
    assert t_correct["alpha"] == pytest.approx(8 / 11, abs=1e-12) and t_correct["coders"] == 2
    # 'quality' (interval) against the reference implementation on the same coders × units matrix
    quality = next(q for q in everyone["questions"] if q["question"] == "quality")
    matrix = np.array([[SCRIPT[n][o][1] for o in range(8)] for n in ("alice", "bob", "carol")], dtype=float)
    assert quality["level"] == "interval"
    assert quality["alpha"] == pytest.approx(
        krippendorff.alpha(reliability_data=matrix, level_of_measurement="interval"), abs=1e-12
    )
    assert [q["question"] for q in everyone["questions"]] == ["correct", "quality"]  # comments have no alpha


def test_results_can_exclude_flagged_answers(gateway, annotated_task):
    task, _ = annotated_task
    every = gateway.get(f"/v1/annotation-tasks/{task['id']}/results", params={"include_gold": "false", "limit": 4}).json()
    assert len(every["items"]) == 4 and every["next_cursor"]
    rest = gateway.get(
        f"/v1/annotation-tasks/{task['id']}/results", params={"include_gold": "false", "limit": 4, "cursor": every["next_cursor"]}
    ).json()
    items = {i["sample_ordinal"]: i for i in every["items"] + rest["items"]}
    assert sorted(items) == [2, 3, 4, 5, 6, 7] and rest["next_cursor"] is None
    assert items[7]["aggregate"]["correct"] == {"n": 3, "pass_rate": pytest.approx(2 / 3), "majority": "pass"}
    trusted = gateway.get(f"/v1/annotation-tasks/{task['id']}/results", params={"exclude_flagged": "true"}).json()
    t7 = next(i for i in trusted["items"] if i["sample_ordinal"] == 7)
    assert t7["aggregate"]["correct"] == {"n": 2, "pass_rate": 0.5, "majority": None}
    assert {a["annotator"] for a in t7["answers"]} == {"alice", "bob"}


def test_human_scores_reach_sample_results_of_a_new_human_evaluation(gateway, db, annotated_task, source_evaluation):
    task, _ = annotated_task
    human_id = task["result_evaluation_id"]
    assert human_id and human_id != source_evaluation
    final = wait_done(gateway, human_id, timeout_s=60)
    assert final["status"] == "completed"
    assert final["progress"]["completed"] == 6 and final["progress"]["total"] == 6
    s = final["summary"]
    # scores leave out carol (flagged when the items completed: gold comes first). alice+bob majorities:
    # 2 F, 3 P, 4 P, 5 F, 6 P, 7 tie (no verdict) → scored 5, correct 3
    assert (s["n"], s["scored"], s["correct"], s["errors"]) == (6, 5, 3, 0)
    assert s["accuracy"] == pytest.approx(3 / 5)
    assert s["metric_name"] == "human_annotation"
    # means over the 6 items: pass rate (0 + 1 + 1 + 0 + 1 + 0.5) / 6; quality mean of alice+bob per item
    # (1.5 + 4 + 4.5 + 1.5 + 4.5 + 2.5) / 6
    assert s["metric_means"]["correct_pass_rate"] == pytest.approx(3.5 / 6)
    assert s["metric_means"]["quality_mean"] == pytest.approx(18.5 / 6)
    results = all_results(gateway, human_id)
    assert [r["sample_ordinal"] for r in results] == [2, 3, 4, 5, 6, 7]
    assert [r["is_correct"] for r in results] == [False, True, True, False, True, None]
    assert all(
        r["metrics"]["decided_by"] == "human" and r["metrics"]["annotations"] == 2 and r["metrics"]["excluded_flagged"] == 1
        for r in results
    )
    assert results[0]["output"]  # the annotated output travels with the score
    with db.connect() as c:
        cfg = c.execute(text("SELECT config FROM evaluations WHERE id = :e"), {"e": human_id}).scalar()
        source_rows = c.execute(
            text(
                "SELECT count(*), count(*) FILTER (WHERE metric_name = 'human_annotation') "
                "FROM sample_results WHERE evaluation_id = :e"
            ),
            {"e": source_evaluation},
        ).one()
        leases = c.execute(text("SELECT count(*) FROM sample_leases WHERE evaluation_id = :e"), {"e": human_id}).scalar()
    assert cfg["evaluation_type"] == "human" and cfg["source_evaluation_id"] == source_evaluation
    assert tuple(source_rows) == (8, 0)  # the automatic scores of the source are untouched
    assert leases == 0  # nothing of a human evaluation is ever dispatched to a model


def test_judge_human_agreement_per_judge_and_template_version(gateway, db, annotated_task, source_evaluation):
    """Judge verdicts as the judge service stores them (judge_verdicts), for the task's items."""
    task, _ = annotated_task
    overall = {0: 8, 1: 7, 2: 3, 3: 9, 4: 2, 5: 6, 6: 8, 7: 5}
    with db.begin() as c:
        ev = c.execute(text("SELECT benchmark_id, model_id FROM evaluations WHERE id = :e"), {"e": source_evaluation}).one()
        samples = c.execute(
            text("SELECT s.ordinal, s.id FROM samples s JOIN sample_results r ON r.sample_id = s.id WHERE r.evaluation_id = :e"),
            {"e": source_evaluation},
        ).all()
        for ordinal, sample_id in samples:
            for version, score in (("v1", overall[ordinal]), ("v2", 9)):
                c.execute(
                    text(
                        "INSERT INTO judge_verdicts (evaluation_id, sample_id, repeat, arm, benchmark_id, candidate_model_id, "
                        "judge_model_id, judge_model_name, mode, template, template_version, position, valid, attempts, overall, "
                        "scores, attempts_log) VALUES (:e, :s, 0, 'main', :b, :m, :j, 'uep-judge-t', 'rubric', 'rubric', :v, '-', "
                        "true, 1, :o, CAST(:sc AS jsonb), '[]')"
                    ),
                    {
                        "e": source_evaluation,
                        "s": sample_id,
                        "b": ev.benchmark_id,
                        "m": ev.model_id,
                        "j": uuid.uuid4(),
                        "v": version,
                        "o": score,
                        "sc": f'{{"quality": {score}}}',
                    },
                )
    body = gateway.get(f"/v1/annotation-tasks/{task['id']}/judge-agreement", params={"exclude_flagged": "true"}).json()
    by_version = {j["template_version"]: j for j in body["judges"]}
    assert sorted(by_version) == ["v1", "v2"] and by_version["v1"]["judge_model"] == "uep-judge-t"
    v1 = {q["question"]: q for q in by_version["v1"]["questions"]}
    # pass/fail: judge pass iff overall ≥ 5 (midpoint of 0–10, no judge config on this evaluation).
    # judge vs human majority (alice+bob): gold0 P/P, gold1 P/P, 2 F/F, 3 P/P, 4 F/P, 5 P/F, 6 P/P; item 7 has no
    # human majority → n = 7, agreement 5/7. Coincidences (2 coders): o_PP = 8, o_FF = 2, o_PF = o_FP = 2;
    # n_P = 10, n_F = 4, n = 14 → alpha = 1 − 13·4 / (2·10·4) = 1 − 52/80 = 0.35
    assert v1["correct"]["n"] == 7
    assert v1["correct"]["agreement"] == pytest.approx(5 / 7)
    assert v1["correct"]["alpha"] == pytest.approx(0.35, abs=1e-12)
    # rating: judge quality/10 against the humans' (mean − 1)/4, all 8 items
    assert v1["quality"]["n"] == 8 and v1["quality"]["mean_abs_diff"] is not None
    v2 = {q["question"]: q for q in by_version["v2"]["questions"]}
    assert v2["correct"]["agreement"] == pytest.approx(5 / 7)  # v2 always passes: right on 5 of the 7
