"""The catalogue lists only what runs: the site's contract stand-ins ``uep-vllm-echo`` (Triton's vLLM back end's
tensors) and ``uep-trtllm-echo`` (the TensorRT-LLM ensemble's) are served by the local model server and
evaluate end to end on the real stack, through the inference service's ``vllm`` and ``trtllm`` request
builders."""

from __future__ import annotations

import pytest

from integration.helpers import all_results, submit, wait_done


@pytest.mark.parametrize("model", ["uep-vllm-echo", "uep-trtllm-echo"])
def test_the_contract_standins_are_served_and_evaluate(gateway, model):
    listed = {m["name"]: m for m in gateway.get("/v1/models", params={"active": "true"}).json()}
    assert model in listed
    evaluation_id = submit(gateway, benchmark="gsm8k", model=model, sample_limit=4)
    final = wait_done(gateway, evaluation_id, timeout_s=180)
    results = all_results(gateway, evaluation_id)
    assert [r["error"] for r in results if r["error"]] == []
    assert final["status"] == "completed" and final["summary"]["errors"] == 0 and len(results) == 4
    assert all(r["output"] for r in results)  # every item got an answer through the contract's tensors
