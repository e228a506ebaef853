"""Database layer: the declarative base (:mod:`.base`), the core tables (:mod:`.models`), one table module per
area, all of them on one metadata (:mod:`.tables`), engines/sessions (:mod:`.session`), Alembic migrations."""
