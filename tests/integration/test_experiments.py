"""The views of an A/B experiment and of a batch on the real stack: members in request order, their status and
progress, and the paired comparison of every member with the first (McNemar, paired bootstrap, fingerprint
diff naming what the arm changed); another tenant's experiment or batch is a 404.

The oracle model answers the question of the prompt whatever the template around it, so both arms give the
same answers: every pair is concordant, McNemar's b = c = 0 (exact p = 1) and the accuracy difference is 0.
"""

from __future__ import annotations

import uuid

import pytest

from .helpers import register_model, tenant_headers, wait_done

TERSE = "{{ question }}\nReply with the number only."


@pytest.fixture(scope="module")
def other_tenant(stack) -> dict[str, str]:
    return tenant_headers(stack, f"exp-b-{uuid.uuid4().hex[:6]}", "viewer")


def test_experiment_view_compares_every_arm_with_the_first(stack, gateway, other_tenant):
    arms = [{"name": "terse", "prompt_template": TERSE}, {"name": "base"}]  # request order, not alphabetical
    r = gateway.post("/v1/evaluations", json={"benchmark": "gsm8k", "model": "uep-oracle", "sample_limit": 4, "arms": arms})
    assert r.status_code == 202, r.text
    exp, ids = r.json()["experiment_id"], {e["arm"]: e["id"] for e in r.json()["evaluations"]}
    done = {arm: wait_done(gateway, i) for arm, i in ids.items()}
    assert {d["status"] for d in done.values()} == {"completed"}

    r = gateway.get(f"/v1/experiments/{exp}", params={"transitions": 5})
    assert r.status_code == 200, r.text
    view = r.json()
    assert (view["kind"], view["status"], view["benchmark"]["slug"]) == ("experiment", "completed", "gsm8k")
    assert [(m["arm"], m["evaluation_id"], m["status"]) for m in view["members"]] == [
        ("terse", ids["terse"], "completed"),
        ("base", ids["base"], "completed"),
    ]
    assert view["progress"]["completed"] == view["progress"]["total"] == 8
    assert [m["accuracy"] for m in view["members"]] == [done["terse"]["summary"]["accuracy"], done["base"]["summary"]["accuracy"]]
    assert not any(m["release"] for m in view["members"])

    (c,) = view["comparisons"]
    assert (c["arm"], c["baseline_arm"], c["baseline_evaluation_id"]) == ("base", "terse", ids["terse"])
    cmp = c["comparison"]
    assert cmp["baseline_reason"] == "first_arm" and cmp["n_paired_with_verdicts"] == 4
    assert (cmp["mcnemar"]["b"], cmp["mcnemar"]["c"], cmp["mcnemar"]["p_value"]) == (0, 0, 1.0)
    assert cmp["accuracy"]["difference"] == 0.0 and cmp["accuracy"]["baseline_mean"] == done["terse"]["summary"]["accuracy"]
    # the change tested is the prompt template, and the fingerprint diff says so
    diff = cmp["fingerprint_diff"]
    assert [ch["field"] for ch in diff["changes"]] == ["prompt.template_sha256"] and not diff["only_model_changed"]

    r = gateway.get(f"/v1/experiments/{exp}", headers=other_tenant)
    assert r.status_code == 404 and r.json()["detail"][0]["loc"] == ["path", "experiment_id"]
    r = gateway.get(f"/v1/experiments/{uuid.uuid4()}")
    assert r.status_code == 404 and r.json()["detail"][0]["type"] == "unknown_experiment"


def test_batch_view_in_request_order_with_comparisons_to_the_first_model(stack, db, gateway, other_tenant):
    ep = f"grpc://127.0.0.1:{stack.triton_grpc}"
    names = [register_model(db, ep, "uep_oracle", f"batch-{x}") for x in "zy"]  # not alphabetical
    r = gateway.post("/v1/evaluations", json={"benchmark": "gsm8k", "models": names, "sample_limit": 2})
    assert r.status_code == 202, r.text
    batch = r.json()["batch_id"]
    for e in r.json()["evaluations"]:
        assert wait_done(gateway, e["id"])["status"] == "completed"
    view = gateway.get(f"/v1/batches/{batch}").json()
    assert view["kind"] == "batch" and [m["model"]["name"] for m in view["members"]] == names
    (c,) = view["comparisons"]
    assert (c["baseline_model"], c["model"], c["comparison"]["baseline_reason"]) == (names[0], names[1], "first_in_batch")
    assert c["comparison"]["fingerprint_diff"]["only_model_changed"]
    assert gateway.get(f"/v1/batches/{batch}", headers=other_tenant).status_code == 404
