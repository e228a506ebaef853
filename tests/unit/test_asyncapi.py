"""The committed AsyncAPI document is what the code generates, and it documents every event's topic and schema."""

import json
import subprocess
import sys
from pathlib import Path

from uep_common.contract.events import EVENT_TYPES

ROOT = Path(__file__).resolve().parents[2]


def test_committed_asyncapi_is_current():
    r = subprocess.run([sys.executable, str(ROOT / "docs" / "generate_asyncapi.py"), "--check"], capture_output=True)
    assert r.returncode == 0, "docs/asyncapi.json is stale: run `make asyncapi` and commit it"


def test_every_event_has_a_channel_with_its_schema():
    doc = json.loads((ROOT / "docs" / "asyncapi.json").read_text())
    assert doc["asyncapi"].startswith("3.")
    schemas = doc["components"]["schemas"]
    addresses = {c["address"] for c in doc["channels"].values()}
    for name, cls in EVENT_TYPES.items():
        assert name in schemas, name
        assert cls.topic in addresses, cls.topic
        assert {"schema_version", "event_id", "evaluation_id", "tenant_id", "occurred_at"} <= set(schemas[name]["properties"])
