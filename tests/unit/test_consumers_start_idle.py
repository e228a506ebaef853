"""Every Kafka consumer of every uep service long-polls with the settings' fetch wait and fetch-loop wake-up
(uep_common.runtime.messaging.consumer_options / broadcast_options): Kafka answers a waiting fetch as soon as a record
arrives, so a long wait only makes an idle consumer fetch less often. A subscriber registered with other waits
would poll an idle broker faster. The subscribers are registered on real FastStream brokers and read back from
what each subscriber hands to aiokafka."""

from __future__ import annotations

from typing import Any

from uep_common.runtime.messaging import make_broker
from uep_inference.service import register as register_inference
from uep_inference.settings import InferenceSettings
from uep_judge.service import register as register_judge
from uep_judge.settings import JudgeSettings
from uep_reporter.service import register as register_reporter
from uep_reporter.settings import ReporterSettings
from uep_scheduler.lifecycle import register_dead_letters
from uep_scheduler.service import register as register_scheduler
from uep_scheduler.settings import SchedulerSettings
from uep_scorer.service import register as register_scorer
from uep_scorer.settings import ScorerSettings

# Registration only stores a service's collaborators for its handlers, none of which runs here.
NOT_USED: Any = None
WAITS: dict[str, Any] = {"kafka_fetch_max_wait_ms": 2000, "kafka_consumer_timeout_ms": 1000}


def _consumer_waits(settings: Any, *registers: Any) -> list[tuple[str, Any, Any]]:
    """``(topic, fetch_max_wait_ms, consumer_timeout_ms)`` of each subscriber after ``registers`` ran on one
    broker (each a callable of the broker)."""
    broker = make_broker(settings)
    for register in registers:
        register(broker)
    subscribers: list[Any] = list(broker.subscribers)  # their topic names and connection arguments are not public
    return [
        (",".join(sub.topic_names), sub._connection_args["fetch_max_wait_ms"], sub._connection_args["consumer_timeout_ms"])
        for sub in subscribers
    ]


def test_every_consumer_of_every_service_long_polls_with_the_settings_waits():
    inference = InferenceSettings(**WAITS)
    scheduler = SchedulerSettings(**WAITS)
    scorer = ScorerSettings(**WAITS)
    judge = JudgeSettings(**WAITS)
    reporter = ReporterSettings(**WAITS)
    by_service = {
        "inference": _consumer_waits(inference, lambda b: register_inference(b, inference, backends=NOT_USED)),
        "scheduler": _consumer_waits(
            scheduler,
            lambda b: register_scheduler(b, scheduler, NOT_USED),
            lambda b: register_dead_letters(b, scheduler, NOT_USED),
        ),
        "scorer": _consumer_waits(scorer, lambda b: register_scorer(b, scorer, NOT_USED)),
        "judge": _consumer_waits(judge, lambda b: register_judge(b, judge, NOT_USED, NOT_USED, NOT_USED)),
        "reporter": _consumer_waits(reporter, lambda b: register_reporter(b, reporter, NOT_USED, NOT_USED, NOT_USED)),
    }
    topics = {service: sorted(t for t, _, _ in consumers) for service, consumers in by_service.items()}
    assert topics["inference"] == ["uep.evaluation.completed.v1", "uep.sample.dispatched.v1"]  # the first: no group
    assert sum(map(len, topics.values())) == 11, topics  # ten groups and the broadcast one; the gateway has none
    wrong = [(service, *c) for service, consumers in by_service.items() for c in consumers if c[1:] != (2000, 1000)]
    assert wrong == []
