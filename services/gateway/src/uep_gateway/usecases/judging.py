"""Judge configurations: check what a schema cannot (registered judge models, a template that renders in the
sandbox, a pairwise baseline on the same benchmark) for a benchmark upload and an evaluation's override.

Raises :class:`uep_gateway.errors.DomainError` of kind ``invalid`` naming each field.
"""

from __future__ import annotations

import uuid
from typing import Any

from jinja2 import TemplateError
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.contract.configs import EvaluationType, parse_benchmark_config
from uep_common.contract.judge_config import TEMPLATE_FILTERS, JudgeConfig, merge_judge_config, template_trial_variables
from uep_common.prompting.templating import make_environment, trial_render
from uep_common.tables.models import Benchmark, Evaluation, Model
from uep_gateway.errors import DomainError, FieldError
from uep_gateway.tenancy import tenant_filter

JUDGED_TYPES = (EvaluationType.llm_judge, EvaluationType.hybrid)


_TEMPLATES = make_environment(filters=TEMPLATE_FILTERS, keep_trailing_newline=False)


def _config_errors(exc: ValidationError, loc: tuple[Any, ...]) -> DomainError:
    return DomainError(
        "invalid", [{"loc": [*loc, *map(str, e["loc"])], "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
    )


async def check_judge_config(
    session: AsyncSession, cfg: JudgeConfig, loc: tuple[Any, ...], benchmark_id: uuid.UUID | None = None
) -> None:
    """Check what a schema cannot: the judge models are registered, a custom template compiles and renders
    in the template sandbox with placeholder variables (syntax, sandbox violations, work and size limits),
    and the pairwise baseline evaluation exists on the same benchmark. Raises ``invalid`` naming the field under
    ``loc``."""
    problems = []
    for i, name in enumerate(cfg.judges):
        if await session.scalar(select(Model.id).where(Model.name == name).limit(1)) is None:
            problems.append({"loc": [*loc, "judges", i], "msg": f"unknown judge model {name!r}", "type": "unknown_model"})
    if cfg.template_text is not None:
        try:
            trial_render(_TEMPLATES, cfg.template_text, template_trial_variables(cfg))
        except TemplateError as exc:
            problems.append({"loc": [*loc, "template_text"], "msg": f"judge template refused: {exc}", "type": "bad_template"})
    if cfg.mode == "pairwise" and benchmark_id is not None:
        if cfg.baseline_evaluation_id is None:
            problems.append(
                {
                    "loc": [*loc, "baseline_evaluation_id"],
                    "msg": "pairwise judging needs the evaluation whose outputs are answer B",
                    "type": "missing",
                }
            )
        else:
            base = await session.scalar(
                select(Evaluation).where(Evaluation.id == cfg.baseline_evaluation_id, tenant_filter(session, Evaluation))
            )
            if base is None:
                problems.append(
                    {
                        "loc": [*loc, "baseline_evaluation_id"],
                        "msg": f"unknown evaluation {cfg.baseline_evaluation_id}",
                        "type": "unknown_evaluation",
                    }
                )
            elif base.benchmark_id != benchmark_id:
                problems.append(
                    {
                        "loc": [*loc, "baseline_evaluation_id"],
                        "msg": "the baseline evaluation is of another "
                        "benchmark (version); its outputs cannot be paired by sample",
                        "type": "benchmark_mismatch",
                    }
                )
    if problems:
        raise DomainError("invalid", problems)


async def benchmark_judge_config(
    session: AsyncSession, evaluation_type: str, judge: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The validated ``judge`` block of an uploaded benchmark (``spec.judge``), or None for automatic ones.
    Raises ``invalid`` naming ``spec.judge.<field>``."""
    loc = ("body", "spec", "judge")
    if evaluation_type not in JUDGED_TYPES:
        if judge is not None:
            raise FieldError(
                "invalid", loc, f"judge settings need evaluation_type llm_judge or hybrid, not {evaluation_type!r}", "not_judged"
            )
        return None
    if judge is None:
        raise FieldError("invalid", loc, f"an {evaluation_type} benchmark needs a judge configuration", "missing")
    try:
        cfg = JudgeConfig.model_validate(judge)
    except ValidationError as exc:
        raise _config_errors(exc, loc) from None
    await check_judge_config(session, cfg, loc)
    return judge


async def evaluation_judge_config(session: AsyncSession, bench: Benchmark, override: dict[str, Any] | None) -> dict[str, Any]:
    """``{"judge": snapshot}`` for ``evaluations.config`` (the benchmark's judge block with the evaluation's
    ``judge`` override applied, validated), or ``{}`` for automatic benchmarks. Raises ``invalid`` naming
    ``judge.<field>``."""
    loc = ("body", "judge")
    if bench.evaluation_type not in JUDGED_TYPES:
        if override is not None:
            raise FieldError(
                "invalid",
                loc,
                f"benchmark {bench.slug!r} is evaluated {bench.evaluation_type}; judge settings apply "
                "to llm_judge and hybrid benchmarks",
                "not_judged",
            )
        return {}
    try:
        cfg = merge_judge_config(parse_benchmark_config(bench.config).judge_block, override)
    except ValidationError as exc:
        raise _config_errors(exc, loc) from None
    await check_judge_config(session, cfg, loc, bench.id)
    return {"judge": cfg.model_dump(mode="json", exclude_none=True)}
