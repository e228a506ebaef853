"""Per-item exports in other tools' shapes (uep_gateway.exports), against hand-written expected lines.

lm-eval: a logged sample of ``lm_eval.evaluator.evaluate`` (doc_id, doc, target, arguments, resps,
filtered_resps, filter, metrics, the three SHA-256 hashes, then each metric by name); hashes are
``hashlib.sha256(text.encode()).hexdigest()`` of the texts lm-eval hashes (``lm_eval.utils.hash_string``).
Inspect: ``inspect_ai.log.EvalSample`` / ``EvalLog`` field names and the ``EvalStatus`` values."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

import pytest

from uep_common.contract.events import LoglikSpec, PromptSpec
from uep_gateway.exports import ItemRecord, RunRecord, inspect_header, inspect_sample, lm_eval_sample


def _h(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


GEN = ItemRecord(
    ordinal=3,
    external_id="q4",
    input={"question": "1+1?"},
    reference={"answer": "2"},
    prompt="Q: 1+1?\nA:",
    output=" The answer is 2",
    extracted="2",
    score=1.0,
    metric_name="gsm8k_numeric",
    metrics={"gsm8k_numeric": 1.0, "decided_by": "automatic"},
    latency_ms=250.0,
    prompt_tokens=7,
    completion_tokens=5,
)
GEN_PROMPT = PromptSpec(template="Q: {{question}}\nA:", stop=["\n\n"])


@pytest.mark.unit
def test_lm_eval_line_of_a_generated_item() -> None:
    doc = {"question": "1+1?"}
    assert lm_eval_sample(GEN, GEN_PROMPT, 64) == {
        "doc_id": 3,
        "doc": doc,
        "target": "2",
        "arguments": [["Q: 1+1?\nA:", {"until": ["\n\n"], "max_gen_toks": 64}]],
        "resps": [[" The answer is 2"]],
        "filtered_resps": ["2"],
        "filter": "none",
        "metrics": ["gsm8k_numeric"],
        "doc_hash": _h('{\n  "question": "1+1?"\n}'),
        "prompt_hash": _h("Q: 1+1?\nA:"),
        "target_hash": _h("2"),
        "gsm8k_numeric": 1.0,
    }


@pytest.mark.unit
def test_lm_eval_line_of_a_choice_item_uses_the_imported_doc() -> None:
    item = ItemRecord(
        ordinal=0,
        external_id=None,
        input={"text": "Sky?", "choices": ["blue", "green"]},
        reference={"gold": 0, "choices": ["blue", "green"]},
        prompt="Sky?",
        output=json.dumps({"logprobs": [-0.5, -2.0], "n_tokens": [1, 1], "is_greedy": [True, False]}),
        extracted="0",
        metric_name="loglik_multiple_choice",
        metrics={"loglik_multiple_choice": 1.0, "acc": 1, "acc_norm": 1},
        meta={"lm_eval_doc": {"q": "Sky?", "a": "A"}},
    )
    prompt = PromptSpec(template="{{ text }}", loglik=LoglikSpec(choices_field="choices", target_delimiter=" "))
    line = lm_eval_sample(item, prompt, None)
    assert line["doc"] == {"q": "Sky?", "a": "A"}
    assert line["target"] == 0
    assert line["arguments"] == [["Sky?", " blue"], ["Sky?", " green"]]
    assert line["resps"] == [[[-0.5, True]], [[-2.0, False]]]
    assert line["filtered_resps"] == [[-0.5, True], [-2.0, False]]
    assert (line["acc"], line["acc_norm"], line["metrics"]) == (1.0, 1.0, ["loglik_multiple_choice", "acc", "acc_norm"])


@pytest.mark.unit
def test_lm_eval_line_of_a_failed_item_has_its_error_and_no_metric() -> None:
    item = ItemRecord(
        ordinal=1,
        external_id=None,
        input={"question": "?"},
        reference={"answer": "x"},
        prompt="Q: ?\nA:",
        error={"stage": "inference", "type": "timeout", "message": "after 3 attempts"},
    )
    line = lm_eval_sample(item, GEN_PROMPT, None)
    assert line["metrics"] == [] and line["resps"] == [[""]] and line["error"]["type"] == "timeout"
    assert line["arguments"] == [["Q: ?\nA:", {"until": ["\n\n"]}]]


@pytest.mark.unit
def test_inspect_sample_of_a_generated_item() -> None:
    usage = {"input_tokens": 7, "output_tokens": 5, "total_tokens": 12}
    assistant = {"role": "assistant", "content": " The answer is 2", "source": "generate"}
    assert inspect_sample(GEN, GEN_PROMPT, "smollm2@1") == {
        "id": "q4",
        "epoch": 1,
        "input": "Q: 1+1?\nA:",
        "choices": None,
        "target": "2",
        "messages": [{"role": "user", "content": "Q: 1+1?\nA:", "source": "input"}, assistant],
        "output": {
            "model": "smollm2@1",
            "choices": [{"message": assistant, "stop_reason": "stop"}],
            "usage": usage,
            "time": 0.25,
        },
        "scores": {"gsm8k_numeric": {"value": 1.0, "answer": "2", "explanation": None, "metadata": None}},
        "metadata": {"input": {"question": "1+1?"}, "reference": {"answer": "2"}, "arm": "main", "sample_ordinal": 3},
        "store": {},
        "events": [],
        "model_usage": {"smollm2@1": usage},
        "total_time": 0.25,
        "attachments": {},
    }


@pytest.mark.unit
def test_inspect_header_of_a_cancelled_run() -> None:
    created = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    run = RunRecord(
        evaluation_id="e1",
        status="cancelled",
        created=created,
        started=None,
        completed=None,
        task="gsm8k",
        task_id="b1",
        task_version="v1",
        dataset_samples=20,
        model="smollm2@1",
        repeats=1,
        sample_limit=10,
        arm="main",
        error=None,
        metric="gsm8k_numeric",
        total_samples=4,
        completed_samples=3,
        metric_means={"gsm8k_numeric": 0.5},
        input_tokens=40,
        output_tokens=12,
    )
    log = inspect_header(run, GEN_PROMPT, 64)
    assert list(log) == ["version", "status", "eval", "plan", "results", "stats"]
    assert (log["version"], log["status"]) == (2, "cancelled")
    assert log["eval"]["created"] == "2026-01-02T03:04:05+00:00"
    assert log["eval"]["dataset"] == {"name": "gsm8k", "samples": 20}
    assert log["results"] == {
        "total_samples": 4,
        "completed_samples": 3,
        "scores": [
            {
                "name": "gsm8k_numeric",
                "scorer": "gsm8k_numeric",
                "params": {},
                "metrics": {"gsm8k_numeric": {"name": "gsm8k_numeric", "value": 0.5, "params": {}}},
            }
        ],
    }
    assert log["stats"] == {
        "started_at": "2026-01-02T03:04:05+00:00",
        "completed_at": "",
        "model_usage": {"smollm2@1": {"input_tokens": 40, "output_tokens": 12, "total_tokens": 52}},
    }
    assert log["plan"]["config"] == {"max_tokens": 64, "stop_seqs": ["\n\n"]}
