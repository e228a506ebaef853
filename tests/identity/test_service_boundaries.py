"""The walls between services and tenants below the gateway, on the real stack: inference's internal
endpoint takes only the service credential, and a Kafka event that names the wrong tenant for its
evaluation is dead-lettered, never handled."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
from aiokafka import AIOKafkaProducer
from sqlalchemy import text

from integration.helpers import submit, wait_done
from uep_common.admin import create_tenant
from uep_common.contract.events import ReportRequested


def test_internal_generate_refuses_callers_without_the_service_credential(stack):
    url = f"http://127.0.0.1:{stack.service_ports['inference']}/internal/generate"
    body = {"target": {"model_id": str(uuid.uuid4()), "name": "uep-oracle"}, "prompt": "hi"}
    for headers in ({}, {"Authorization": "Bearer not-the-token"}, {"Authorization": f"Basic {stack.internal_token()}"}):
        r = httpx.post(url, json=body, headers=headers, timeout=10)
        assert r.status_code == 401, (headers, r.text)
        assert r.json()["detail"][0]["loc"] == ["header", "Authorization"]
    # the service credential gets past the check (this body is then refused for its own content)
    r = httpx.post(url, json={"prompt": "hi"}, headers={"Authorization": f"Bearer {stack.internal_token()}"}, timeout=10)
    assert r.status_code == 422


async def _publish(bootstrap: str, event: ReportRequested) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(
            event.topic,
            event.model_dump_json().encode(),
            key=event.key(),
            headers=[(k, v.encode()) for k, v in event.headers().items()],
        )
    finally:
        await producer.stop()


def test_an_event_naming_another_tenant_is_dead_lettered_not_handled(stack, gateway, db):
    evaluation_id = submit(gateway, benchmark="gsm8k", model="uep-oracle", sample_limit=2)
    wait_done(gateway, evaluation_id)
    create_tenant(stack.database_url, "guard-other")
    # the completed evaluation's own report is written after its completion: count once it is there
    deadline, ready = time.monotonic() + 60, 0
    while time.monotonic() < deadline and not ready:
        with db.connect() as c:
            ready = c.execute(
                text("SELECT count(*) FROM reports WHERE evaluation_id = :e AND status = 'ready'"), {"e": evaluation_id}
            ).scalar()
        time.sleep(0.2)
    assert ready == 1
    with db.connect() as c:
        other = c.execute(text("SELECT id FROM tenants WHERE slug = 'guard-other'")).scalar_one()
        reports_before = c.execute(text("SELECT count(*) FROM reports WHERE evaluation_id = :e"), {"e": evaluation_id}).scalar()
    forged = ReportRequested(evaluation_id=uuid.UUID(evaluation_id), tenant_id=other, report_id=uuid.uuid4())
    asyncio.run(_publish(f"127.0.0.1:{stack.broker_port}", forged))
    deadline, reason = time.monotonic() + 60, None
    while time.monotonic() < deadline and reason is None:
        with db.connect() as c:
            reason = c.execute(
                text("SELECT reason FROM dead_letters WHERE evaluation_id = :e AND reason LIKE 'tenant_mismatch%'"),
                {"e": evaluation_id},
            ).scalar()
        time.sleep(0.5)
    assert reason is not None and "belongs to another tenant" in reason
    with db.connect() as c:
        reports_after = c.execute(text("SELECT count(*) FROM reports WHERE evaluation_id = :e"), {"e": evaluation_id}).scalar()
        stored = c.execute(text("SELECT tenant_id FROM dead_letters WHERE reason LIKE 'tenant_mismatch%'")).scalars().all()
    assert reports_after == reports_before
    # the dead letter belongs to the evaluation's owner (trigger), not to the tenant the forgery named
    assert other not in stored
