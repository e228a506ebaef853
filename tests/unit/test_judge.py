"""The judge service with FastStream's in-memory test broker: until a judge model is configured it answers
every JudgeRequested with a ScoreComputed that carries an explicit error and no score (never an invented
one), and dead-letters what it cannot decode."""

import uuid

import pytest
from faststream.kafka import KafkaBroker, KafkaMessage, TestKafkaBroker

from uep_common.events import JudgeRequested, ScoreComputed, Topics
from uep_common.messaging import DEAD_LETTER_TOPIC
from uep_judge.service import register
from uep_judge.settings import JudgeSettings


@pytest.fixture
def broker():
    b = KafkaBroker()
    register(b, JudgeSettings())
    return b


async def test_judge_answers_with_an_error_not_a_score(broker):
    received: list[dict] = []

    @broker.subscriber(Topics.SCORE_COMPUTED)
    async def sink(body: dict) -> None:
        received.append(body)

    request = JudgeRequested(
        evaluation_id=uuid.uuid4(), tenant_id=uuid.uuid4(), sample_id=uuid.uuid4(), benchmark_id=uuid.uuid4(),
        model_id=uuid.uuid4(), prompt="Is the sky blue?", output="Yes.",
    )
    async with TestKafkaBroker(broker) as br:
        await br.publish(request.model_dump(mode="json"), Topics.JUDGE_REQUESTED, key=request.key())
    assert len(received) == 1
    score = ScoreComputed.model_validate(received[0])
    assert (score.is_correct, score.score) == (None, None)
    assert score.error.stage == "judge" and score.error.type == "judge_not_configured"
    assert score.item_key() == request.item_key() and score.output == "Yes."


async def test_undecodable_request_goes_to_the_dead_letter_topic(broker):
    dead: list[tuple[bytes, dict]] = []

    @broker.subscriber(DEAD_LETTER_TOPIC)
    async def sink(msg: KafkaMessage) -> None:
        dead.append((msg.body, msg.headers))

    async with TestKafkaBroker(broker) as br:
        await br.publish(b'{"evaluation_id": "nope"}', Topics.JUDGE_REQUESTED)
    assert len(dead) == 1
    body, headers = dead[0]
    assert body == b'{"evaluation_id": "nope"}'
    assert headers["uep-dlq-source-topic"] == Topics.JUDGE_REQUESTED
    assert "evaluation_id: Input should be a valid UUID" in headers["uep-dlq-reason"]
