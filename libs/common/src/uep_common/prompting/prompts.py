"""Prompt rendering: a benchmark's (or an A/B arm's) Jinja2 template over a sample's input fields (used by
the inference service, and by the gateway to check an uploaded benchmark's template against every row).

Templates run in the bounded sandbox of :mod:`uep_common.prompting.templating` (benchmark authors are users, not
operators) with ``StrictUndefined``, so a template naming a field the sample lacks fails loudly instead of
rendering "", and a template that tries to escape the sandbox or exceeds a work or size limit fails with
a message saying which.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from jinja2 import Template, TemplateError

from uep_common.prompting.templating import make_environment, render

_ENV = make_environment()


class PromptRenderError(ValueError):
    """The template is invalid, refers to a missing field, or exceeds a sandbox limit (message names it)."""


@lru_cache(maxsize=256)
def _compile(template: str) -> Template:
    return _ENV.from_string(template)


def check_prompt_template(template: str) -> None:
    """Check that ``template`` parses in the sandbox (syntax and source length; rendering needs a sample).

    Raises:
        PromptRenderError: syntax error or source over the length limit.
    """
    try:
        _compile(template)
    except TemplateError as exc:
        raise PromptRenderError(f"prompt template error: {exc}") from exc


def render_prompt(template: str, fields: dict[str, Any], fewshot: list[dict[str, Any]] | tuple[Any, ...] = ()) -> str:
    """Render ``template`` with the sample's ``fields`` and ``fewshot`` demonstrations (each
    ``{"input": …, "reference": …}``; the template sees them as ``fewshot``, empty by default).

    Raises:
        PromptRenderError: syntax error, undefined variable, sandbox violation, or a work/size limit
            exceeded (see :class:`uep_common.prompting.templating.TemplateLimits`).
    """
    try:
        return render(_compile(template), {**fields, "fewshot": list(fewshot)})
    except TemplateError as exc:
        raise PromptRenderError(f"prompt template error: {exc}") from exc
