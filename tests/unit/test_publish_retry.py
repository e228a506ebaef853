"""uep_common.runtime.messaging.publish: a Kafka error (the broker restarting, a leader moving) is tried again, at most
PUBLISH_ATTEMPTS times in all; other errors are not retried."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.errors import KafkaConnectionError

from uep_common.runtime.messaging import PUBLISH_ATTEMPTS, publish


class _Broker:
    """A broker whose first ``failures`` publishes raise ``error``."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures, self.error = failures, error
        self.calls, self.sent = 0, []

    async def publish(self, body, *, topic, key, headers) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        self.sent.append((topic, key, body))


def test_one_failure_is_tried_again_and_publishes_once():
    broker = _Broker(1, KafkaConnectionError())
    asyncio.run(publish(broker, {"a": 1}, topic="t", key=b"k", headers={}))
    assert (broker.calls, broker.sent) == (2, [("t", b"k", {"a": 1})])


def test_gives_up_after_the_last_attempt_with_the_error():
    broker = _Broker(PUBLISH_ATTEMPTS, KafkaConnectionError())
    with pytest.raises(KafkaConnectionError):
        asyncio.run(publish(broker, {}, topic="t", key=None, headers={}))
    assert (broker.calls, broker.sent) == (3, [])


def test_a_non_kafka_error_is_not_retried():
    broker = _Broker(1, ValueError("bad body"))
    with pytest.raises(ValueError):
        asyncio.run(publish(broker, {}, topic="t", key=None, headers={}))
    assert broker.calls == 1
