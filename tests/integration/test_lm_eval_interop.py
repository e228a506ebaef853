"""lm-evaluation-harness interop through the whole stack: a GSM8K task YAML (lm-eval's own keys, the unit tests' task) imported
over uploaded documents runs on the oracle, and its results export as lm-eval samples and an Inspect log.

Expected values: the oracle answers GSM8K items ``Let me compute.\\n#### <answer>``, wrongly (answer + 1) for
dataset ordinals with ``ordinal % 3 == 2`` (``uep_model_server.oracle``): of the first three items, two are
right; the prompt is the task's ``doc_to_text`` rendered over the document."""

import hashlib
import json
import uuid

from unit.test_lm_eval_import import GSM_TASK

from .helpers import all_results, submit, tenant_headers, wait_done

TASK = GSM_TASK + "dataset_path: gsm8k\ndataset_name: main\ntest_split: test\n"


def _docs() -> list[dict[str, str]]:
    from uep_common.builtin import catalog

    bench = next(b for b in catalog.BENCHMARKS if b.slug == "gsm8k")
    return [{"question": s.input["question"], "answer": s.reference["solution"]} for s in bench.loader()[:3]]


def test_an_lm_eval_task_imports_runs_and_exports(gateway, stack):
    docs = _docs()
    data = "".join(json.dumps(d) + "\n" for d in docs)
    bad = gateway.post(
        "/v1/benchmarks/lm-eval",
        files={"task": ("t.yaml", TASK + "process_docs: !function utils.process_docs\n"), "file": ("d.jsonl", data)},
    )
    assert bad.status_code == 422, bad.text
    assert bad.json()["detail"][0]["loc"] == ["body", "task", "process_docs"], bad.text

    slug = f"gsm8k-import-{uuid.uuid4().hex[:6]}"
    files = {"task": ("t.yaml", TASK), "file": ("d.jsonl", data)}
    r = gateway.post("/v1/benchmarks/lm-eval", data={"slug": slug}, files=files)
    assert r.status_code == 201, r.text
    assert r.json()["slug"] == slug and r.json()["name"] == "gsm_mini" and r.json()["sample_count"] == 3

    evaluation_id = submit(gateway, benchmark=slug, model="uep-oracle")
    final = wait_done(gateway, evaluation_id, timeout_s=120)
    assert final["status"] == "completed" and final["summary"]["errors"] == 0, final
    assert (final["summary"]["correct"], final["summary"]["scored"]) == (2, 3), final["summary"]

    prompts = [f"Question: {d['question']}\nAnswer:" for d in docs]
    results = all_results(gateway, evaluation_id)
    assert [x["prompt"] for x in results] == prompts
    assert [x["input"] for x in results] == [{"text": p} for p in prompts]
    assert [x["reference"] for x in results] == [{"answer": d["answer"].split("####")[-1].strip()} for d in docs]

    r = gateway.get(f"/v1/evaluations/{evaluation_id}/export", params={"format": "lm-eval"})
    assert r.status_code == 200, r.text
    assert r.headers["content-disposition"] == f'attachment; filename="samples_{slug}.jsonl"'
    lines = [json.loads(x) for x in r.text.splitlines()]
    assert [x["doc"] for x in lines] == docs
    assert [x["doc_id"] for x in lines] == [0, 1, 2]
    assert [x["prompt_hash"] for x in lines] == [hashlib.sha256(p.encode()).hexdigest() for p in prompts]
    assert [x["arguments"] for x in lines] == [[[p, {"until": ["Question:"], "max_gen_toks": 64}]] for p in prompts]
    targets = [d["answer"].split("####")[-1].strip() for d in docs]
    assert [x["target"] for x in lines] == targets
    assert [x["filtered_resps"] for x in lines] == [[targets[0]], [targets[1]], [str(int(targets[2]) + 1)]]
    assert [x["regex_match"] for x in lines] == [1.0, 1.0, 0.0]

    r = gateway.get(f"/v1/evaluations/{evaluation_id}/export", params={"format": "inspect"})
    assert r.status_code == 200, r.text
    log = r.json()
    assert (log["version"], log["status"], log["eval"]["task"]) == (2, "success", slug)
    assert log["results"]["completed_samples"] == 3
    assert log["results"]["scores"][0]["metrics"]["regex_match"]["value"] == 2 / 3
    assert [s["input"] for s in log["samples"]] == prompts
    assert [s["scores"]["regex_match"]["value"] for s in log["samples"]] == [1.0, 1.0, 0.0]

    assert gateway.get(f"/v1/evaluations/{evaluation_id}/export", params={"format": "csv"}).status_code == 422
    other = tenant_headers(stack, f"lmx-{uuid.uuid4().hex[:6]}", "viewer")
    r = gateway.get(f"/v1/evaluations/{evaluation_id}/export", params={"format": "inspect"}, headers=other)
    assert r.status_code == 404, r.text
