"""Prompt rendering in the inference service (Jinja2 sandbox, strict undefined)."""

import pytest

from uep_common.builtin.catalog import BENCHMARKS
from uep_common.prompting.prompts import PromptRenderError, render_prompt


def test_mmlu_template_renders_letters_and_subject():
    mmlu = next(b for b in BENCHMARKS if b.slug == "mmlu")
    text = render_prompt(
        mmlu.config["prompt"]["template"],
        {"question": "2+2?", "choices": ["1", "2", "3", "4"], "subject": "elementary_mathematics"},
    )
    assert text == (
        "The following is a multiple choice question about elementary mathematics. Reply with the letter of the "
        "correct option.\n\n2+2?\nA. 1\nB. 2\nC. 3\nD. 4\nAnswer:"
    )


def test_missing_field_is_an_error_naming_it():
    with pytest.raises(PromptRenderError, match="question"):
        render_prompt("Q: {{ question }}", {"prompt": "x"})


def test_sandbox_blocks_attribute_escape():
    with pytest.raises(PromptRenderError):
        render_prompt("{{ ''.__class__.__mro__[1].__subclasses__() }}", {})


def test_mmlu_few_shot_demonstrations_come_first_in_lm_eval_format():
    mmlu = next(b for b in BENCHMARKS if b.slug == "mmlu")
    demo = {"input": {"question": "1+1?", "choices": ["2", "3", "4", "5"]}, "reference": {"answer": "A"}}
    text = render_prompt(
        mmlu.config["prompt"]["template"],
        {"question": "2+2?", "choices": ["1", "2", "3", "4"], "subject": "elementary_mathematics"},
        [demo],
    )
    assert text.endswith("1+1?\nA. 2\nB. 3\nC. 4\nD. 5\nAnswer: A\n\n2+2?\nA. 1\nB. 2\nC. 3\nD. 4\nAnswer:")


def test_gsm8k_few_shot_uses_worked_solutions():
    gsm8k = next(b for b in BENCHMARKS if b.slug == "gsm8k")
    demo = {"input": {"question": "One plus one?"}, "reference": {"answer": "2", "solution": "1 + 1 = 2\n#### 2"}}
    text = render_prompt(gsm8k.config["prompt"]["template"], {"question": "Two plus two?"}, [demo])
    assert text.endswith("Question: One plus one?\nAnswer: 1 + 1 = 2\n#### 2\n\nQuestion: Two plus two?\nAnswer:")
