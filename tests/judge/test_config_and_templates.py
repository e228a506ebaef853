"""Judge configuration (merge of benchmark block and evaluation override, validation) and the versioned
template files."""

import pytest
from pydantic import ValidationError

from uep_common.contract.judge_config import DEFAULT_DIMENSIONS, TEMPLATE_FILES, JudgeConfig, merge_judge_config
from uep_judge.templates import TEMPLATE_DIR, TemplateError, load_template, template_for


def test_defaults_are_the_seed_rubric():
    cfg = JudgeConfig(judges=["uep-judge"])
    assert [d.name for d in cfg.dimensions] == ["accuracy", "relevance", "completeness", "clarity", "safety"]
    assert all((d.min, d.max) == (0, 10) for d in DEFAULT_DIMENSIONS)
    assert (cfg.mode, cfg.aggregate, cfg.max_retries, cfg.threshold, cfg.template_name) == ("rubric", "mean", 2, 5.0, "rubric/v1")


def test_override_replaces_benchmark_keys():
    cfg = merge_judge_config(
        {"mode": "rubric", "judges": ["a"], "max_retries": 1}, {"judges": ["a", "b"], "aggregate": "majority"}
    )
    assert (cfg.judges, cfg.aggregate, cfg.max_retries) == (["a", "b"], "majority", 1)


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"judges": []}, "judges"),
        ({"judges": ["a", "a"]}, "judges"),
        ({"judges": ["a"], "mode": "vibes"}, "mode"),
        ({"judges": ["a"], "template": "pairwise/v1"}, None),
        ({"judges": ["a"], "template": "rubric/v9"}, None),
        ({"judges": ["a"], "dimensions": [{"name": "x", "min": 5, "max": 5}]}, "dimensions"),
        ({"judges": ["a"], "max_retries": 9}, "max_retries"),
        ({"judges": ["a"], "pass_threshold": 11}, None),
        ({"judges": ["a"], "surprise": 1}, "surprise"),
    ],
)
def test_invalid_configs_name_the_field(bad, field):
    with pytest.raises(ValidationError) as exc:
        JudgeConfig.model_validate(bad)
    if field:
        assert exc.value.errors()[0]["loc"][0] == field


def test_template_files_match_the_declared_list():
    on_disk = sorted(f"{p.parent.name}/{p.stem}" for p in TEMPLATE_DIR.glob("*/*.jinja") if p.parent.name != "retry")
    assert on_disk == sorted(TEMPLATE_FILES)
    for ref in TEMPLATE_FILES:
        assert load_template(ref).version == "v1"


def test_rubric_template_lists_dimensions_and_schema():
    cfg = JudgeConfig(judges=["j"])
    from uep_judge.templates import rubric_variables

    text = template_for(cfg).render(**rubric_variables(cfg, "Q?", "Ans", None))
    assert "- accuracy [0, 10]: Is the answer" in text and "overall [0, 10]" in text
    assert "[The Start of Assistant's Answer]\nAns\n[The End of Assistant's Answer]" in text
    assert '"overall": <number 0-10>' in text


def test_custom_template_text_is_versioned_by_hash_and_strict():
    cfg = JudgeConfig(judges=["j"], template_text="Grade {{ answer }} for {{ question }}. {{ schema }}")
    t = template_for(cfg)
    assert t.name == "rubric" and t.version.startswith("custom-") and len(t.version) == 19
    with pytest.raises(TemplateError, match="does not render"):
        template_for(JudgeConfig(judges=["j"], template_text="{{ nope }}")).render(answer="a")
