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

from uep_common.charts import bars_svg, radar_svg, trend_svg
from uep_common.comparison import compare, find_baseline
from uep_common.configs import parse_benchmark_config, parse_evaluation_config
from uep_common.db.models import Benchmark, Evaluation, Model
from uep_common.fingerprint import fingerprint
from uep_reporter import analysis
from uep_reporter.report_model import (
    BaselineInfo,
    BenchmarkInfo,
    ComparisonSection,
    EvaluationInfo,
    ModelInfo,
    Report,
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
    session: AsyncSession, evaluation_id: uuid.UUID, baseline_id: uuid.UUID | None = None, report_id: uuid.UUID | None = None
) -> Report:
    """Gather every section of the report of ``evaluation_id``.

    Args:
        baseline_id: compare with this evaluation instead of the pinned / last completed one.
        report_id: the id to stamp (a new one when None).

    Raises:
        ReportError: unknown evaluation or baseline.
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
    items = await analysis.load_items(session, ev.id)
    summary = await analysis.build_summary(session, ev.id, items, analysis.metric_filter(judge_cfg))
    categories = analysis.category_breakdown(items)
    dimensions = analysis.dimension_breakdown(items, list(bench.capability_dimensions or []))

    reason: str | None
    if baseline_id is not None:
        baseline = await session.get(Evaluation, baseline_id)
        if baseline is None:
            raise ReportError(f"unknown baseline evaluation {baseline_id}")
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
                model_version=bmodel.version,
                benchmark_version=bbench.version,
                completed_at=baseline.completed_at,
                accuracy=(baseline.summary or {}).get("accuracy"),
            ),
            comparison=comp,
        )
        if len(categories.rows) >= analysis.MIN_RADAR_AXES and not await analysis.enough_dimensions(session, ev, baseline):
            baseline_categories = analysis.category_breakdown(await analysis.load_items(session, baseline.id))
    else:
        no_baseline = (
            f"no baseline: no other completed evaluation of {model.name} on {bench.slug} "
            "(pin one with POST /v1/evaluations/{id}/pin)"
        )
    profile = await analysis.profile(session, ev, model, baseline, categories, baseline_categories)
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
            model=ModelInfo(id=model.id, name=model.name, version=model.version),
        ),
        summary=summary,
        categories=categories,
        dimensions=dimensions,
        profile=profile,
        trend=await analysis.trend(session, ev, model, bench),
        comparison=comparison_section,
        no_baseline_reason=no_baseline,
        fingerprint=fp,
        fingerprint_diff=comparison_section.comparison.fingerprint_diff if comparison_section else None,
        failures=await analysis.failures(session, ev.id, items.category_source),
        judge=await analysis.judge_section(session, ev.id, judge_cfg) if judge_cfg is not None else None,
        stages=await analysis.stages(session, ev.id, items) if evaluation_type == "hybrid" else None,
        experiment=await analysis.experiment(session, ev, baseline.id if baseline is not None else None),
        methods=analysis.METHODS,
    )


def _pct(v: float | None) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f} %"


def _signed_pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:+.1f} pp"


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


def charts(report: Report) -> tuple[str, str, str | None]:
    """The profile (a radar, bars below three axes), trend and (with two or more categories) category SVGs of
    a report."""
    ev = report.evaluation
    radar = radar_svg(
        report.profile.series,
        "Capability profile"
        if report.profile.source == "capability_dimensions"
        else f"Accuracy by category ({report.categories.source})",
    )
    trend = trend_svg(
        [(p.time, p.value, p.ci_low, p.ci_high, p.label) for p in report.trend],
        f"{ev.model.name} on {ev.benchmark.slug}: accuracy over runs",
        highlight="this run",
    )
    rows = [r for r in report.categories.rows if r.accuracy is not None]
    bars = None
    if len(rows) >= 2:
        shown = sorted(rows, key=lambda r: -r.accuracy.value)[:MAX_CATEGORY_BARS]
        note = f", best {len(shown)} of {len(rows)}" if len(shown) < len(rows) else ""
        bars = bars_svg(
            [(r.name, r.accuracy.value, r.accuracy.ci_low, r.accuracy.ci_high) for r in shown],
            f"Accuracy by {report.categories.source} (Wilson 95 %{note})",
        )
    return radar, trend, bars


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
        changes=changes,
        metric_means=means,
        failure_categories=sorted({f.category for f in report.failures.items if f.category}),
        pct=_pct,
        signed_pct=_signed_pct,
        num=_num,
        ms=_ms,
        verdict=_verdict,
        show=_show,
        any_score=lambda b: any(r.score_mean is not None for r in b.rows),
    )


def render_json(report: Report) -> bytes:
    """The JSON document of ``report`` (UTF-8, indented)."""
    return report.model_dump_json(indent=1).encode()
