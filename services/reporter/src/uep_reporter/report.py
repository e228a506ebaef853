"""Building an evaluation's report: the JSON document (:class:`~uep_reporter.report_model.Report`), the
self-contained HTML page (inline CSS, inline SVG charts, inline JS; no external resource) and the PDF
rendered from the HTML by headless Chromium (:mod:`uep_reporter.pdf`).

:func:`collect` reads PostgreSQL (async); :func:`render_html` is CPU work (matplotlib, Jinja2) meant for a
worker thread.
"""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime

import jinja2
from sqlalchemy.ext.asyncio import AsyncSession

from uep_common.analytics.charts import at_k_svg, bars_svg, confusion_svg, pr_svg, radar_svg, reliability_svg, roc_svg, trend_svg
from uep_common.analytics.comparison import NotComparableError, check_comparable, compare, find_baseline, no_baseline_reason
from uep_common.analytics.fingerprint import fingerprint
from uep_common.analytics.judge_standing import DEFAULT_MIN_AGREEMENT
from uep_common.analytics.set_metrics import is_proportion
from uep_common.analytics.summary import headline_of
from uep_common.contract.configs import EvaluationType, parse_benchmark_config, parse_evaluation_config
from uep_common.tables.models import Benchmark, Evaluation, Model
from uep_reporter import analysis, set_sections
from uep_reporter.primary import chart_metric
from uep_reporter.report_model import (
    BaselineInfo,
    BenchmarkInfo,
    ComparisonSection,
    EvaluationInfo,
    ModelInfo,
    Report,
    Summary,
)

MAX_TRANSITIONS = 500
MAX_CATEGORY_BARS = 40

_env = jinja2.Environment(
    loader=jinja2.PackageLoader("uep_reporter", "templates"),
    autoescape=jinja2.select_autoescape(["html", "j2"]),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_env.filters["version"] = analysis.version_label


class ReportError(LookupError):
    """The report cannot be built (unknown evaluation or baseline); the message says why."""


async def collect(
    session: AsyncSession,
    evaluation_id: uuid.UUID,
    baseline_id: uuid.UUID | None = None,
    report_id: uuid.UUID | None = None,
    judge_min_agreement: float = DEFAULT_MIN_AGREEMENT,
) -> Report:
    """Gather every section of the report of ``evaluation_id``.

    Args:
        session: a session on the uep database.
        evaluation_id: the evaluation reported.
        baseline_id: compare with this evaluation instead of the pinned / last completed one.
        report_id: the id to stamp (a new one when None).
        judge_min_agreement: a judge whose calibration agreement is below this is flagged in the judge section.

    Raises:
        ReportError: unknown evaluation or baseline, or a baseline of another benchmark.
    """
    ev = await session.get(Evaluation, evaluation_id)
    if ev is None:
        raise ReportError(f"unknown evaluation {evaluation_id}")
    model = await session.get(Model, ev.model_id)
    bench = await session.get(Benchmark, ev.benchmark_id)
    assert model is not None and bench is not None  # the evaluation's foreign keys
    ev_config = parse_evaluation_config(ev.config)
    judge_cfg = ev_config.judge
    evaluation_type = ev_config.evaluation_type or bench.evaluation_type
    metric = chart_metric(ev.summary)
    items = await analysis.load_items(session, ev.id, metric)
    summary = await analysis.build_summary(session, ev.id, items, analysis.metric_filter(judge_cfg))
    categories = analysis.category_breakdown(items)
    dimensions = analysis.dimension_breakdown(items, list(bench.capability_dimensions or []))

    reason: str | None
    if baseline_id is not None:
        baseline = await session.get(Evaluation, baseline_id)
        if baseline is None:
            raise ReportError(f"unknown baseline evaluation {baseline_id}")
        try:
            await check_comparable(session, ev, baseline)
        except NotComparableError as exc:
            raise ReportError(str(exc)) from exc
        reason = "requested"
    else:
        baseline, reason = await find_baseline(session, ev)
    comparison_section = None
    no_baseline = None
    fp = await fingerprint(session, ev.id)
    baseline_categories = None
    if baseline is not None:
        comp = await compare(session, ev.id, baseline.id, reason or "requested", limit=MAX_TRANSITIONS)
        bmodel = await session.get(Model, baseline.model_id)
        bbench = await session.get(Benchmark, baseline.benchmark_id)
        assert bmodel is not None and bbench is not None  # the baseline's foreign keys
        comparison_section = ComparisonSection(
            baseline=BaselineInfo(
                evaluation_id=baseline.id,
                reason=reason or "requested",
                model_name=bmodel.name,
                model_kind=bmodel.kind,
                model_version=bmodel.version,
                benchmark_version=bbench.version,
                completed_at=baseline.completed_at,
                accuracy=(baseline.summary or {}).get("accuracy"),
            ),
            comparison=comp,
        )
        if len(categories.rows) >= analysis.MIN_RADAR_AXES and not await analysis.enough_dimensions(session, ev, baseline):
            baseline_categories = analysis.category_breakdown(await analysis.load_items(session, baseline.id, metric))
    else:
        no_baseline = f"{await no_baseline_reason(session, ev)} (or pin one with POST /v1/evaluations/{{id}}/pin)"
    profile = await analysis.profile(session, ev, model, baseline, categories, baseline_categories, set_name(metric.key))
    classification, ranking = await set_sections.sections(session, ev)
    summary, fp = without_generation_fields(model.kind, summary, fp)
    return Report(
        report_id=report_id or uuid.uuid4(),
        generated_at=datetime.now(UTC),
        evaluation=EvaluationInfo(
            id=ev.id,
            status=ev.status,
            created_at=ev.created_at,
            completed_at=ev.completed_at,
            error=ev.error,
            pinned=bool(ev.pinned),
            repeats=ev.repeats,
            sample_limit=ev.sample_limit,
            experiment_id=getattr(ev, "experiment_id", None),
            arm=getattr(ev, "arm", None),
            benchmark=BenchmarkInfo(
                id=bench.id,
                slug=bench.slug,
                name=bench.name,
                version=bench.version,
                category=bench.category,
                capability_dimensions=list(bench.capability_dimensions or []),
                metric=parse_benchmark_config(bench.config).metric_name,
            ),
            model=ModelInfo(id=model.id, name=model.name, version=model.version, kind=model.kind),
        ),
        headline=headline_of(ev.summary),
        chart_metric=metric.key,
        summary=summary,
        categories=categories,
        dimensions=dimensions,
        profile=profile,
        trend=await analysis.trend(session, ev, model, bench, metric),
        comparison=comparison_section,
        no_baseline_reason=no_baseline,
        fingerprint=fp,
        fingerprint_diff=comparison_section.comparison.fingerprint_diff if comparison_section else None,
        failures=await analysis.failures(session, ev.id, items.category_source),
        judge=await analysis.judge_section(session, ev.id, judge_cfg, judge_min_agreement) if judge_cfg is not None else None,
        stages=await analysis.stages(session, ev.id, items) if evaluation_type == EvaluationType.hybrid else None,
        experiment=await analysis.experiment(session, ev, baseline.id if baseline is not None else None),
        classification=classification,
        ranking=ranking,
        methods=analysis.METHODS,
    )


NOT_GENERATIVE = frozenset({"classification", "ranking"})
"""Model kinds that generate no text: no tokens, no answer to extract, no decoding settings."""


def without_generation_fields(
    model_kind: str, summary: Summary, fingerprint: dict[str, object]
) -> tuple[Summary, dict[str, object]]:
    """``summary`` and ``fingerprint`` of a report, less what only text generation has when ``model_kind`` is a
    classifier's or a ranker's (:data:`NOT_GENERATIVE`): ``summary.tokens`` and ``summary.extraction`` become
    None and the ``decoding.*`` fields leave the fingerprint. Other kinds: both as given."""
    if model_kind not in NOT_GENERATIVE:
        return summary, fingerprint
    kept = {k: v for k, v in fingerprint.items() if not k.startswith("decoding.")}
    return summary.model_copy(update={"tokens": None, "extraction": None}), kept


def _pct(v: float | None) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f} %"


def _signed_pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:+.1f} pp"


def _fig(v: float | None, proportion: bool) -> str:
    """A figure as every view writes it: a proportion ``90.0 %``, another score ``0.755``."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{100 * v:.1f} %" if proportion else f"{v:.3f}"


def _civ(lo: float | None, hi: float | None, proportion: bool, method: str | None = None) -> str:
    """Its interval as every view writes it: ``[76.9–96.0] Wilson`` (percentage points) for a proportion,
    ``[0.700–0.810] bootstrap`` otherwise (the UI's ``ciText``, the CLI's ``uep_cli.figures.interval``);
    ``""`` when an end is missing."""
    if lo is None or hi is None:
        return ""
    text = f"[{100 * lo:.1f}–{100 * hi:.1f}]" if proportion else f"[{lo:.3f}–{hi:.3f}]"
    return f"{text} {METHOD_NAMES.get(method, method)}" if method else text


METHOD_NAMES = {"wilson": "Wilson", "bootstrap": "bootstrap"}
"""How an interval's method is named beside it."""


def _num(v: float | None) -> str:
    return "—" if v is None else f"{v:.4g}"


def _ms(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.0f} ms" if v < 10_000 else f"{v / 1000:.1f} s"


def _verdict(o) -> str:
    if o.is_correct is None:
        return f"error ({o.error})" if o.error else "no verdict"
    return "correct" if o.is_correct else "wrong"


def _show(v: object) -> str:
    if v is None:
        return "—"
    if isinstance(v, dict):
        return ", ".join(f"{k}={_show(x)}" for k, x in v.items()) or "{}"
    if isinstance(v, list):
        return "[" + ", ".join(_show(x) for x in v) + "]"
    return str(v)


def _interval_name(method: str | None) -> str:
    """How a chart title names the interval of its estimates (``Wilson 95 %``, ``bootstrap 95 %``)."""
    m = (method or "").lower()
    if m.startswith("wilson"):
        return "Wilson 95 %"
    return "bootstrap 95 %" if "bootstrap" in m or "bca" in m or "percentile" in m else "no interval per group"


def charts(report: Report) -> tuple[str, str, str | None]:
    """The profile (a radar, bars below three axes), trend and (with two or more categories) category SVGs of
    a report, each drawing the report's chart metric (:attr:`Report.chart_metric`, the headline's) and naming
    it on its title and axis."""
    ev = report.evaluation
    label = set_name(report.chart_metric)
    radar = radar_svg(
        report.profile.series,
        "Capability profile (each benchmark's headline metric)"
        if report.profile.source == "capability_dimensions"
        else f"{label[:1].upper()}{label[1:]} by category ({report.categories.source})",
    )
    trend = trend_svg(
        [(p.time, p.value, p.ci_low, p.ci_high, p.label) for p in report.trend],
        f"{ev.model.name} on {ev.benchmark.slug}: {label} over runs",
        highlight="this run",
        ylabel=label,
    )
    rows = [r for r in report.categories.rows if r.primary is not None and r.primary.value is not None]
    bars = None
    if len(rows) >= 2:
        shown = sorted(rows, key=lambda r: -(r.primary.value if r.primary and r.primary.value is not None else 0.0))
        shown = shown[:MAX_CATEGORY_BARS]
        note = f", best {len(shown)} of {len(rows)}" if len(shown) < len(rows) else ""
        bars = bars_svg(
            [
                (r.name, r.primary.value, r.primary.ci_low, r.primary.ci_high)
                for r in shown
                if r.primary and r.primary.value is not None
            ],
            f"{label[:1].upper()}{label[1:]} by {report.categories.source} ({_interval_name(shown[0].primary.method if shown[0].primary else None)}{note})",
            xlabel=label,
        )
    return radar, trend, bars


SET_NAMES = {
    "accuracy": "accuracy",
    "balanced_accuracy": "balanced accuracy",
    "precision_macro": "precision (macro)",
    "recall_macro": "recall (macro)",
    "f1_macro": "F1 (macro)",
    "precision_micro": "precision (micro)",
    "recall_micro": "recall (micro)",
    "f1_micro": "F1 (micro)",
    "precision_weighted": "precision (weighted)",
    "recall_weighted": "recall (weighted)",
    "f1_weighted": "F1 (weighted)",
    "roc_auc": "ROC-AUC",
    "pr_auc": "PR-AUC (average precision)",
    "log_loss": "log loss (lower is better)",
    "brier": "Brier score (lower is better)",
    "ece": "expected calibration error (lower is better)",
    "mrr": "MRR",
}
"""How the report names each set-level metric (ranking ones at k: ``NDCG@10``, …)."""


def set_name(key: str) -> str:
    """The display name of a set-level metric key (:data:`SET_NAMES`; ``ndcg@10`` → ``NDCG@10``)."""
    if key in SET_NAMES:
        return SET_NAMES[key]
    family, at, k = key.partition("@")
    if not at:
        return key
    shown = {"ndcg": "NDCG", "map": "MAP"}.get(family, family)
    return f"{shown}@{k}"


def item_metrics(versions: dict[str, list[str]]) -> list[tuple[str, list[str]]]:
    """The per-item metrics and their versions as a report header names them: ``"-"`` (the version of an item
    no scorer reached, an errored one) left out, and a metric with only that version with it."""
    shown = [(name, [v for v in vs if v != "-"]) for name, vs in versions.items()]
    return [(name, vs) for name, vs in shown if vs]


def set_charts(report: Report) -> dict[str, str]:
    """The SVG charts of the classification or ranking section (confusion matrix, ROC, precision-recall,
    reliability; metrics at k), keyed by name; empty for other evaluations."""
    out: dict[str, str] = {}
    c = report.classification
    if c is not None:
        if c.confusion_matrix is not None:
            cm = c.confusion_matrix
            out["confusion"] = confusion_svg(cm.labels, cm.predicted, cm.matrix, f"Confusion matrix ({c.n:,} items)")
        if c.probabilities:
            what = f"class {c.positive_label!r}" if c.positive_label else "each class vs the rest"
            out["roc"] = roc_svg([(x.label, x.area, x.x, x.y) for x in c.roc], f"ROC curve, {what}")
            out["pr"] = pr_svg([(x.label, x.area, x.x, x.y, x.prevalence or 0.0) for x in c.pr], f"Precision-recall, {what}")
            if c.reliability:
                ece = c.headline.get("ece")
                note = f" (ECE {ece.value:.3f})" if ece and ece.value is not None else ""
                out["reliability"] = reliability_svg([b.model_dump() for b in c.reliability], f"Reliability diagram{note}")
    r = report.ranking
    if r is not None and r.cutoffs:
        series = {set_sections.RANKING_FAMILIES[f]: r.curves.get(f, []) for f in set_sections.RANKING_FAMILIES if r.curves.get(f)}
        out["at_k"] = at_k_svg(r.cutoffs, series, f"Ranking metrics at k ({r.n:,} queries)")
    return out


def render_html(report: Report) -> str:
    """The self-contained HTML page of ``report`` (CPU-bound: charts + template)."""
    radar, trend, bars = charts(report)
    changes = {c.field: c for c in report.fingerprint_diff.changes} if report.fingerprint_diff else {}
    # the judge's rubric has its own table (with scales): the means table keeps the other metrics
    means = {k: e for k, e in report.summary.metric_means.items() if not (report.judge and k.startswith(("judge_", "pairwise_")))}
    return _env.get_template("report.html.j2").render(
        r=report,
        ev=report.evaluation,
        s=report.summary,
        radar=radar,
        trend=trend,
        bars=bars,
        set_charts=set_charts(report),
        set_name=set_name,
        changes=changes,
        metric_means=means,
        failure_categories=sorted({f.category for f in report.failures.items if f.category}),
        pct=_pct,
        signed_pct=_signed_pct,
        num=_num,
        fig=_fig,
        civ=_civ,
        is_proportion=is_proportion,
        is_wilson=lambda method: str(method or "").startswith("Wilson"),
        ms=_ms,
        item_metrics=item_metrics,
        verdict=_verdict,
        show=_show,
        any_score=lambda b: any(r.score_mean is not None for r in b.rows),
    )


def render_json(report: Report) -> bytes:
    """The JSON document of ``report`` (UTF-8, indented)."""
    return report.model_dump_json(indent=1).encode()
