"""Judge service: consumes JudgeRequested.

LLM-as-judge scoring (rubrics, pairwise, juries, parsing with retries) arrives with the judge issue. Until
then no judge model is configured, so an item routed here is answered with a ScoreComputed that carries a
``judge_not_configured`` error and no score: the item is accounted for, and no score is invented.
"""

from __future__ import annotations

from faststream import AckPolicy
from faststream.kafka import KafkaBroker, KafkaMessage

from uep_common.events import ErrorInfo, JudgeRequested, ScoreComputed, Topics
from uep_common.messaging import UndecodableEvent, consumer_options, dead_letter, decode_event, raw_records, publish_event
from uep_judge.settings import JudgeSettings

JUDGE_METRIC = "llm_judge"


def unjudged(event: JudgeRequested) -> ScoreComputed:
    """The ScoreComputed for an item no judge could grade: no verdict, no score, an explicit error."""
    return ScoreComputed(
        **event.model_dump(
            include={"evaluation_id", "tenant_id", "sample_id", "repeat", "arm", "attempt", "benchmark_id", "model_id"}
        ),
        metric_name=JUDGE_METRIC,
        metric_version="-",
        is_correct=None,
        score=None,
        output=event.output,
        error=ErrorInfo(stage="judge", type="judge_not_configured", message="no judge model is configured"),
    )


def register(broker: KafkaBroker, settings: JudgeSettings) -> None:
    """Register the judge's subscriber on ``broker``."""

    @broker.subscriber(
        Topics.JUDGE_REQUESTED,
        **consumer_options(settings, "judge"),
        ack_policy=AckPolicy.NACK_ON_ERROR,
        title="judge:JudgeRequested",
        description="Grades items with an LLM judge (not configured yet: answers with an explicit error).",
    )
    async def on_request(msg: KafkaMessage) -> None:
        body = raw_records(msg)[0][0]
        try:
            event = decode_event(JudgeRequested, body)
        except UndecodableEvent as exc:
            await dead_letter(broker, body, Topics.JUDGE_REQUESTED, str(exc))
            return
        await publish_event(broker, unjudged(event))
