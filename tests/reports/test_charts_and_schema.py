"""Charts render as inline, self-contained SVG; the published JSON Schema matches the report models."""

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from uep_common.analytics.charts import bars_svg, radar_svg, trend_svg
from uep_reporter.report_model import REPORT_SCHEMA_VERSION, json_schema

ROOT = Path(__file__).resolve().parents[2]


def _self_contained(svg: str) -> None:
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "<?xml" not in svg and "<!DOCTYPE" not in svg and "<metadata>" not in svg
    assert not re.search(r'(href|src)="https?:', svg)


def test_radar_has_one_polygon_per_series_and_labels():
    svg = radar_svg({"a": {"math": 0.5, "coding": 0.25, "knowledge": 1.0}, "b": {"math": 0.75, "coding": 0.5}}, "Profile")
    _self_contained(svg)
    for label in ("math", "coding", "knowledge", "Profile", ">a<", ">b<"):
        assert label in svg
    assert radar_svg({"a": {"x": 0.5}}, "one") != radar_svg({"a": {"x": 0.6}}, "one")
    assert radar_svg({"a": {"x": 0.5}}, "one") == radar_svg({"a": {"x": 0.5}}, "one")  # deterministic bytes
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        radar_svg({"a": {"x": 1.5}}, "bad")


def test_chart_ids_differ_between_charts():
    # two charts on one page must not share clip-path ids (a page would clip one with the other's path)
    a = set(re.findall(r'id="([^"]+)"', radar_svg({"s": {"x": 0.2, "y": 0.4, "z": 0.6}}, "A")))
    b = set(re.findall(r'id="([^"]+)"', radar_svg({"s": {"x": 0.3, "y": 0.4, "z": 0.6}}, "B")))
    assert a and b and not (a & b)


def test_trend_and_bars():
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    svg = trend_svg(
        [(t0 + timedelta(days=i), 0.5 + i / 20, 0.4 + i / 20, 0.6 + i / 20, f"v{i}") for i in range(4)], "Trend", "v3"
    )
    _self_contained(svg)
    assert "v0" in svg and "v3" in svg and "Trend" in svg
    assert "no completed run" in trend_svg([], "Empty")
    bars = bars_svg([("algebra", 0.7, 0.6, 0.8), ("anatomy", 0.4, 0.3, 0.5)], "By subject")
    _self_contained(bars)
    assert "algebra" in bars and "anatomy" in bars


def test_published_schema_is_up_to_date():
    # regenerate with: python -m uep_reporter.report_model > docs/report.schema.json
    published = json.loads((ROOT / "docs" / "report.schema.json").read_text())
    assert published == json.loads(json.dumps(json_schema()))
    assert published["version"] == REPORT_SCHEMA_VERSION and published["$id"].endswith(f"report-{REPORT_SCHEMA_VERSION}.json")
    assert set(published["required"]) >= {
        "schema_version",
        "evaluation",
        "summary",
        "trend",
        "profile",
        "fingerprint",
        "failures",
    }


def _drawn(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def test_fewer_than_three_dimensions_draw_bars_not_a_degenerate_radar():
    from uep_common.analytics.charts import radar_figure

    series = {"smollm2 q4_1 (this run)": {"math": 0.5, "coding": 0.3}, "smollm2 v1 (baseline)": {"math": 0.4}}
    fig = radar_figure(series, "Capability profile")
    (ax,) = fig.axes
    assert ax.name == "rectilinear"  # bars, not a polar radar
    assert [round(p.get_width(), 2) for p in ax.patches] == [0.5, 0.3, 0.4]  # one bar per series and dimension
    assert [t.get_text() for t in ax.get_yticklabels()] == ["math", "coding"]
    svg = radar_svg(series, "Capability profile")
    assert "degenerates" not in svg and "coding" in svg and "smollm2 q4_1 (this run)" in svg
    assert radar_figure({"s": {"a": 0.1, "b": 0.2, "c": 0.3}}, "three").axes[0].name == "polar"


def test_the_radar_legend_overlaps_no_label():
    from uep_common.analytics.charts import radar_figure

    # four dimensions: one of them sits at six o'clock, right above where the legend goes
    series = {
        "model (this run)": {"math": 0.5, "coding": 0.3, "knowledge": 0.8, "reasoning": 0.6},
        "model (baseline)": {"math": 0.4, "coding": 0.6, "knowledge": 0.7, "reasoning": 0.5},
    }
    fig = radar_figure(series, "Capability profile")
    renderer = _drawn(fig)
    (legend,) = fig.legends
    box = legend.get_window_extent(renderer)
    (ax,) = fig.axes
    texts = [*ax.get_xticklabels(), *ax.get_yticklabels(), ax.title, *fig.texts]
    for t in texts:
        if t.get_text():
            assert not box.overlaps(t.get_window_extent(renderer)), t.get_text()
    assert not box.overlaps(ax.get_window_extent(renderer))


def test_trend_time_ticks_read_as_times_and_dates():
    from uep_common.analytics.charts import trend_figure

    def labels(step: timedelta, n: int) -> tuple[list[str], str]:
        t0 = datetime(2026, 3, 1, 8, 2, tzinfo=UTC)
        fig = trend_figure([(t0 + i * step, 0.5, 0.4, 0.6, f"r{i}") for i in range(n)], "t")
        _drawn(fig)
        ax = fig.axes[0]
        return [t.get_text() for t in ax.get_xticklabels()], ax.xaxis.get_major_formatter().get_offset()

    # runs 30 s apart: every tick says its time (not "08:02, 30, 08:03, 30"), the date under the axis
    ticks, offset = labels(timedelta(seconds=30), 4)
    assert ticks and all(re.fullmatch(r"\d\d:\d\d(:\d\d)?", t) for t in ticks), ticks
    assert offset == "2026-03-01 UTC"
    ticks, _ = labels(timedelta(minutes=7), 5)
    assert all(re.fullmatch(r"\d\d:\d\d", t) for t in ticks), ticks
    ticks, _ = labels(timedelta(days=3), 6)  # days: "Mar 04", never a bare day number
    assert all(re.fullmatch(r"[A-Z][a-z]{2}( \d\d)?", t) for t in ticks), ticks
