"""The embedded SmolLM2 answers uep's real judge prompts under the answer's JSON schema (llama.cpp grammar from
``uep_judge.schema.answer_schema``): every reply parses with the judge's strict parser and lies on the declared
integer scale, in rubric and pairwise modes. Without the schema, the same model's replies to the same prompts
are counted too, for the figure in the commit (not asserted: a small model's free answers vary by build).

The model runs in-process (xllamacpp), the real weights, nothing mocked; marked ``stack`` like the other SmolLM2
tests (it loads the 98 MB model)."""

from __future__ import annotations

import pytest

from uep_common.contract.judge_config import JudgeConfig
from uep_judge.parsing import JudgeParseError, parse_pairwise, parse_rubric
from uep_judge.schema import answer_schema
from uep_judge.templates import pairwise_variables, rubric_variables, template_for
from uep_model_server.io import GenerationRequest
from uep_model_server.llm import LlmSettings, SmolLM2

pytestmark = pytest.mark.stack

LIKERT = JudgeConfig(
    judges=["smollm2-135m-instruct"],
    dimensions=[
        {"name": "accuracy", "min": 1, "max": 5, "integer": True},
        {"name": "clarity", "min": 1, "max": 5, "integer": True},
    ],
    overall_min=1,
    overall_max=5,
    overall_integer=True,
)
PAIRS = [
    ("What is the capital of France?", "Paris.", "The capital of France is Lyon."),
    ("How many legs does a spider have?", "Eight.", "Spiders have six legs."),
    ("What is 12 times 12?", "144", "124"),
    ("Who wrote Hamlet?", "William Shakespeare.", "Charles Dickens wrote it."),
]


@pytest.fixture(scope="module")
def llm():
    model = SmolLM2(LlmSettings(n_ctx_per_slot=2048))
    try:
        yield model
    finally:
        model.close()


def _ask(llm: SmolLM2, prompt: str, schema: dict | None) -> str:
    return llm.generate_one(GenerationRequest(prompt, max_tokens=256, temperature=0.0, json_schema=schema)).text


def test_rubric_verdicts_under_the_schema_all_parse_on_the_integer_scale(llm):
    tpl = template_for(LIKERT)
    schema = answer_schema(LIKERT)
    free_ok = 0
    for question, good, bad in PAIRS:
        for answer in (good, bad):
            prompt = tpl.render(**rubric_variables(LIKERT, question, answer, None))
            v = parse_rubric(_ask(llm, prompt, schema), LIKERT)  # raises on an unusable reply
            assert v.overall in {1, 2, 3, 4, 5} and set(v.scores) == {"accuracy", "clarity"}
            assert all(s in {1, 2, 3, 4, 5} for s in v.scores.values()) and v.missing == []
            try:
                parse_rubric(_ask(llm, prompt, None), LIKERT)
                free_ok += 1
            except JudgeParseError:
                pass
    print(f"SmolLM2 rubric verdicts usable: 8/8 with the schema, {free_ok}/8 without")


def test_pairwise_verdicts_under_the_schema_all_name_a_winner(llm):
    cfg = JudgeConfig(
        judges=["smollm2-135m-instruct"], mode="pairwise", baseline_evaluation_id="00000000-0000-0000-0000-000000000001"
    )
    tpl = template_for(cfg)
    for question, good, bad in PAIRS:
        for a, b in ((good, bad), (bad, good)):
            reply = _ask(llm, tpl.render(**pairwise_variables(question, a, b, None)), answer_schema(cfg))
            assert parse_pairwise(reply).winner in ("A", "B", "tie")
