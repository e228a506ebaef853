"""Judge service: consumes JudgeRequested.

LLM-as-judge scoring (rubrics, pairwise, juries, parsing with retries) arrives with the judge issue. Until
then no judge model is configured, so an item routed here is answered with a ScoreComputed that carries a
``judge_not_configured`` error and no score: the item is accounted for, and no score is invented.
"""

from __future__ import annotations

from faststream import AckPolicy
from faststream.kafka import KafkaBroker, KafkaMessage

from uep_common.events import ErrorInfo, JudgeRequested, ScoreComputed, Topics
from uep_common.messaging import consumer_options, decode_or_dead_letter, publish_event
from uep_judge.settings import JudgeSettings

JUDGE_METRIC = "llm_judge"


def unjudged(event: JudgeRequested) -> ScoreComputed:
    """The ScoreComputed for an item no judge could grade: no verdict, no score, an explicit error."""
    return ScoreComputed(
        **event.item_fields(),
        benchmark_id=event.benchmark_id,
        model_id=event.model_id,
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
        event = await decode_or_dead_letter(broker, JudgeRequested, msg, Topics.JUDGE_REQUESTED)
        if event is None:
            return
        await publish_event(broker, unjudged(event))
