"""uep_common: what every uep service shares.

- :mod:`uep_common.events` — the public, versioned event contract (schemas, topics, keys, headers).
- :mod:`uep_common.settings` — environment-driven settings (pydantic-settings).
- :mod:`uep_common.db` — SQLAlchemy 2.0 models, sessions and Alembic migrations (PostgreSQL is the system of record).
- :mod:`uep_common.messaging` — FastStream broker factory, topic creation, consumer defaults.
- :mod:`uep_common.outbox` — transactional outbox writer and relay.
- :mod:`uep_common.telemetry` — OpenTelemetry set-up and W3C trace context helpers.
"""
