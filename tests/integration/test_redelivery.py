"""Idempotent reporter: a ScoreComputed delivered again (same event, or a conflicting duplicate for the same
item) through the real broker leaves one row per item and the same summary and progress."""

import asyncio
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from sqlalchemy import text

from uep_common.contract.events import ScoreComputed, Topics

from .helpers import submit, wait_done


async def _publish_and_wait_consumed(bootstrap: str, events: list[ScoreComputed], timeout_s: float = 30) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        sent = [
            await producer.send_and_wait(
                Topics.SCORE_COMPUTED,
                e.model_dump_json().encode(),
                key=e.key(),
                headers=[(k, v.encode()) for k, v in e.headers().items()],
            )
            for e in events
        ]
    finally:
        await producer.stop()
    # The reporter commits after storing; wait until its committed offsets pass what we sent.
    watcher = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id="uep.reporter", enable_auto_commit=False)
    await watcher.start()
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        for md in sent:
            tp = TopicPartition(md.topic, md.partition)
            while (await watcher.committed(tp) or 0) <= md.offset:
                assert loop.time() < deadline, f"reporter did not consume offset {md.offset} of {tp}"
                await asyncio.sleep(0.2)
    finally:
        await watcher.stop()


def test_redelivered_scores_change_nothing(gateway, db, stack):
    evaluation_id = submit(gateway, benchmark="gsm8k", model="uep-oracle", sample_limit=3)
    before = wait_done(gateway, evaluation_id)
    assert before["summary"]["correct"] == 2
    with db.connect() as c:
        row = c.execute(
            text(
                "SELECT r.sample_id, r.score_event_id, e.tenant_id, e.benchmark_id, e.model_id FROM sample_results r "
                "JOIN evaluations e ON e.id = r.evaluation_id JOIN samples s ON s.id = r.sample_id "
                "WHERE r.evaluation_id = :e AND s.ordinal = 0"
            ),
            {"e": evaluation_id},
        ).one()
    original = ScoreComputed(
        event_id=row.score_event_id,
        evaluation_id=evaluation_id,
        tenant_id=row.tenant_id,
        sample_id=row.sample_id,
        benchmark_id=row.benchmark_id,
        model_id=row.model_id,
        metric_name="gsm8k_numeric_exact_match",
        metric_version="1",
        is_correct=True,
        score=1.0,
        output="#### 18",
    )
    conflicting = original.model_copy(update={"event_id": uuid.uuid4(), "is_correct": False, "score": 0.0, "output": "#### 0"})
    asyncio.run(_publish_and_wait_consumed(f"127.0.0.1:{stack.broker_port}", [original, original, conflicting]))

    after = gateway.get(f"/v1/evaluations/{evaluation_id}").json()
    assert after["summary"] == before["summary"]
    assert after["progress"] == before["progress"]
    with db.connect() as c:
        rows = c.execute(
            text(
                "SELECT count(*), bool_and(is_correct), min(score_event_id::text) FROM sample_results "
                "WHERE evaluation_id = :e AND sample_id = :s"
            ),
            {"e": evaluation_id, "s": row.sample_id},
        ).one()
        completed_items = c.execute(text("SELECT completed_items FROM evaluations WHERE id = :e"), {"e": evaluation_id}).scalar()
    assert rows[0] == 1 and rows[1] is True and rows[2] == str(row.score_event_id)
    assert completed_items == 3
