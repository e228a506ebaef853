"""Judge calibration through the API on the real stack: a calibration sample of 20 of a judged evaluation's
items, two annotators, the agreement against scikit-learn and the krippendorff package on the same data, the
snapshot recorded when the task completes, the judge page's read (cost per verdict, flag) and tenant walls.

Source: ``uep-oracle`` on the first 22 GSM8K items. The judge verdicts are stored as the judge service stores
them (``judge_verdicts`` rows, one valid rubric verdict per item of ordinals 0..21), with two judge charges in
the spend ledger (role ``judge``); the gateway reads only those rows.
"""

from __future__ import annotations

import uuid
from decimal import Decimal

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from sqlalchemy import text

from .helpers import submit, tenant_headers, wait_done

JUDGE = "uep-judge-calibrated"  # + a suffix per fixture instance (several modules may judge on one stack)
QUESTIONS = [
    {"name": "correct", "type": "pass_fail", "prompt": "Is the final answer correct?"},
    {"name": "quality", "type": "rating", "scale_min": 1, "scale_max": 5, "prompt": "Quality of the reasoning"},
]
# per sample ordinal 0..21: judge, alice, bob (P pass, F fail) and ratings 1..5
J_PF = "PPFPFPPFFPPPFPFFPPFPFP"
A_PF = "PPFPFFPFFPPPFPPFPPFFFP"
B_PF = "PPFFFPPFPPPPFPFFPFFPPP"
J_R = [5, 4, 2, 4, 1, 3, 5, 2, 1, 4, 5, 4, 2, 5, 3, 1, 4, 5, 2, 3, 2, 4]
A_R = [5, 4, 1, 4, 2, 2, 5, 2, 1, 3, 5, 5, 2, 4, 3, 1, 4, 4, 2, 2, 1, 4]
B_R = [4, 4, 2, 3, 1, 3, 5, 3, 2, 4, 4, 4, 1, 5, 4, 2, 3, 5, 1, 3, 2, 5]
JUDGE_COST = (Decimal("0.0300"), Decimal("0.0140"))  # two charges: 0.044 over 22 verdicts = 0.002 per verdict
PF = {"P": "pass", "F": "fail"}


@pytest.fixture(scope="module")
def judged(gateway, db):
    """``(evaluation id, samples, judge name)``: a completed evaluation whose 22 items carry a judge verdict each."""
    evaluation_id = submit(gateway, benchmark="gsm8k", model="uep-oracle", sample_limit=22)
    assert wait_done(gateway, evaluation_id)["status"] == "completed"
    judge_id = uuid.uuid4()
    name = f"{JUDGE}-{judge_id.hex[:6]}"
    with db.begin() as c:
        ev = c.execute(
            text("SELECT tenant_id, benchmark_id, model_id FROM evaluations WHERE id = :e"), {"e": evaluation_id}
        ).one()
        samples = c.execute(
            text("SELECT s.ordinal, s.id FROM samples s JOIN sample_results r ON r.sample_id = s.id WHERE r.evaluation_id = :e"),
            {"e": evaluation_id},
        ).all()
        assert len(samples) == 22
        for ordinal, sample_id in samples:
            overall = 8.0 if J_PF[ordinal] == "P" else 2.0  # pass iff ≥ 5 on the default 0–10 scale
            quality = 2.5 * (J_R[ordinal] - 1)  # 0–10 → exactly the point J_R on 1–5
            c.execute(
                text(
                    "INSERT INTO judge_verdicts (evaluation_id, sample_id, repeat, arm, benchmark_id, candidate_model_id, "
                    "judge_model_id, judge_model_name, mode, template, template_version, position, valid, attempts, overall, "
                    "scores, attempts_log, answer_chars) VALUES (:e, :s, 0, 'main', :b, :m, :j, :n, 'rubric', 'rubric', 'v1', "
                    "'-', true, 1, :o, CAST(:sc AS jsonb), '[]', :chars)"
                ),
                {
                    "e": evaluation_id,
                    "s": sample_id,
                    "b": ev.benchmark_id,
                    "m": ev.model_id,
                    "j": judge_id,
                    "n": name,
                    "o": overall,
                    "sc": f'{{"quality": {quality}}}',
                    "chars": 100 + ordinal,
                },
            )
        for cost in JUDGE_COST:
            c.execute(
                text(
                    "INSERT INTO spend_ledger (tenant_id, evaluation_id, model_id, role, kind, items, reserved, settled) "
                    "VALUES (:t, :e, :j, 'judge', 'charge', 0, 0, :c)"
                ),
                {"t": ev.tenant_id, "e": evaluation_id, "j": judge_id, "c": cost},
            )
    return evaluation_id, samples, name


def annotate(gateway, task_id: str, name: str, pf: str, ratings: list[int]) -> list[int]:
    seen: list[int] = []
    for _ in range(40):
        body = gateway.get(f"/v1/annotation-tasks/{task_id}/next", params={"annotator": name}).json()
        if body["item"] is None:
            return seen
        o = body["item"]["sample_ordinal"]
        seen.append(o)
        r = gateway.post(
            f"/v1/annotation-tasks/{task_id}/annotations",
            headers={"X-UEP-Annotator": name},
            json={"assignment_id": body["assignment_id"], "answers": {"correct": PF[pf[o]], "quality": ratings[o]}},
        )
        assert r.status_code == 201, r.text
    raise AssertionError("annotator loop did not end")


@pytest.fixture(scope="module")
def calibrated(gateway, judged):
    evaluation_id, _, name = judged
    r = gateway.post(
        "/v1/annotation-tasks",
        json={
            "name": "judge calibration",
            "evaluation_id": evaluation_id,
            "questions": QUESTIONS,
            "annotations_per_item": 2,
            "calibration_sample": 20,
            "calibration_seed": 7,
        },
    )
    assert r.status_code == 201, r.text
    task = r.json()
    assert task["total_items"] == 20
    picked = sorted(annotate(gateway, task["id"], "cal-alice", A_PF, A_R))
    assert sorted(annotate(gateway, task["id"], "cal-bob", B_PF, B_R)) == picked
    assert picked == sorted(set(range(22)) - {5, 17})  # random.Random(7).sample of the 22 judged items
    assert gateway.get(f"/v1/annotation-tasks/{task['id']}").json()["status"] == "completed"
    return task, picked, name


def test_calibration_matches_sklearn_and_krippendorff(gateway, calibrated):
    task, picked, name = calibrated
    body = gateway.get(f"/v1/annotation-tasks/{task['id']}/judge-agreement").json()
    (judge,) = body["judges"]
    assert (judge["judge_model"], judge["items"]) == (name, 20)
    q = {x["question"]: x["calibration"] for x in judge["questions"]}
    j, a, b = ([s[o] for o in picked] for s in (J_PF, A_PF, B_PF))
    ka, kb = cohen_kappa_score(j, a), cohen_kappa_score(j, b)
    assert [x["kappa"] for x in q["correct"]["per_annotator"]] == [pytest.approx(ka, abs=1e-12), pytest.approx(kb, abs=1e-12)]
    assert q["correct"]["kappa_mean"] == pytest.approx((ka + kb) / 2, abs=1e-12)
    coded = np.array([[float(c == "P") for c in s] for s in (j, a, b)])
    alpha = krippendorff.alpha(reliability_data=coded, level_of_measurement="nominal")
    assert q["correct"]["alpha"] == pytest.approx(alpha, abs=1e-12)
    assert q["correct"]["items"] == 20 and q["correct"]["annotations"] == 40
    # the seeded draw (random.Random(7).sample of the 22 judged items) left out two; on the 20 drawn:
    assert (round(ka, 4), round(kb, 4), round(alpha, 4)) == EXPECTED_LABELS
    jr, ar, br = ([s[o] for o in picked] for s in (J_R, A_R, B_R))
    scale = [1, 2, 3, 4, 5]
    wa = cohen_kappa_score(jr, ar, labels=scale, weights="quadratic")
    wb = cohen_kappa_score(jr, br, labels=scale, weights="quadratic")
    assert q["quality"]["kappa_mean"] == pytest.approx((wa + wb) / 2, abs=1e-12)
    interval = krippendorff.alpha(
        reliability_data=np.array([jr, ar, br], float), level_of_measurement="interval", value_domain=scale
    )
    assert q["quality"]["alpha"] == pytest.approx(interval, abs=1e-12)
    assert (round(wa, 4), round(wb, 4), round(interval, 4)) == EXPECTED_RATINGS


# The seeded draw leaves out ordinals 5 and 17. On the 20 drawn (scikit-learn and krippendorff 0.8, by hand
# for the kappas: alice agrees with the judge on 18, p_e = 0.505 → (0.9 − 0.505)/0.495 = 0.7980; bob on 17,
# p_e = 0.51 → 0.34/0.49 = 0.6939):
EXPECTED_LABELS = (0.798, 0.6939, 0.6663)  # Cohen's kappa judge–alice, judge–bob; nominal alpha of the three
EXPECTED_RATINGS = (0.9136, 0.8481, 0.8455)  # quadratic kappa judge–alice, judge–bob; interval alpha of the three


def test_judge_page_lists_history_cost_and_flag(gateway, calibrated):
    task, _, name = calibrated
    r = gateway.get("/v1/judges")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["threshold"] == pytest.approx(0.4)
    (judge,) = [x for x in body["judges"] if x["judge_model"] == name]
    assert (judge["verdicts"], judge["invalid_verdicts"], judge["evaluations"]) == (22, 0, 1)
    assert judge["cost"] == pytest.approx(0.044) and judge["cost_per_verdict"] == pytest.approx(0.002)
    (snap,) = judge["history"]  # recorded when the task's last item completed
    assert snap["task_id"] == task["id"] and snap["items"] == 20
    per_q = {x["question"]: x["agreement"] for x in snap["questions"]}
    assert judge["agreement"] == pytest.approx(min(per_q.values())) == pytest.approx(snap["agreement"])
    assert judge["flagged"] is (judge["agreement"] < 0.4)
    # the leaderboard entry of the judged model carries its judge's cost and standing (the entry is the newest
    # judged run of uep-oracle on these 22 items: this module's, or another module's built the same way)
    board = gateway.get("/v1/leaderboards/gsm8k").json()
    (key,) = [x["key"] for x in board["item_sets"] if x["samples"] == 22]
    entries = gateway.get("/v1/leaderboards/gsm8k", params={"item_set": key}).json()["entries"]
    (entry,) = [e for e in entries if e["model"] == "uep-oracle"]
    (mark,) = entry["judges"]
    assert mark["judge_model"].startswith(JUDGE) and mark["verdicts"] == 22
    assert mark["cost_per_verdict"] == pytest.approx(0.002) and mark["flagged"] is (mark["agreement"] < 0.4)
    if entry["evaluation_id"] == task["source_evaluation_id"]:
        assert (mark["judge_model"], mark["agreement"]) == (name, pytest.approx(judge["agreement"]))
    # a second snapshot on request: the history grows, newest first
    rec = gateway.post(f"/v1/annotation-tasks/{task['id']}/calibration")
    assert rec.status_code == 201 and len(rec.json()["calibrations"]) == 2, rec.text
    again = next(x for x in gateway.get("/v1/judges").json()["judges"] if x["judge_model"] == name)
    assert len(again["history"]) == 2 and again["history"][0]["computed_at"] > again["history"][1]["computed_at"]
    rows = gateway.get("/v1/judges/calibrations", params={"task_id": task["id"]}).json()
    assert len(rows) == 4 and {r["question"] for r in rows} == {"correct", "quality"}
    assert rows[0]["statistics"]["confusion"]["labels"]
    costs = gateway.get("/v1/judges/costs", params={"evaluation_id": task["source_evaluation_id"]}).json()
    assert costs["costs"] == [
        {
            "evaluation_id": task["source_evaluation_id"],
            "judge_model": name,
            "cost": pytest.approx(0.044),
            "verdicts": 22,
            "cost_per_verdict": pytest.approx(0.002),
        }
    ]


def test_another_tenant_sees_none_of_it(stack, gateway, calibrated):
    task, _, name = calibrated
    other = tenant_headers(stack, f"cal-b-{uuid.uuid4().hex[:6]}", "admin")
    assert name not in {j["judge_model"] for j in gateway.get("/v1/judges", headers=other).json()["judges"]}
    r = gateway.get("/v1/judges/calibrations", params={"task_id": task["id"]}, headers=other)
    assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["query", "task_id"], r.text
    assert gateway.get("/v1/judges/calibrations", params={"judge_model": name}, headers=other).json() == []
    r = gateway.get("/v1/judges/costs", params={"evaluation_id": task["source_evaluation_id"]}, headers=other)
    assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["query", "evaluation_id"], r.text
    r = gateway.post(f"/v1/annotation-tasks/{task['id']}/calibration", headers=other)
    assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["path", "task_id"], r.text
    viewer = tenant_headers(stack, f"cal-v-{uuid.uuid4().hex[:6]}", "viewer")
    r = gateway.post(f"/v1/annotation-tasks/{task['id']}/calibration", headers=viewer)
    assert r.status_code == 403, r.text  # recording is a builder's or admin's write


def test_calibration_sample_needs_judged_items(gateway):
    plain = submit(gateway, benchmark="gsm8k", model="uep-oracle", sample_limit=2)
    assert wait_done(gateway, plain)["status"] == "completed"
    r = gateway.post(
        "/v1/annotation-tasks",
        json={"name": "no judge", "evaluation_id": plain, "questions": QUESTIONS, "calibration_sample": 5},
    )
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "calibration_sample"], r.text
