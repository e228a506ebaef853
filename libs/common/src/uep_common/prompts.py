"""Prompt rendering: a benchmark's Jinja2 template over a sample's input fields (used by the inference
service, and by the gateway to check an uploaded benchmark's template against every row).

Templates run in Jinja2's ``SandboxedEnvironment`` (benchmark authors are users, not operators) with
``StrictUndefined``, so a template naming a field the sample lacks fails loudly instead of rendering "".
"""

from __future__ import annotations

from functools import lru_cache

from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

_ENV = SandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False)


class PromptRenderError(ValueError):
    """The template is invalid or refers to a missing field (message names it)."""


@lru_cache(maxsize=256)
def _compile(template: str):
    return _ENV.from_string(template)


def render_prompt(template: str, fields: dict, fewshot: list[dict] | tuple = ()) -> str:
    """Render ``template`` with the sample's ``fields`` and ``fewshot`` demonstrations (each
    ``{"input": …, "reference": …}``; the template sees them as ``fewshot``, empty by default).

    Raises:
        PromptRenderError: syntax error or undefined variable in the template.
    """
    try:
        return _compile(template).render(**fields, fewshot=list(fewshot))
    except TemplateError as exc:
        raise PromptRenderError(f"prompt template error: {exc}") from exc
