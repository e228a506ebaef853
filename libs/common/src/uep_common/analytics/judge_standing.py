"""A judge's standing against people and its cost, read by the gateway (judge page, leaderboards) and the
reporter (reports).

- Standing: the newest calibration snapshot of a judge model in a tenant (the ``judge_calibrations`` rows
  written together, one per judge template and question, sharing ``computed_at``). Its ``agreement`` is the
  lowest of the snapshot's per-question agreements (each the mean over annotators of the judge's Cohen's
  kappa, quadratic-weighted for ratings); the judge is ``flagged`` when that is below the site's threshold
  :attr:`JudgeCalibrationSettings.judge_min_agreement`. A judge never calibrated, or whose agreement was
  undefined, is not flagged (``agreement`` None).
- Cost: the judge calls charged to an evaluation (``spend_ledger`` rows of role ``judge``, whose ``model_id``
  is the judge model; compaction keeps role and model), per judge model, with the verdicts it gave there
  (``judge_verdicts``) and their ratio, the mean cost per verdict, in the site currency.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from pydantic import Field
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.runtime.settings import CommonSettings

DEFAULT_MIN_AGREEMENT = 0.4
"""Kappa under 0.41 is at best "fair" agreement on Landis & Koch's (1977) scale; 0.41–0.60 is "moderate"."""


class JudgeCalibrationSettings(CommonSettings):
    """The agreement a judge must reach with people (``UEP_JUDGE_MIN_AGREEMENT``)."""

    judge_min_agreement: float = Field(
        DEFAULT_MIN_AGREEMENT,
        ge=-1,
        le=1,
        description="A judge whose newest calibration agreement (mean Cohen's kappa with the annotators, "
        "quadratic-weighted for ratings; the lowest over its questions) is below this is flagged in reports, "
        "leaderboards and the judge page.",
    )


_NEWEST = text(
    "SELECT judge_model_name, template, template_version, question, question_type, items, agreement, alpha, "
    "task_id, evaluation_id, computed_at FROM judge_calibrations c "
    "WHERE tenant_id = :t AND computed_at = (SELECT max(computed_at) FROM judge_calibrations m "
    "WHERE m.tenant_id = c.tenant_id AND m.judge_model_name = c.judge_model_name) "
    "ORDER BY judge_model_name, template, template_version, question"
)


def standing_of(rows: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    """The standing of one judge from the rows of its newest snapshot (dicts with ``agreement``, ``alpha``,
    ``items``, ``question``, ``computed_at``, ``task_id``): ``{"agreement", "flagged", "threshold",
    "computed_at", "task_id", "questions"}``; ``agreement`` the lowest defined one (None when none is)."""
    defined = [r["agreement"] for r in rows if r["agreement"] is not None]
    agreement = min(defined) if defined else None
    return {
        "agreement": agreement,
        "flagged": agreement is not None and agreement < threshold,
        "threshold": threshold,
        "computed_at": rows[0]["computed_at"] if rows else None,
        "task_id": str(rows[0]["task_id"]) if rows else None,
        "questions": [
            {k: r[k] for k in ("template", "template_version", "question", "question_type", "items", "agreement", "alpha")}
            for r in rows
        ],
    }


async def judge_standings(
    session: AsyncSession, tenant_id: uuid.UUID, threshold: float, names: Iterable[str] | None = None
) -> dict[str, dict[str, Any]]:
    """Judge model name → its standing (:func:`standing_of`) in tenant ``tenant_id``, for the judges calibrated
    there (only ``names`` when given)."""
    wanted = set(names) if names is not None else None
    by_judge: dict[str, list[dict[str, Any]]] = {}
    for r in (await session.execute(_NEWEST, {"t": tenant_id})).mappings():
        if wanted is None or r["judge_model_name"] in wanted:
            by_judge.setdefault(r["judge_model_name"], []).append(dict(r))
    return {name: standing_of(rows, threshold) for name, rows in by_judge.items()}


_COSTS = text(
    "WITH spent AS (SELECT l.evaluation_id, l.model_id, sum(l.settled) AS cost FROM spend_ledger l "
    "WHERE l.evaluation_id = ANY(:ids) AND l.role = 'judge' GROUP BY l.evaluation_id, l.model_id), "
    "given AS (SELECT v.evaluation_id, v.judge_model_id, min(v.judge_model_name) AS name, count(*) AS verdicts "
    "FROM judge_verdicts v WHERE v.evaluation_id = ANY(:ids) GROUP BY v.evaluation_id, v.judge_model_id) "
    "SELECT coalesce(g.evaluation_id, s.evaluation_id) AS evaluation_id, coalesce(g.name, m.name) AS judge_model, "
    "coalesce(s.cost, 0) AS cost, coalesce(g.verdicts, 0) AS verdicts FROM given g "
    "FULL JOIN spent s ON s.evaluation_id = g.evaluation_id AND s.model_id = g.judge_model_id "
    "LEFT JOIN models m ON m.id = s.model_id ORDER BY 1, 2"
)


async def judge_costs(session: AsyncSession, evaluation_ids: list[uuid.UUID]) -> list[dict[str, Any]]:
    """Per evaluation and judge model: ``{"evaluation_id", "judge_model", "cost", "verdicts",
    "cost_per_verdict"}`` (cost in the site currency, a float; ``cost_per_verdict`` None without verdicts).
    The caller scopes ``evaluation_ids`` to one tenant."""
    if not evaluation_ids:
        return []
    out = []
    for r in (await session.execute(_COSTS, {"ids": list(evaluation_ids)})).mappings():
        cost = float(r["cost"])
        out.append(
            {
                "evaluation_id": r["evaluation_id"],
                "judge_model": r["judge_model"],
                "cost": cost,
                "verdicts": int(r["verdicts"]),
                "cost_per_verdict": cost / r["verdicts"] if r["verdicts"] else None,
            }
        )
    return out


async def evaluation_judges(
    session: AsyncSession, evaluation_ids: list[uuid.UUID], threshold: float
) -> dict[uuid.UUID, list[dict[str, Any]]]:
    """Evaluation id → the judges that judged it: ``{"judge_model", "cost", "verdicts", "cost_per_verdict",
    "agreement", "flagged", "calibrated_at"}`` (cost as :func:`judge_costs`; standing as
    :func:`judge_standings` in the evaluation's tenant). Evaluations no judge judged are absent."""
    costs = await judge_costs(session, evaluation_ids)
    if not costs:
        return {}
    rows = await session.execute(text("SELECT id, tenant_id FROM evaluations WHERE id = ANY(:ids)"), {"ids": evaluation_ids})
    tenants: dict[uuid.UUID, uuid.UUID] = dict(rows.tuples().all())  # a list: dict() of a Result reads its keys()
    standings: dict[uuid.UUID, dict[str, dict[str, Any]]] = {}
    for t in set(tenants.values()):
        names = {c["judge_model"] for c in costs if tenants.get(c["evaluation_id"]) == t}
        standings[t] = await judge_standings(session, t, threshold, names)
    out: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for c in costs:
        s = standings.get(tenants.get(c["evaluation_id"]), {}).get(c["judge_model"], {})  # type: ignore[arg-type]
        out.setdefault(c["evaluation_id"], []).append(
            {
                "judge_model": c["judge_model"],
                "cost": c["cost"],
                "verdicts": c["verdicts"],
                "cost_per_verdict": c["cost_per_verdict"],
                "agreement": s.get("agreement"),
                "flagged": bool(s.get("flagged")),
                "calibrated_at": s.get("computed_at"),
            }
        )
    return out
