"""Prompt rendering in the inference service (Jinja2 sandbox, strict undefined)."""

import pytest

from uep_common.builtin.catalog import BENCHMARKS
from uep_common.prompts import PromptRenderError, render_prompt


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
