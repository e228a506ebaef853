"""The oracle as an LLM classifier: its answers to the ``mmlu-topic`` prompts (in-process, no server).

Right values: the rule of deploy/model-server/src/uep_model_server/oracle.py (module docstring, "MMLU topic"):
an item's category iff its ``mmlu-topic`` ordinal % 3 != 2, else the next class of ``MMLU_TOPIC_CLASSES``; the
prompt is the benchmark's own template (``uep_common.builtin.catalog.MMLU_TOPIC_TEMPLATE``) rendered as the
scheduler renders it (``uep_common.prompting.prompts.render_prompt``), and the scorer's ``find_label`` reads the answer
back as that class.
"""

from __future__ import annotations

import pytest

from uep_common.builtin.catalog import MMLU_TOPIC_TEMPLATE
from uep_common.builtin.datasets import load_mmlu
from uep_common.builtin.labelled import MMLU_TOPIC_CLASSES, load_mmlu_topic
from uep_common.prompting.prompts import render_prompt


@pytest.fixture(scope="module")
def oracle():
    from uep_model_server.oracle import Oracle

    return Oracle()


def _expected(item) -> str:
    gold = MMLU_TOPIC_CLASSES.index(item.reference["label"])
    return MMLU_TOPIC_CLASSES[gold if item.ordinal % 3 != 2 else (gold + 1) % 4]


def test_every_hold_out_question_is_answered_with_the_rule_s_class(oracle):
    from uep_scorer.metrics.classification import find_label

    items = load_mmlu_topic("test")
    answers = [oracle.answer(render_prompt(MMLU_TOPIC_TEMPLATE, it.input)) for it in items]
    assert answers == [_expected(it) for it in items]
    assert [find_label(a, MMLU_TOPIC_CLASSES) for a in answers[:8]] == [(a, "exact") for a in answers[:8]]
    right = sum(a == it.reference["label"] for a, it in zip(answers, items, strict=True))
    assert right == sum(it.ordinal % 3 != 2 for it in items) == 938  # ceil(2 * 1406 / 3)


def test_the_same_question_without_the_category_cue_is_still_an_mmlu_question(oracle):
    """An MMLU prompt of a known item that is also in the topic hold-out keeps its letter answer."""
    mmlu = load_mmlu()[:200]
    topic_ids = {it.external_id for it in load_mmlu_topic("test")}
    item = next(it for it in mmlu if it.external_id in topic_ids)
    prompt = "\n".join([item.input["question"], *(f"{x}. {c}" for x, c in zip("ABCD", item.input["choices"], strict=True))])
    assert oracle.answer(prompt + "\nAnswer:").startswith("The answer is (")
    assert oracle.answer("Category:") == "I do not know."
