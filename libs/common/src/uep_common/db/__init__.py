"""Database layer: SQLAlchemy 2.0 models (:mod:`.models`), engines/sessions (:mod:`.session`), Alembic migrations."""
