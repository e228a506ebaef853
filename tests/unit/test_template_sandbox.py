"""The template sandbox (uep_common.prompting.templating) on every entry point a user's template reaches: benchmark and
arm prompts (``render_prompt``, ``check_prompt_template``), judge templates (the judge service's
``template_for(...).render``) and the gateway's trial render of a judge template. Each known escape must be
refused with a template error and leave the host untouched; each work bomb must stop within its limits."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from jinja2 import TemplateError, TemplateSyntaxError

from uep_common.contract.judge_config import TEMPLATE_FILTERS, JudgeConfig, template_trial_variables
from uep_common.prompting.prompts import PromptRenderError, check_prompt_template, render_prompt
from uep_common.prompting.templating import TemplateLimitError, TemplateLimits, make_environment, render, trial_render
from uep_judge.templates import template_for

MARKER = Path("/tmp") / f"uep-template-escape-{uuid.uuid4().hex}"

ESCAPES = {
    "cycler": '{{ cycler.__init__.__globals__.os.popen("id > MARKER").read() }}',
    "joiner": '{{ joiner.__init__.__globals__.os.popen("id > MARKER").read() }}',
    "namespace": '{{ namespace.__init__.__globals__.os.popen("id > MARKER").read() }}',
    "lipsum": '{{ lipsum.__globals__.os.popen("id > MARKER").read() }}',
    "mro": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "subclasses": "{{ ().__class__.__base__.__subclasses__()[0].__init__.__globals__ }}",
    "template_reference": "{{ self._TemplateReference__context.cycler.__init__.__globals__.os.popen('id > MARKER') }}",
    "getattr_filter": "{{ cycler|attr('__init__')|attr('__globals__') }}",
    "str_format": "{{ '{0.__class__.__mro__}'.format('') }}",
    "huge_range": "{{ range(10**9)|list|length }}",
    "huge_range_loop": "{% for i in range(10**9) %}{% endfor %}",
    "string_multiplication": "{{ 'a' * 100000000 }}",
    "list_multiplication": "{{ ([0] * 100000000)|length }}",
    "nested_loops": "{% for i in range(10000) %}{% for j in range(1000) %}x{% endfor %}{% endfor %}",
    "doubling_concat": "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
    "doubling_plus": "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
    "doubling_join": "{% set ns = namespace(s=['ab']) %}{% for i in range(40) %}{% set ns.s = [ns.s|join, ns.s|join] %}{% endfor %}",
    "list_mutation": "{% set xs = [1] %}{% for i in range(40) %}{% set _ = xs.extend(xs) %}{% endfor %}",
    "integer_power": "{{ 2 ** (10**9) }}",
    "integer_squaring": "{% set ns = namespace(x=3) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}{% endfor %}",
    "percent_width": "{{ '%0999999999d' % 1 }}",
    "format_filter_width": "{{ '%0999999999d'|format(1) }}",
    "center_filter": "{{ 'a'|center(1000000000) }}",
    "center_method": "{{ 'a'.center(1000000000) }}",
    "replace_method": "{{ ('a' * 100000).replace('a', 'a' * 100000) }}",
    "batch_fill": "{{ [1]|batch(1000000000, 'x')|list|length }}",
    "recursive_macro": "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}",
    "int_to_str": "{{ (10 ** 5000)|string }}",
    "long_source": "x" * 70_000,
    # sources nested past the parser's recursion or Python's compiler: a syntax error, not a RecursionError
    "nested_parentheses": "{{ " + "(" * 2000 + "question" + ")" * 2000 + " }}",
    "nested_brackets": "{{ " + "[" * 2000 + "1" + "]" * 2000 + " }}",
    "nested_unary_minus": "{{ " + "-" * 2000 + "1 }}",
    "long_plus_chain": "{{ 1" + "+1" * 250 + " }}",
}


def _prompt(source: str) -> str:
    return render_prompt(source, {"question": "q"})


def _judge(source: str) -> str:
    return template_for(JudgeConfig(judges=["j"], template_text=source[:20_000] if len(source) > 20_000 else source)).render(
        **template_trial_variables(JudgeConfig(judges=["j"]))
    )


_GATEWAY_JUDGE_ENV = make_environment(filters=TEMPLATE_FILTERS, keep_trailing_newline=False)


def _gateway_judge_check(source: str) -> None:
    trial_render(_GATEWAY_JUDGE_ENV, source, template_trial_variables(JudgeConfig(judges=["j"])))


ENTRY_POINTS = {
    "prompt": (_prompt, PromptRenderError),
    "judge": (_judge, Exception),
    "gateway_judge": (_gateway_judge_check, TemplateError),
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_escape_refused_and_host_untouched(entry: str, name: str) -> None:
    if entry == "judge" and name == "long_source":
        pytest.skip("JudgeConfig refuses template_text over 20,000 characters before any template is compiled")
    fn, error = ENTRY_POINTS[entry]
    source = ESCAPES[name].replace("MARKER", str(MARKER))
    started = time.monotonic()
    with pytest.raises(error) as info:
        fn(source)
    elapsed = time.monotonic() - started
    if entry == "judge":  # the judge service wraps jinja2 errors in its own TemplateError
        from uep_judge.templates import TemplateError as JudgeTemplateError

        assert isinstance(info.value, JudgeTemplateError)
    assert elapsed < 3.0, f"{name} took {elapsed:.1f} s on {entry}"
    assert not MARKER.exists()


def test_limits_name_what_was_exceeded() -> None:
    with pytest.raises(PromptRenderError, match="more than 262144"):
        _prompt("{{ 'a' * 100000000 }}")
    with pytest.raises(PromptRenderError, match="range\\(\\) of more than 100000 items"):
        _prompt("{{ range(10**9) }}")
    with pytest.raises(PromptRenderError, match="more than 200000 steps"):
        _prompt("{% for i in range(10000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}")
    with pytest.raises(PromptRenderError, match="access to attribute '__init__'"):
        _prompt("{{ cycler.__init__ }}")
    with pytest.raises(PromptRenderError, match="longer than 65536|more than 65536"):
        check_prompt_template("y" * 70_000)


@pytest.mark.parametrize("depth", [100, 2000])
def test_deep_nesting_is_a_syntax_error_naming_it(depth: int) -> None:
    source = "{{ " + "(" * depth + "question" + ")" * depth + " }}"
    with pytest.raises(PromptRenderError, match="nested too deeply to compile") as info:
        check_prompt_template(source)
    assert isinstance(info.value.__cause__, TemplateSyntaxError)
    with pytest.raises(TemplateSyntaxError, match="nested too deeply to compile"):
        _gateway_judge_check(source)
    # the same environment compiles an ordinary template afterwards
    assert _prompt("{{ (((question))) }}") == "q"


def test_output_cap_and_time_budget() -> None:
    env = make_environment(TemplateLimits(max_output_chars=1000, max_seconds=0.2, max_steps=10**9))
    # 2,000 characters of output from a 10-character chunk repeated: stopped at the output cap
    with pytest.raises(TemplateLimitError, match="longer than 1000 characters"):
        render(env.from_string("{% for i in range(200) %}0123456789{% endfor %}"), {})
    # a slow loop with no output: stopped by the wall-clock budget, within a little more than 0.2 s
    started = time.monotonic()
    with pytest.raises(TemplateLimitError, match="longer than 0.2 s"):
        render(env.from_string("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"), {})
    assert time.monotonic() - started < 1.5


def test_ordinary_templates_render_as_before() -> None:
    # the built-in MMLU format: filters, nested loops over data, loop variables, item access
    source = (
        "About {{ subject | replace('_', ' ') }}:\n{% for ex in fewshot %}{{ ex.input.q }} -> {{ ex.reference.answer }}\n"
        "{% endfor %}{{ question }}\n{% for c in choices %}{{ 'ABCD'[loop.index0] }}. {{ c }}\n{% endfor %}Answer:"
    )
    out = render_prompt(
        source,
        {"subject": "high_school_physics", "question": "Q?", "choices": ["x", "y"]},
        [{"input": {"q": "1+1"}, "reference": {"answer": "2"}}],
    )
    assert out == "About high school physics:\n1+1 -> 2\nQ?\nA. x\nB. y\nAnswer:"
    # a large but allowed output, and allowed arithmetic
    assert len(render_prompt("{{ 'a' * 100000 }}", {})) == 100_000
    assert render_prompt("{{ 2 ** 64 }} {{ '%05d' % 42 }} {{ [1, 2] * 2 }}", {}) == "18446744073709551616 00042 [1, 2, 1, 2]"


def test_judge_file_templates_still_render() -> None:
    cfg = JudgeConfig(judges=["j"])
    out = template_for(cfg).render(**template_trial_variables(cfg))
    assert "Q" in out and out.endswith("\n")
