"""The plumbing every service runs on: settings, the Kafka broker and consumers (:mod:`.messaging`,
:mod:`.consuming`, :mod:`.batch_polling`), the transactional outbox, database sessions, telemetry, logs and
metrics, background loops, PostgreSQL wake-ups, the service shell and artifact storage.

May import :mod:`uep_common.contract` and :mod:`uep_common.tables`; never a business rule (records, analytics,
registry, prompting)."""
