"""The judge service's Kafka plumbing with FastStream's in-memory test broker: what it cannot decode goes to
the dead-letter topic (judging itself is tested against the real stack in tests/integration/test_judge.py)."""

from faststream.kafka import KafkaBroker, KafkaMessage, TestKafkaBroker

from uep_common.contract.events import Topics
from uep_common.runtime.messaging import DEAD_LETTER_TOPIC
from uep_judge.service import register
from uep_judge.settings import JudgeSettings


async def test_undecodable_request_goes_to_the_dead_letter_topic():
    broker = KafkaBroker()
    register(broker, JudgeSettings(), sessionmaker=None, relay=None, generate=None)
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
