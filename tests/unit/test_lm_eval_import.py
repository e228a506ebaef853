"""The lm-evaluation-harness task import (uep_gateway.lm_eval_tasks): supported keys become our benchmark,
unsupported ones are problems naming the key, and each document renders to the context lm-eval builds.

Expected contexts are written by hand from lm-eval's rule (``ConfigurableTask.fewshot_context``): description,
then each demonstration as doc_to_text + target_delimiter + its target + fewshot_delimiter, then the
document's doc_to_text; a multiple-choice continuation is target_delimiter + the choice."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from uep_common.prompting.prompts import render_prompt
from uep_gateway.lm_eval_docs import check_lm_eval_upload
from uep_gateway.lm_eval_tasks import parse_task
from uep_gateway.uploads import UploadInvalid, UploadLimits

ARC_TASK = """
task: arc_mini
dataset_path: allenai/ai2_arc
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{question}}\\nAnswer:"
doc_to_target: "{{choices.label.index(answerKey)}}"
doc_to_choice: "{{choices.text}}"
num_fewshot: 1
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
metadata:
  version: 1.0
"""

GSM_TASK = """
task: gsm_mini
doc_to_text: "Question: {{question}}\\nAnswer:"
doc_to_target: "{{answer.split('####')[-1].strip()}}"
target_delimiter: " "
fewshot_delimiter: "\\n\\n"
generation_kwargs:
  until: ["Question:"]
  do_sample: false
  max_gen_toks: 64
filter_list:
  - name: strict-match
    filter:
      - function: regex
        regex_pattern: "#### (\\\\-?[0-9\\\\.\\\\,]+)"
      - function: take_first
metric_list:
  - metric: exact_match
    ignore_case: true
"""

ARC_DOCS = [
    {"question": "What is 2+2?", "choices": {"text": ["3", "4"], "label": ["A", "B"]}, "answerKey": "B"},
    {"question": "Sky colour?", "choices": {"text": ["blue", "green"], "label": ["A", "B"]}, "answerKey": "A"},
]
GSM_DOCS = [
    {"question": "1+1?", "answer": "One and one. #### 2"},
    {"question": "2*3?", "answer": "Twice three. #### 6"},
]


def _jsonl(docs: Sequence[object]) -> bytes:
    return "".join(json.dumps(d) + "\n" for d in docs).encode()


@pytest.mark.unit
def test_multiple_choice_task_renders_lm_eval_contexts_and_golds() -> None:
    task = parse_task(ARC_TASK)
    spec = task.spec("arc-mini", None)
    assert spec["metric"] == {"name": "loglik_multiple_choice", "params": {}}
    assert spec["prompt"]["loglik"] == {"choices_field": "choices", "target_delimiter": " "}
    assert spec["prompt"]["fewshot_k"] == 1
    rows, version = check_lm_eval_upload(_jsonl(ARC_DOCS), "jsonl", task, UploadLimits(), {"metric": spec["metric"]}, {})
    assert version is not None
    assert [r.reference for r in rows] == [{"gold": 1, "choices": ["3", "4"]}, {"gold": 0, "choices": ["blue", "green"]}]
    assert rows[1].input == {"text": "Question: Sky colour?\nAnswer:", "choices": ["blue", "green"]}
    assert rows[1].meta == {"lm_eval_doc": ARC_DOCS[1]}
    demo = [{"input": rows[0].input, "reference": rows[0].reference}]
    context = render_prompt(task.template(), rows[1].input, demo)
    assert context == "Question: What is 2+2?\nAnswer: 4\n\nQuestion: Sky colour?\nAnswer:"


@pytest.mark.unit
def test_generation_task_with_regex_filter_becomes_regex_match() -> None:
    task = parse_task(GSM_TASK)
    spec = task.spec("gsm-mini", "GSM mini")
    assert spec["metric"] == {
        "name": "regex_match",
        "params": {"pattern": "#### (\\-?[0-9\\.\\,]+)", "ignore_whitespace": True, "ignore_case": True},
    }
    assert spec["prompt"]["stop"] == ["Question:"] and spec["prompt"]["max_tokens"] == 64
    rows, _ = check_lm_eval_upload(_jsonl(GSM_DOCS), "jsonl", task, UploadLimits(), {"metric": spec["metric"]}, {})
    assert [r.reference for r in rows] == [{"answer": "2"}, {"answer": "6"}]
    demo = [{"input": rows[0].input, "reference": rows[0].reference}]
    assert render_prompt(task.template(), rows[1].input, demo) == "Question: 1+1?\nAnswer: 2\n\nQuestion: 2*3?\nAnswer:"
    assert render_prompt(task.template(), rows[0].input) == "Question: 1+1?\nAnswer:"


@pytest.mark.unit
def test_unsupported_keys_are_named() -> None:
    text = GSM_TASK + "process_results: !function utils.process_results\nfewshot_config:\n  sampler: first_n\n"
    with pytest.raises(UploadInvalid) as err:
        parse_task(text)
    locs = [p.loc for p in err.value.problems]
    assert ["body", "task", "process_results"] in locs
    assert ["body", "task", "fewshot_config"] in locs
    assert {p.type for p in err.value.problems} == {"unsupported_key"}


@pytest.mark.unit
@pytest.mark.parametrize(
    ("extra", "loc"),
    [
        ("doc_to_text: !function utils.doc_to_text\n", ["body", "task", "doc_to_text"]),
        ("output_type: loglikelihood_rolling\n", ["body", "task", "output_type"]),
    ],
)
def test_python_functions_and_other_output_types_are_refused(extra: str, loc: list[str]) -> None:
    base = "\n".join(line for line in GSM_TASK.splitlines() if not line.startswith("doc_to_text"))
    with pytest.raises(UploadInvalid) as err:
        parse_task(base + "\n" + extra)
    assert loc in [p.loc for p in err.value.problems]


@pytest.mark.unit
def test_unsupported_metric_and_filter_are_named() -> None:
    text = GSM_TASK.replace("metric: exact_match", "metric: bleu").replace("function: take_first", "function: majority_vote")
    with pytest.raises(UploadInvalid) as err:
        parse_task(text)
    locs = [p.loc for p in err.value.problems]
    assert ["body", "task", "metric_list[0]", "metric"] in locs
    assert ["body", "task", "filter_list[0]", "filter[1]", "function"] in locs


@pytest.mark.unit
def test_a_document_the_rules_do_not_fit_names_its_line() -> None:
    task = parse_task(ARC_TASK)
    bad = [ARC_DOCS[0], {"question": "No choices", "answerKey": "A"}]
    with pytest.raises(UploadInvalid) as err:
        check_lm_eval_upload(_jsonl(bad), "jsonl", task, UploadLimits(), {}, {})
    assert err.value.problems[0].loc == ["body", "file", "line 2"]


@pytest.mark.unit
def test_template_escape_attempts_stay_in_the_sandbox() -> None:
    text = ARC_TASK.replace('"Question: {{question}}\\nAnswer:"', '"{{ question.__class__.__mro__ }}"')
    task = parse_task(text)
    with pytest.raises(UploadInvalid) as err:
        check_lm_eval_upload(_jsonl(ARC_DOCS), "jsonl", task, UploadLimits(), {}, {})
    assert err.value.problems[0].type == "bad_document"
