"""Judge prompt templates: versioned Jinja files (``templates/<name>/<version>.jinja``) or a benchmark's own
template text (versioned by its content hash). Both are compiled by the bounded sandbox of
:mod:`uep_common.prompting.templating` (a benchmark's or an evaluation's template is user input) with
StrictUndefined, so a missing variable fails loudly instead of sending the judge a half-empty prompt."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from uep_common.contract.judge_config import TEMPLATE_FILTERS, JudgeConfig, format_number
from uep_common.prompting.templating import make_environment, render

TEMPLATE_DIR = Path(__file__).parent / "templates"
RETRY_TEMPLATE = "retry/v1"


_env = make_environment(loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)), filters=TEMPLATE_FILTERS, keep_trailing_newline=False)


class TemplateError(ValueError):
    """A judge template is missing or does not render (the message names it and why)."""


@dataclass(frozen=True)
class JudgeTemplate:
    """A loaded template: ``name`` (e.g. 'rubric'), ``version`` ('v1' or 'custom-<sha256[:12]>')."""

    name: str
    version: str
    template: jinja2.Template

    def render(self, **variables: Any) -> str:
        """Render with ``variables``. Raises :class:`TemplateError`."""
        try:
            return render(self.template, variables).strip() + "\n"
        except jinja2.TemplateError as exc:
            raise TemplateError(f"judge template {self.name}/{self.version} does not render: {exc}") from exc


def load_template(ref: str) -> JudgeTemplate:
    """The file template ``<name>/<version>`` (e.g. ``rubric/v1``). Raises :class:`TemplateError`."""
    name, _, version = ref.partition("/")
    try:
        return JudgeTemplate(name, version, _env.get_template(f"{name}/{version}.jinja"))
    except jinja2.TemplateNotFound:
        raise TemplateError(f"no judge template {ref!r} (files under {TEMPLATE_DIR})") from None
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"judge template {ref!r} has a syntax error: {exc}") from exc


def template_for(cfg: JudgeConfig) -> JudgeTemplate:
    """The template a judge configuration uses: its ``template_text`` (name = the mode, version =
    ``custom-`` + the first 12 hex digits of the text's SHA-256) or the file ``cfg.template_name``."""
    if cfg.template_text is not None:
        version = "custom-" + hashlib.sha256(cfg.template_text.encode()).hexdigest()[:12]
        try:
            return JudgeTemplate(cfg.mode, version, _env.from_string(cfg.template_text))
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"the benchmark's judge template has a syntax error: {exc}") from exc
    return load_template(cfg.template_name)


def _kind(integer: bool) -> str:
    return "integer" if integer else "number"


def rubric_schema(cfg: JudgeConfig) -> str:
    """The answer form shown to the judge in rubric and reference modes: the JSON object, or with
    ``cfg.score_label`` the labelled lines (``accuracy: <integer 1-5>`` ... ``Rating: <integer 1-5>``)."""
    if cfg.score_label is not None:
        lines = [f"{d.name}: <{_kind(d.integer)} {format_number(d.min)}-{format_number(d.max)}>" for d in cfg.dimensions]
        lines.append(
            f"{cfg.score_label}: <{_kind(cfg.overall_integer)} {format_number(cfg.overall_min)}-{format_number(cfg.overall_max)}>"
        )
        return "<one or two sentences of reasoning>\n" + "\n".join(lines)
    scores = ", ".join(f'"{d.name}": <{_kind(d.integer)} {format_number(d.min)}-{format_number(d.max)}>' for d in cfg.dimensions)
    return (
        '{"scores": {'
        + scores
        + f'}}, "overall": <{_kind(cfg.overall_integer)} '
        + f"{format_number(cfg.overall_min)}-{format_number(cfg.overall_max)}"
        + '>, "reasoning": "<one or two sentences>"}'
    )


PAIRWISE_SCHEMA = '{"winner": "A" | "B" | "tie", "reasoning": "<one or two sentences>"}'


def rubric_variables(cfg: JudgeConfig, question: str, answer: str, reference: str | None) -> dict[str, Any]:
    """Variables of the rubric/reference templates."""
    return {
        "question": question,
        "answer": answer,
        "reference": reference,
        "dimensions": [d.model_dump() for d in cfg.dimensions],
        "overall_min": cfg.overall_min,
        "overall_max": cfg.overall_max,
        "schema": rubric_schema(cfg),
    }


def pairwise_variables(question: str, answer_a: str, answer_b: str, reference: str | None) -> dict[str, Any]:
    """Variables of the pairwise template."""
    return {"question": question, "answer_a": answer_a, "answer_b": answer_b, "reference": reference, "schema": PAIRWISE_SCHEMA}


def retry_prompt(original: str, error: str, previous: str) -> str:
    """The re-ask prompt after an invalid answer: the original prompt, the parse error, the previous reply."""
    return load_template(RETRY_TEMPLATE).render(original=original.rstrip(), error=error, previous=previous[:4000])


def as_text(value: object) -> str:
    """A reference value as prompt text (JSON for non-strings)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
