"""Charts render as inline, self-contained SVG; the published JSON Schema matches the report models."""

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from uep_common.charts import bars_svg, radar_svg, trend_svg
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
