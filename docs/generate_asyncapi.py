"""Generate ``docs/asyncapi.json``: the AsyncAPI 3.0 document of uep's topics, produced by FastStream from
the services' real handlers and publishers (every service registers on one documentation broker).

Run ``make asyncapi`` after changing an event or a topic; tests/unit/test_asyncapi.py fails while the
committed document differs from what the code generates.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).with_name("asyncapi.json")


def build() -> dict:
    """The AsyncAPI document as a dict."""
    from faststream.kafka import KafkaBroker
    from faststream.specification import AsyncAPI

    from uep_common.contract import events
    from uep_common.runtime.messaging import DEAD_LETTER_TOPIC
    from uep_inference.service import register as inference
    from uep_inference.settings import InferenceSettings
    from uep_judge.service import register as judge
    from uep_judge.settings import JudgeSettings
    from uep_reporter.service import register as reporter
    from uep_reporter.settings import ReporterSettings
    from uep_scheduler.lifecycle import register_dead_letters as scheduler_dead_letters
    from uep_scheduler.service import register as scheduler
    from uep_scheduler.settings import SchedulerSettings
    from uep_scorer.service import register as scorer
    from uep_scorer.settings import ScorerSettings

    broker = KafkaBroker("kafka:9092", description="uep event bus (Apache Kafka)")
    broker.publisher(
        events.Topics.EVALUATION_REQUESTED,
        schema=events.EvaluationRequested,
        title="EvaluationRequested",
        description="Published by the gateway's outbox relay when an evaluation is accepted.",
    )
    broker.publisher(
        events.Topics.RESCORE_REQUESTED,
        schema=events.RescoreRequested,
        title="RescoreRequested",
        description="Published by the gateway's outbox relay when a rescore of a finished evaluation is requested.",
    )
    broker.publisher(
        events.Topics.REPORT_REQUESTED,
        schema=events.ReportRequested,
        title="ReportRequested",
        description="Published by the gateway's outbox relay when a report is requested (POST /v1/evaluations/{id}/reports).",
    )
    broker.publisher(
        DEAD_LETTER_TOPIC,
        schema=bytes,
        title="DeadLetter",
        description="Undecodable messages, verbatim, with headers uep-dlq-reason and uep-dlq-source-topic.",
    )
    scheduler(broker, SchedulerSettings(), None)
    scheduler_dead_letters(broker, SchedulerSettings(), None)
    inference(broker, InferenceSettings(), None)
    scorer(broker, ScorerSettings(), None)
    judge(broker, JudgeSettings(), None, None, None)
    reporter(broker, ReporterSettings(), None, None, None)
    spec = AsyncAPI(
        broker,
        title="uep events",
        version=f"schema v{events.SCHEMA_VERSION}",
        description=(events.__doc__ or "").strip(),
    )
    return json.loads(spec.to_specification().to_json())


def main() -> int:
    """Write the document; ``--check`` exits 1 if the committed one is out of date."""
    doc = json.dumps(build(), indent=2, sort_keys=True) + "\n"
    if "--check" in sys.argv:
        return 0 if OUT.exists() and OUT.read_text() == doc else 1
    OUT.write_text(doc)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
