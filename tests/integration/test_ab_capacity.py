"""Capacity too small to pair: an A/B experiment whose two arms share a model that serves one call at a time
(``models.max_in_flight`` = 1) finishes, its arms taking turns (``uep_scheduler.flows.arm_packet``).

The model is the stack's oracle registered a second time with capacity 1. The oracle answers the item with
ordinal i correctly iff ``i % 3 != 2`` (deploy/model-server/.../oracle.py), whatever the template around it:
with 4 items each arm scores 3 of 4.
"""

from __future__ import annotations

from .helpers import register_model, wait_done


def test_two_arms_on_a_capacity_1_model_finish(stack, gateway, db):
    model = register_model(db, f"grpc://127.0.0.1:{stack.triton_grpc}", "uep_oracle", "cap1-oracle", max_in_flight=1)
    arms = [{"name": "base"}, {"name": "terse", "prompt_template": "{{ question }}\nReply with the number only."}]
    r = gateway.post("/v1/evaluations", json={"benchmark": "gsm8k", "model": model, "sample_limit": 4, "arms": arms})
    assert r.status_code == 202, r.text
    ids = [e["id"] for e in r.json()["evaluations"]]
    done = [wait_done(gateway, i, timeout_s=50) for i in ids]
    assert [d["status"] for d in done] == ["completed", "completed"]
    assert [(d["summary"]["n"], d["summary"]["correct"]) for d in done] == [(4, 3), (4, 3)]
