"""An upload declaring several metrics (``metrics``, one primary) and the positive class through the gateway:
stored in the benchmark's config as built-ins declare them; bad entries are 422 naming the entry."""

import json
import uuid

from sqlalchemy import text

ROWS = b"\n".join(
    json.dumps({"id": str(i), "input": {"question": f"q{i}"}, "reference": {"label": label}}).encode()
    for i, label in enumerate(["yes", "no", "yes"])
)


def _spec(slug: str, **extra) -> str:
    return json.dumps(
        {
            "slug": slug,
            "name": slug,
            "prompt": {"template": "{{ question }}"},
            "metric": {"name": "label_match"},
            "class_names": ["no", "yes"],
        }
        | extra
    )


def _upload(gateway, spec: str):
    return gateway.post("/v1/benchmarks", data={"spec": spec}, files={"file": ("d.jsonl", ROWS)})


def test_metrics_and_positive_class_are_stored(gateway, db):
    slug = f"multi-{uuid.uuid4().hex[:8]}"
    metrics = [{"name": "roc_auc"}, {"name": "f1_macro", "primary": True}]
    r = _upload(gateway, _spec(slug, metrics=metrics, positive_class="yes"))
    assert r.status_code == 201, r.text
    with db.connect() as c:
        config = c.execute(text("SELECT config FROM benchmarks WHERE slug = :s"), {"s": slug}).scalar()
    assert config["metrics"] == [
        {"name": "roc_auc", "params": {}, "primary": False},
        {"name": "f1_macro", "params": {}, "primary": True},
    ]
    assert config["positive_class"] == "yes" and config["class_names"] == ["no", "yes"]


def test_bad_metric_entries_and_positive_class_name_the_field(gateway, db):
    slug = f"multi-bad-{uuid.uuid4().hex[:8]}"
    cases = [
        (
            {"metrics": [{"name": "f1_macro"}, {"name": "no_such_metric"}]},
            ["body", "spec", "metrics", "1", "name"],
            "unknown_metric",
        ),
        ({"metrics": [{"name": "roc_auc"}, {"name": "roc_auc"}]}, ["body", "spec", "metrics", "1", "name"], "duplicate_metric"),
        ({"metrics": [{"name": "ndcg@10"}]}, ["body", "spec", "metrics", "0", "name"], "metric_kind_mismatch"),
        ({"positive_class": "maybe"}, ["body", "spec", "positive_class"], "value_error"),
    ]
    for extra, loc, kind in cases:
        r = _upload(gateway, _spec(slug, **extra))
        assert r.status_code == 422, (extra, r.text)
        assert {"loc": loc, "type": kind} in [{"loc": d["loc"], "type": d["type"]} for d in r.json()["detail"]], r.text
    with db.connect() as c:
        assert c.execute(text("SELECT count(*) FROM benchmarks WHERE slug = :s"), {"s": slug}).scalar() == 0
