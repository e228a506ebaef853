"""uep_common.messaging.publish: a Kafka error refreshes the producer's metadata and tries again, at most
PUBLISH_ATTEMPTS times in all; other errors are not retried."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from aiokafka.errors import UnknownError

from uep_common.messaging import PUBLISH_ATTEMPTS, publish


class _Broker:
    """A broker whose first ``failures`` publishes raise ``error``; counts metadata refreshes."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures, self.error = failures, error
        self.calls, self.refreshes, self.sent = 0, 0, []
        client = SimpleNamespace(force_metadata_update=self._refresh)
        self._producer = SimpleNamespace(_producer=SimpleNamespace(producer=SimpleNamespace(client=client)))

    def _refresh(self) -> None:
        self.refreshes += 1

    async def publish(self, body, *, topic, key, headers) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        self.sent.append((topic, key, body))


def test_one_failure_refreshes_metadata_and_publishes_once():
    broker = _Broker(1, UnknownError())
    asyncio.run(publish(broker, {"a": 1}, topic="t", key=b"k", headers={}))
    assert (broker.calls, broker.refreshes, broker.sent) == (2, 1, [("t", b"k", {"a": 1})])


def test_gives_up_after_the_last_attempt_with_the_error():
    broker = _Broker(PUBLISH_ATTEMPTS, UnknownError())
    with pytest.raises(UnknownError):
        asyncio.run(publish(broker, {}, topic="t", key=None, headers={}))
    assert (broker.calls, broker.refreshes, broker.sent) == (3, 2, [])


def test_a_non_kafka_error_is_not_retried():
    broker = _Broker(1, ValueError("bad body"))
    with pytest.raises(ValueError):
        asyncio.run(publish(broker, {}, topic="t", key=None, headers={}))
    assert (broker.calls, broker.refreshes) == (1, 0)
