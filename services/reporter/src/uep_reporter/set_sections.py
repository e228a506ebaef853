"""The report's classification and ranking sections: the evaluation's set-level metrics (from its summary, or
computed now for an evaluation summarised before they existed) and, for a classifier with probabilities, its
ROC and precision-recall curves (computed from the stored items; ``uep_common.analytics.set_metrics``)."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.analytics.set_metrics import CLASSIFICATION_HEADLINE, PROBABILITY_HEADLINE, classification_curves
from uep_common.analytics.summary import benchmark_config_of, compute_set_metrics, load_classification
from uep_common.contract.events import SetMetrics
from uep_common.tables.models import Evaluation
from uep_reporter.report_model import ClassCurve, ClassificationSection, RankingSection

RANKING_FAMILIES = {"ndcg": "NDCG@k", "map": "MAP@k", "recall": "recall@k", "precision": "precision@k", "hit": "hit@k"}
"""Ranking metric families, as the report names them."""

CLASSIFICATION_ORDER = {name: i for i, name in enumerate(CLASSIFICATION_HEADLINE + PROBABILITY_HEADLINE)}
"""The order of the classification metrics in a report (a stored summary's JSONB keys come back sorted by length)."""


def _in_classification_order(headline: dict[str, Any]) -> dict[str, Any]:
    """``headline`` with its metrics in :data:`CLASSIFICATION_ORDER` (unknown names last, by name)."""
    return dict(sorted(headline.items(), key=lambda kv: (CLASSIFICATION_ORDER.get(kv[0], len(CLASSIFICATION_ORDER)), kv[0])))


async def set_metrics_of(session: AsyncSession, ev: Evaluation) -> SetMetrics | None:
    """The evaluation's set-level metrics: its summary's, else computed from its items (None when it is no
    classification or ranking evaluation)."""
    stored = (ev.summary or {}).get("set_metrics")
    if stored:
        return SetMetrics.model_validate(stored)
    if ev.details_cleaned_at is not None:
        return None  # retention removed the items
    return await compute_set_metrics(session, ev.id, (ev.summary or {}).get("metric_name") or await _metric_of(session, ev))


async def _metric_of(session: AsyncSession, ev: Evaluation) -> str | None:
    return (await benchmark_config_of(session, ev.id)).metric_name


async def classification_section(session: AsyncSession, ev: Evaluation, sm: SetMetrics) -> ClassificationSection:
    """The classification section of ``ev``'s report from its set-level metrics ``sm``; the curves come from the
    stored items (none after retention cleaned them)."""
    c: dict[str, Any] = sm.classification or {}
    roc: list[ClassCurve] = []
    pr: list[ClassCurve] = []
    if c.get("probabilities", {}).get("available") and ev.details_cleaned_at is None:
        config = await benchmark_config_of(session, ev.id)
        loaded = await load_classification(
            session, ev.id, list(c.get("labels") or []) or config.class_names, c.get("positive_label") or config.positive_class
        )
        curves = await asyncio.to_thread(classification_curves, loaded.items) if loaded.items is not None else None
        if curves:
            roc = [ClassCurve(label=r["label"], area=r["auc"], x=r["fpr"], y=r["tpr"]) for r in curves["roc"]]
            pr = [
                ClassCurve(label=r["label"], area=r["ap"], x=r["recall"], y=r["precision"], prevalence=r["prevalence"])
                for r in curves["pr"]
            ]
    return ClassificationSection(
        n=sm.n,
        excluded=sm.excluded,
        labels=list(c.get("labels") or []),
        positive_label=c.get("positive_label"),
        primary=sm.primary,
        method=sm.method,
        headline=_in_classification_order({k: v.model_dump() for k, v in sm.headline.items()}),
        per_class=list(c.get("per_class") or []),
        confusion_matrix=c.get("confusion_matrix"),
        no_class_predictions=int(c.get("no_class_predictions") or 0),
        probabilities=bool(c.get("probabilities", {}).get("available")),
        probabilities_note=str(c.get("probabilities", {}).get("note") or ""),
        roc=roc,
        pr=pr,
        reliability=c.get("reliability"),
    )


def ranking_section(sm: SetMetrics) -> RankingSection:
    """The ranking section of a report from the evaluation's set-level metrics ``sm``."""
    r: dict[str, Any] = sm.ranking or {}
    return RankingSection(
        n=sm.n,
        excluded_no_relevant=int(r.get("excluded") or 0),
        errors=int(r.get("errors") or 0),
        primary=sm.primary,
        method=sm.method,
        cutoffs=list(r.get("cutoffs") or []),
        headline={k: v.model_dump() for k, v in sm.headline.items()},
        curves=dict(r.get("curves") or {}),
    )


async def sections(session: AsyncSession, ev: Evaluation) -> tuple[ClassificationSection | None, RankingSection | None]:
    """``(classification, ranking)`` sections of ``ev``'s report (None for the kind it is not)."""
    sm = await set_metrics_of(session, ev)
    if sm is None:
        return None, None
    if sm.kind == "classification":
        return await classification_section(session, ev, sm), None
    return None, ranking_section(sm)
