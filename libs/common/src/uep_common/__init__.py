"""uep_common: what every uep service shares, in rooms whose import directions ``make check`` enforces
(import-linter contracts in the root ``pyproject.toml``), from the bottom up:

- :mod:`uep_common.contract` — the public, versioned event contract and the typed configurations; imports nothing
  else of ours.
- :mod:`uep_common.tables` — SQLAlchemy 2.0 tables and Alembic migrations (PostgreSQL is the system of record).
- :mod:`uep_common.runtime` — settings, Kafka messaging and consumers, the outbox, sessions, telemetry, logs.
- :mod:`uep_common.prompting` and :mod:`uep_common.registry` — prompt templates in a sandbox; the model registry.
- :mod:`uep_common.analytics` — statistics, set metrics, summaries, comparisons, leaderboards, charts.
- :mod:`uep_common.records` — the rules that change shared records: lifecycle, budgets, creation.
- :mod:`uep_common.builtin` — the built-in catalogue and its data; :mod:`uep_common.admin` — ``uep-admin``.
"""
